package learned

import (
	"github.com/onnxpe/onnxpe/passes"
)

// Name is the scheme's name in reports.
const Name = "learned_absolute"

// LearnedParams are the params of learned_absolute.
type Params struct {
	MaxPositions   *int
	Dim            int
	PositionOffset *int
}

func (*Params) Scheme() string { return Name }

func (p *Params) Map() map[string]any {
	return map[string]any{"max_positions": passes.OptInt(p.MaxPositions), "dim": p.Dim, "position_offset": passes.OptInt(p.PositionOffset)}
}
