package sinusoidal

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/work"
)

// RewriteSinusoidal turns sinusoidal encodings computed in the graph into
// a constant table read at the positions.
var Rewrite = &passes.Pass[*rewrite.Change]{
	Name: "rewrite_sinusoidal",
	Doc: `Replace a sinusoidal encoding computed in the graph by a constant table.

The table ([max_positions, dim], in the model's float type) holds what
the model's own subgraph computes at positions 0..N-1 (evaluated with
the kernels with the positions replaced), N being --max-positions or
4096. It is sliced by the positions where they are consecutive (from a
Range, or 0..S-1) and gathered where they are data (computed from a
mask). A stored table gathered at 0, 1, 2, ... is sliced instead.`,
	Requires: []passes.Analyzer{work.Normalize, Detect, rewrite.Edit},
	Run: func(c *passes.Context) (*rewrite.Change, error) {
		return absolute.AbsolutePass(rewrite.Of(c), c, "rewrite_sinusoidal", Name, Detect)
	},
}
