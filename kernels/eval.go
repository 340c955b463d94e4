package kernels

import (
	"fmt"

	"github.com/onnxpe/onnxpe/graph"
)

// EvalNode runs the kernel of one node on ins, outside any session: the
// way passes evaluate a few nodes of a model (constant folding, probing a
// candidate subgraph) without compiling the whole model. opset is the
// version of the node's domain the model imports. Float16 and bfloat16
// inputs are widened and the results rounded as in a Session.
//
// Nodes holding subgraphs (If, Loop, Scan) and calls of model-local
// functions are not run here: the caller evaluates their bodies. The
// error of a failing kernel is a *NodeError.
func EvalNode(n *graph.Node, opset int64, ins []*Tensor, opts Options) ([]*Tensor, error) {
	if len(n.Subgraphs()) > 0 {
		return nil, fmt.Errorf("node %q (%s): holds a subgraph: %w", n.Name, opName(n), ErrUnsupportedOp)
	}
	e, ok := lookup(n.Domain, n.OpType, opset)
	if !ok {
		return nil, fmt.Errorf("node %q: %s opset %d: %w", n.Name, opName(n), opset, ErrUnsupportedOp)
	}
	s := &Session{opts: opts}
	st := &step{node: n, opset: opset, attrs: resolveAttrs(n, nil), entry: e, half: halfRules[opName(n)]}
	c := &Call{Node: n, Opset: opset, attrs: st.attrs, opts: &s.opts, sess: s, step: st}
	return s.callKernel(c, st, ins)
}
