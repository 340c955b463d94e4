package rewrite

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/work"
)

// node finds a node of the main graph by name (or first output's name).
func (r *Rewrite) Node(name string) *graph.Node {
	for _, n := range r.M.Graph.Nodes() {
		if work.NodeName(n) == name {
			return n
		}
	}
	return nil
}

// opsetOf is the version of n's domain in the rewritten model.
func (r *Rewrite) OpsetOf(n *graph.Node) int64 {
	if n.Domain == "" || n.Domain == "ai.onnx" {
		return r.Opset()
	}
	if v := r.M.OpsetVersion(n.Domain); v != 0 {
		return v
	}
	return 1
}
