package sinusoidal

import (
	"github.com/onnxpe/onnxpe/passes"
)

// Schemes of the vocabulary (DESIGN.md).
// Name is the scheme's name in reports.
const Name = "sinusoidal"

// SinusoidalParams are the params of sinusoidal.
type Params struct {
	Layout          string // interleaved | concat_sin_cos
	Base            *float64
	Dim             int
	Computed        bool
	MaxPositions    *int
	FreqDenominator string // "d/2" | "d/2-1"
	PositionOffset  *int
	PaddingIdx      *int
}

func (*Params) Scheme() string { return Name }

func (p *Params) Map() map[string]any {
	m := map[string]any{"layout": p.Layout, "base": passes.OptFloat(p.Base), "dim": p.Dim, "computed": p.Computed,
		"max_positions": passes.OptInt(p.MaxPositions), "freq_denominator": p.FreqDenominator,
		"position_offset": passes.OptInt(p.PositionOffset)}
	if p.PaddingIdx != nil {
		m["padding_idx"] = *p.PaddingIdx
	}
	return m
}
