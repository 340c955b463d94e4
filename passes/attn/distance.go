package attn

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/pattern"
	"github.com/onnxpe/onnxpe/passes/work"
)

// Distance is a matrix of relative positions: one position vector minus
// another, broadcast (key - query or query - key).
var Distance = pattern.Op("Sub",
	pattern.Thru(pattern.OpOf([]string{"Unsqueeze", "Reshape"}, pattern.Capture("a"))),
	pattern.Thru(pattern.OpOf([]string{"Unsqueeze", "Reshape"}, pattern.Capture("b"))))

// distanceIn finds a relative-distance matrix among nodes (a T5 or Shaw
// index, an ALiBi bias).
func DistanceIn(w *work.Work, nodes []*graph.Node) *graph.Value {
	for _, n := range nodes {
		if n.OpType != "Sub" || len(n.Outputs()) == 0 {
			continue
		}
		if m, _ := pattern.MatchValue(w, Distance, n.Output(0)); m != nil && w.Shape(n.Output(0)).Rank() >= 2 {
			return n.Output(0)
		}
	}
	return nil
}
