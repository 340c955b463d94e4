package work

import (
	"github.com/onnxpe/onnxpe/graph"
)

// foldedNodes lists the nodes normalisation folded into the constant v.
func (w *Work) FoldedNodes(v *graph.Value) []*graph.Node {
	seen := map[*graph.Node]bool{}
	var out []*graph.Node
	stack := []*graph.Value{v}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n := w.FoldedFrom(x)
		if n == nil || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
		stack = append(stack, n.Inputs()...)
	}
	return out
}
