package passes

// The schemes of the rest of the positional-encoding family (DESIGN.md):
// relative sinusoids scored with global biases (Transformer-XL, XLNet),
// disentangled attention (DeBERTa), complex-order embeddings and FLOATER.
// Multimodal and 2-D RoPE are params of rope (rope_axes.go).
// RelativeSinusoidal names the scheme in reports.
const RelativeSinusoidal = "relative_sinusoidal"

// Disentangled names the scheme in reports.
const Disentangled = "disentangled"

// ComplexOrder names the scheme in reports.
const ComplexOrder = "complex_order"

// Floater names the scheme in reports.
const Floater = "floater"

// RelSinParams are the params of relative_sinusoidal.
type RelSinParams struct {
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

func (*RelSinParams) Scheme() string { return RelativeSinusoidal }

func (p *RelSinParams) Map() map[string]any {
	var variant, shift any
	if p.Variant != "" {
		variant = p.Variant
	}
	if p.RelShift != "" {
		shift = p.RelShift
	}
	return map[string]any{"variant": variant, "dim": p.Dim, "base": optF(p.Base), "global_biases": p.GlobalBiases,
		"clamp_len": optI(p.ClampLen), "rel_shift": shift}
}

// DisentangledParams are the params of disentangled.
type DisentangledParams struct {
	// PositionBuckets is the span of the bucketed relative positions (the
	// relative embedding has 2·PositionBuckets rows); nil when the relative
	// positions are not bucketed.
	PositionBuckets *int
	// MaxRelativePositions is the distance the logarithmic buckets reach
	// (or the clipping distance without buckets).
	MaxRelativePositions *int
	// AttTypes lists the position terms: c2p (content to position) and
	// p2c (position to content).
	AttTypes []string
	// ShareAttKey: the relative embedding is projected by the content
	// query and key projections.
	ShareAttKey bool
	// ScaleFactor is s of the scaling sqrt(d·s) (1 + the number of
	// position terms in DeBERTa); nil when the scores are not scaled so.
	ScaleFactor *float64
}

func (*DisentangledParams) Scheme() string { return Disentangled }

func (p *DisentangledParams) Map() map[string]any {
	types := p.AttTypes
	if types == nil {
		types = []string{}
	}
	return map[string]any{"position_buckets": optI(p.PositionBuckets), "max_relative_positions": optI(p.MaxRelativePositions),
		"att_types": types, "share_att_key": p.ShareAttKey, "scale_factor": optF(p.ScaleFactor)}
}

// ComplexOrderParams are the params of complex_order.
type ComplexOrderParams struct {
	Dim int
	// LearnedFrequency: every word has its own frequencies (a table
	// gathered by the token ids); LearnedPhase: and its own initial phase.
	LearnedFrequency bool
	LearnedPhase     bool
	// PositionOrder is ascending (0, 1, 2, ...) or descending (the last
	// token at 0, as the authors' Transformer counts).
	PositionOrder string
}

func (*ComplexOrderParams) Scheme() string { return ComplexOrder }

func (p *ComplexOrderParams) Map() map[string]any {
	var order any
	if p.PositionOrder != "" {
		order = p.PositionOrder
	}
	return map[string]any{"dim": p.Dim, "learned_frequency": p.LearnedFrequency, "learned_phase": p.LearnedPhase,
		"position_order": order}
}

// FloaterParams are the params of floater.
type FloaterParams struct {
	Dim int
	// Solver is euler, midpoint, rk4 (the classic tableau) or rk4_3_8 (the
	// 3/8 rule, torchdiffeq's fixed-grid "rk4"); nil when the graph holds
	// the solution but not the integration.
	Solver *string
	// Step is the solver's time step; nil likewise.
	Step *float64
	// MaxPositions is the number of positions integrated (nil when the
	// integration follows the sequence length).
	MaxPositions *int
	// Form is unrolled (a chain of solver steps), loop (a Loop whose body
	// is one step) or table (the states folded into a constant: solver and
	// step are not in the graph).
	Form string
	// Injection is add_to_input (the states added to the embeddings) or
	// per_layer (each layer's projections read their own states).
	Injection string
}

func (*FloaterParams) Scheme() string { return Floater }

func (p *FloaterParams) Map() map[string]any {
	return map[string]any{"dim": p.Dim, "solver": optS(p.Solver), "step": optF(p.Step), "max_positions": optI(p.MaxPositions),
		"form": p.Form, "injection": p.Injection}
}
