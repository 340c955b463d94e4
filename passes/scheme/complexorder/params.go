package complexorder

// Name is the scheme's name in reports.
const Name = "complex_order"

// ComplexOrderParams are the params of complex_order.
type Params struct {
	Dim int
	// LearnedFrequency: every word has its own frequencies (a table
	// gathered by the token ids); LearnedPhase: and its own initial phase.
	LearnedFrequency bool
	LearnedPhase     bool
	// PositionOrder is ascending (0, 1, 2, ...) or descending (the last
	// token at 0, as the authors' Transformer counts).
	PositionOrder string
}

func (*Params) Scheme() string { return Name }

func (p *Params) Map() map[string]any {
	var order any
	if p.PositionOrder != "" {
		order = p.PositionOrder
	}
	return map[string]any{"dim": p.Dim, "learned_frequency": p.LearnedFrequency, "learned_phase": p.LearnedPhase,
		"position_order": order}
}
