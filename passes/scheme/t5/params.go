package t5

import (
	"github.com/onnxpe/onnxpe/passes"
)

// Name is the scheme's name in reports.
const Name = "t5_relative_bias"

// T5Params are the params of t5_relative_bias.
type Params struct {
	NumBuckets         int
	MaxDistance        *int
	Bidirectional      bool
	NumHeads           int
	SharedAcrossLayers bool
	ScaledScores       bool
}

func (*Params) Scheme() string { return Name }

func (p *Params) Map() map[string]any {
	return map[string]any{"num_buckets": p.NumBuckets, "max_distance": passes.OptInt(p.MaxDistance),
		"bidirectional": p.Bidirectional, "num_heads": p.NumHeads,
		"shared_across_layers": p.SharedAcrossLayers, "scaled_scores": p.ScaledScores}
}
