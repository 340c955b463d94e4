package floater

import (
	"github.com/onnxpe/onnxpe/passes"
)

// Name is the scheme's name in reports.
const Name = "floater"

// FloaterParams are the params of floater.
type Params struct {
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

func (*Params) Scheme() string { return Name }

func (p *Params) Map() map[string]any {
	return map[string]any{"dim": p.Dim, "solver": passes.OptString(p.Solver), "step": passes.OptFloat(p.Step), "max_positions": passes.OptInt(p.MaxPositions),
		"form": p.Form, "injection": p.Injection}
}
