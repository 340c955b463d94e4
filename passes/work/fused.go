package work

import (
	"github.com/onnxpe/onnxpe/graph"
)

// ---------------------------------------------------------------------
// Rotations

func IsRotaryOp(n *graph.Node) bool {
	return n.OpType == "RotaryEmbedding" && (IsONNX(n) || n.Domain == "com.microsoft")
}

func ProducerOf(v *graph.Value) *graph.Node {
	if v == nil {
		return nil
	}
	return v.Producer()
}

// ---------------------------------------------------------------------
// helpers shared by the fused detectors

// producersUpTo walks back from v through any ops (not into subgraphs),
// breadth first, and returns the nodes met, at most limit.
func ProducersUpTo(v *graph.Value, limit int) []*graph.Node {
	var out []*graph.Node
	seen := map[*graph.Node]bool{}
	queue := []*graph.Value{v}
	for len(queue) > 0 && len(out) < limit {
		x := queue[0]
		queue = queue[1:]
		if x == nil {
			continue
		}
		n := x.Producer()
		if n == nil || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
		queue = append(queue, n.Inputs()...)
	}
	return out
}

func OpName(n *graph.Node) string {
	if n.Domain == "" || n.Domain == "ai.onnx" {
		return n.OpType
	}
	return n.Domain + "." + n.OpType
}
