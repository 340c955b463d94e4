package work

import (
	"github.com/onnxpe/onnxpe/graph"
)

// shapeWindow is the axes [start, end) of a rank-r shape that Shape node n
// returns (its start and end attributes, clamped as opset 15 says).
func ShapeWindow(n *graph.Node, r int) (start, end int) {
	start, end = NormAxis(n.AttrInt("start", 0), r), r
	if a := n.Attr("end"); a != nil {
		end = NormAxis(a.Int(), r)
	}
	start, end = max(0, min(start, r)), max(0, min(end, r))
	return start, max(start, end)
}
