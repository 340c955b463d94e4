package attn

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// Entry is a value that changes with the position where it joins the
// activations outside the blocks' scores and q/k regions: where an
// absolute encoding enters, or any position information the blocks' own
// score test does not see.
type Entry struct {
	// Node joins the activations with Value.
	Node  *graph.Node
	Value *graph.Value
	// Change is the largest difference between the value's rows at two
	// positions (over 11 positions of one probe).
	Change float64
	// Why says why the value could not be evaluated ("" when it was).
	Why string
	// Layers are the blocks downstream of the node.
	Layers []int
}

// Entries finds where position information joins the activations.
var Entries = &passes.Pass[[]*Entry]{
	Name: "entries",
	Doc: `Find where values that change with the position join the activations.

Every node outside the blocks' score paths and q/k regions that reads an
activation and a value that does not depend on the tokens' content, is
not a constant and is not made from parameters given as inputs is probed
over 11 positions: a value whose rows differ between positions is an
entry of position information, reaching the blocks downstream. The
audit gives a block nope only when no entry reaches it that a finding
does not explain, and unknown otherwise.`,
	Requires: []passes.Analyzer{work.Normalize, Blocks, Sides},
	Run:      runEntries,
}

func runEntries(c *passes.Context) ([]*Entry, error) {
	w := work.Of(c)
	blocks := passes.Result(c, Blocks)
	inside := map[*graph.Node]bool{}
	for _, b := range blocks {
		for _, n := range b.ScorePath {
			inside[n] = true
		}
		for _, n := range b.Terms {
			inside[n] = true
		}
		if b.QK != nil {
			inside[b.QK] = true
		}
	}
	for _, bs := range passes.Result(c, Sides) {
		for _, s := range []*Side{bs.Q, bs.K} {
			if s == nil {
				continue
			}
			for _, n := range append(s.Nodes, s.Skipped...) {
				inside[n] = true
			}
		}
	}
	p := probe.NewProbe(w, 1, scoreLen, 0)
	seen := map[*graph.Value]*Entry{}
	var out []*Entry
	for _, g := range DetectGraphs(w) {
		for n := range g.All() {
			if inside[n] || !joinsActivations(w, n) {
				continue
			}
			act := n.Input(w.ActInputs(n)[0])
			for i, x := range n.Inputs() {
				if !positionCandidate(w, n, i, x) {
					continue
				}
				e, ok := seen[x]
				if !ok {
					e = entryOf(w, p, x, act)
					seen[x] = e
				}
				if e == nil {
					continue
				}
				at := *e
				at.Node = n
				at.Layers = Downstream(w, n.Outputs(), blocks)
				if len(at.Layers) > 0 {
					out = append(out, &at)
				}
			}
		}
	}
	return out, nil
}

// joinsActivations reports whether n combines an activation with other
// values element by element (broadcast), the way an encoding is added or
// multiplied in: an arithmetic op, Where, Concat, or a fused op that adds
// its inputs first (ONNX Runtime's SkipLayerNormalization, BiasAdd).
func joinsActivations(w *work.Work, n *graph.Node) bool {
	if len(n.Outputs()) == 0 || !w.IsAct(n.Output(0)) || len(w.ActInputs(n)) == 0 {
		return false
	}
	if work.IsONNX(n) {
		return joiningOps[n.OpType]
	}
	return n.Domain == "com.microsoft" && joiningMSOps[n.OpType]
}

var (
	joiningOps   = map[string]bool{"Add": true, "Sub": true, "Mul": true, "Div": true, "Sum": true, "Max": true, "Min": true, "Where": true, "Concat": true}
	joiningMSOps = map[string]bool{"SkipLayerNormalization": true, "SkipSimplifiedLayerNormalization": true, "BiasAdd": true}
)

// positionCandidate reports whether input i of n may carry position
// information into the activations: a float value that does not depend
// on content, is not a scalar, a shape operand, a graph input (masks,
// parameters) or made from parameters given as inputs (a constant too:
// a table the model's fixed shapes let normalisation fold).
func positionCandidate(w *work.Work, n *graph.Node, i int, x *graph.Value) bool {
	if x == nil || w.IsAct(x) || work.ShapeOperand(n, i) || !work.IsFloatType(w.ElemType(x)) {
		return false
	}
	if x.Producer() == nil && x.Graph() == w.M.Graph && x.Const == nil {
		return false // a graph input that is not content: parameters, masks
	}
	return w.Shape(x).Rank() >= 2
}

// entryOf probes x, which joins the activation act, over the positions:
// nil when its rows are the same at every position (or it has no axis of
// positions: the axis of act that holds the tokens, aligned as
// broadcasting aligns them), an entry with Why when it cannot be
// evaluated.
func entryOf(w *work.Work, p *probe.Probe, x, act *graph.Value) *Entry {
	t, err := p.Value(x)
	if err != nil {
		return &Entry{Value: x, Why: err.Error()}
	}
	if p.Synthetic(x) {
		return nil
	}
	ashape, ok := p.BindShape(w.Shape(act))
	if !ok {
		return nil
	}
	ax := tokenAxis(w, p, act, ashape, len(ashape)-1, staticTokens(w))
	if ax -= len(ashape) - t.Rank(); ax < 0 || ax >= t.Rank()-1 || t.Shape[ax] < 2 {
		return nil
	}
	v := t.Float64s()
	inner, n := stride(t.Shape, ax), t.Shape[ax]
	change := 0.0
	for i := range v {
		pos := i / inner % n
		if pos == 0 {
			continue
		}
		y := v[i-pos*inner]
		if d := math.Abs(v[i] - y); d > change || math.IsNaN(d) {
			change = d
		}
	}
	top := 0.0
	for _, y := range v {
		top = max(top, math.Abs(y))
	}
	if change <= scoreTol(w.ElemType(x), top) {
		return nil
	}
	return &Entry{Value: x, Change: change}
}

// staticTokens is the number of tokens a model of fixed shapes takes: the
// known second size of its token ids [batch, tokens] (-1 when it has none).
func staticTokens(w *work.Work) int {
	for _, v := range w.Inputs() {
		if s := w.Shape(v); w.Role(v) == work.RoleTokens && s.Rank() == 2 && s.Dims[1].Known() {
			return int(s.Dims[1])
		}
	}
	return -1
}

// Downstream lists the blocks whose node depends on any of vs.
func Downstream(w *work.Work, vs []*graph.Value, blocks []*Block) []int {
	reached := map[*graph.Node]bool{}
	var queue []*graph.Value
	seen := map[*graph.Value]bool{}
	for _, v := range vs {
		if v != nil && !seen[v] {
			seen[v] = true
			queue = append(queue, v)
		}
	}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		for _, u := range x.Uses() {
			n := u.Node
			if reached[n] {
				continue
			}
			reached[n] = true
			outs := n.Outputs()
			if g := n.Graph(); g != nil && g != x.Graph() && g.Owner() != nil {
				outs = append(outs, g.Owner().Outputs()...)
			}
			for _, o := range outs {
				if !seen[o] {
					seen[o] = true
					queue = append(queue, o)
				}
			}
		}
	}
	var out []int
	for _, b := range blocks {
		if reached[b.Node()] || b.QK != nil && reached[b.QK] {
			out = append(out, b.Index)
		}
	}
	return out
}

func (e *Entry) String() string {
	if e.Why != "" {
		return fmt.Sprintf("%v: %s", e.Node, e.Why)
	}
	return fmt.Sprintf("%v: changes by %.3g", e.Node, e.Change)
}
