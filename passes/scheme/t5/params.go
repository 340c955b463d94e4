package t5

import (
	"github.com/onnxpe/onnxpe/passes"
)

// Name is the scheme's name in reports.
const Name = "t5_relative_bias"

// T5Params are the params of t5_relative_bias.
type Params struct {
	// NumBuckets and MaxDistance are nil where the graph does not fix
	// them (a stored bias over few distances: the notes name the values
	// that reproduce it).
	NumBuckets  *int
	MaxDistance *int
	// Bidirectional is nil where the graph does not hold the bias of the
	// keys after the query (a stored bias with the causal mask in it).
	Bidirectional      *bool
	NumHeads           int
	SharedAcrossLayers bool
	ScaledScores       bool
}

func (*Params) Scheme() string { return Name }

func (p *Params) Map() map[string]any {
	return map[string]any{"num_buckets": passes.OptInt(p.NumBuckets), "max_distance": passes.OptInt(p.MaxDistance),
		"bidirectional": passes.OptBool(p.Bidirectional), "num_heads": p.NumHeads,
		"shared_across_layers": p.SharedAcrossLayers, "scaled_scores": p.ScaledScores}
}
