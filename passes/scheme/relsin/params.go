package relsin

import (
	"github.com/onnxpe/onnxpe/passes"
)

// The schemes of the rest of the positional-encoding family (DESIGN.md):
// relative sinusoids scored with global biases (Transformer-XL, XLNet),
// disentangled attention (DeBERTa), complex-order embeddings and FLOATER.
// Multimodal and 2-D RoPE are params of rope (rope_axes.go).
// Name is the scheme's name in reports.
const Name = "relative_sinusoidal"

// RelSinParams are the params of relative_sinusoidal.
type Params struct {
	// Variant is transfo_xl (distances klen-1 .. 0) or xlnet (klen ..
	// -qlen+1); "" prints null.
	Variant string
	Dim     int
	Base    *float64
	// GlobalBiases: the content and position scores read q plus learned
	// per-head biases (u, v).
	GlobalBiases bool
	// ClampLen is the distance the relative positions are clamped at (nil:
	// not clamped).
	ClampLen *int
	// RelShift names how the position scores are aligned to key - query:
	// pad_reshape_slice (Transformer-XL's _rel_shift: a zero column
	// padded, the scores reshaped, the first row dropped) or reshape_slice
	// (XLNet's rel_shift_bnij: reshaped, first row dropped, the first klen
	// columns kept); "" (null) when the scores show neither.
	RelShift string
}

func (*Params) Scheme() string { return Name }

func (p *Params) Map() map[string]any {
	var variant, shift any
	if p.Variant != "" {
		variant = p.Variant
	}
	if p.RelShift != "" {
		shift = p.RelShift
	}
	return map[string]any{"variant": variant, "dim": p.Dim, "base": passes.OptFloat(p.Base), "global_biases": p.GlobalBiases,
		"clamp_len": passes.OptInt(p.ClampLen), "rel_shift": shift}
}
