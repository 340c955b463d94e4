package alibi

import (
	"github.com/onnxpe/onnxpe/passes"
)

// Name is the scheme's name in reports.
const Name = "alibi"

// ALiBiParams are the params of alibi.
type Params struct {
	NumHeads  int
	Slopes    []float64
	Symmetric bool
	// Positions is attention_mask_cumsum (positions counted from the mask),
	// key_index (the key's index) or key_offset_from_end (key j gets
	// j - (L-1)).
	Positions    string
	MaxPositions *int
	// AlibiBiasMax is b when the slopes are 2^(-b·(h+1)/n) for n a power
	// of two.
	AlibiBiasMax *float64
}

func (*Params) Scheme() string { return Name }

func (p *Params) Map() map[string]any {
	m := map[string]any{"num_heads": p.NumHeads, "slopes": passes.Floats(p.Slopes), "symmetric": p.Symmetric,
		"positions": p.Positions, "max_positions": passes.OptInt(p.MaxPositions)}
	if p.AlibiBiasMax != nil {
		m["alibi_bias_max"] = passes.Num(*p.AlibiBiasMax)
	}
	return m
}
