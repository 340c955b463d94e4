package rewrite

import (
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// maskedBelow is the largest additive bias read as masking a key: exp of
// it underflows to 0 in float32 next to any score of a trained model.
const maskedBelow = -1e4

// readMasks reads the block's additive biases as the op's masks. Each is
// evaluated with every token valid (the probe's masks are ones): a causal
// mask (0 for the keys up to the query's own, at most maskedBelow after
// them) or zeros (a padding mask). One that depends only on the sizes is
// the op's own causal mask and goes; one that depends on inputs (the
// padding of an attention_mask) becomes the op's attention_bias, as the
// model computes it. At least one must be causal: the op is.
func (a *Attention) readMasks(w *work.Work, b *attn.Block) error {
	causal := a.whereCausal
	for _, bt := range b.Bias {
		if bt.Add != nil && bt.Add.OpType == "Where" {
			continue // the fill of a Where that masks (readWhere)
		}
		kind, err := maskKind(w, bt.Value)
		if err != nil {
			return err
		}
		causal = causal || kind == "causal"
	}
	if !causal {
		return refuse("no causal mask: the op is causal")
	}
	for _, bt := range b.Bias {
		if sizesOnly(w, bt.Value) || bt.Add != nil && bt.Add.OpType == "Where" {
			continue
		}
		if a.Bias != nil {
			return refuse("two masks depend on inputs (%s, %s): the op takes one attention_bias", w.Name(a.Bias), w.Name(bt.Value))
		}
		if err := a.biasShape(w, bt.Value); err != nil {
			return err
		}
		a.Bias = bt.Value
	}
	return nil
}

// biasShape checks that v can be the op's attention_bias: [batch or 1,
// heads or 1, queries, keys], or [queries, keys], where queries and keys
// may be 1 (one row for every query, as a padding mask has it: Fuse
// expands it, as the op wants all of them).
func (a *Attention) biasShape(w *work.Work, v *graph.Value) error {
	sh := w.Shape(v)
	fits := func(d, want work.Dim) bool { return d == want || d == work.Dim(1) }
	if sh.Rank() != 4 && sh.Rank() != 2 || !fits(sh.Dims[sh.Rank()-2], a.scores) || !fits(sh.Dims[sh.Rank()-1], a.keysSeen) {
		return refuse("the mask %s is %s, not [batch, 1, queries, keys]", w.Name(v), w.ShapeString(sh))
	}
	if sh.Rank() == 4 && sh.Dims[1] != 1 && sh.Dims[1] != work.Dim(a.Heads) {
		return refuse("the mask %s is %s: its second axis is not the heads", w.Name(v), w.ShapeString(sh))
	}
	if w.ElemType(v) != a.Type {
		return refuse("the mask %s is %v, the scores %v", w.Name(v), w.ElemType(v), a.Type)
	}
	return nil
}

// maskKind evaluates a bias with every token valid (one row of 5 tokens,
// after the model's default past when it has a cache): "causal" or
// "zero", or an ErrRewrite saying what else it is.
func maskKind(w *work.Work, v *graph.Value) (string, error) {
	pr := probe.NewProbe(w, 1, 5, 0)
	t, err := pr.Value(v)
	if err != nil {
		return "", refuse("the mask %s cannot be evaluated: %v", w.Name(v), err)
	}
	if len(t.Shape) < 2 {
		return "", refuse("the bias %s is %v, not [.., queries, keys]", w.Name(v), t.Shape)
	}
	q, k := t.Shape[len(t.Shape)-2], t.Shape[len(t.Shape)-1]
	x := t.Float64s()
	zero, causal := true, true
	for i, val := range x {
		row, col := (i/k)%q, i%k
		visible := col <= k-q+row
		switch {
		case visible && val != 0:
			zero, causal = false, false
		case !visible && (val > maskedBelow || math.IsNaN(val)):
			causal = false
		case !visible && val != 0:
			zero = false
		}
	}
	switch {
	case zero:
		return "zero", nil
	case causal:
		return "causal", nil
	}
	return "", refuse("the bias %s of the scores is neither a causal nor a padding mask", w.Name(v))
}

// sizesOnly reports whether v is computed from constants and the sizes of
// the inputs alone (Shape, Size), not their values.
func sizesOnly(w *work.Work, v *graph.Value) bool {
	seen := map[*graph.Value]bool{}
	stack := []*graph.Value{v}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if x == nil || seen[x] || w.IsConst(x) {
			continue
		}
		seen[x] = true
		n := x.Producer()
		if n == nil {
			return false // a graph input's values
		}
		if n.OpType == "Shape" || n.OpType == "Size" {
			continue
		}
		for _, in := range n.Inputs() {
			stack = append(stack, in)
		}
		for _, sg := range n.Subgraphs() {
			for _, o := range sg.Outputs {
				stack = append(stack, o)
			}
		}
	}
	return true
}

// readWhere reads a Where of the score path, Where(visible, scores, fill)
// or Where(hidden, fill, scores): the condition, evaluated as maskKind
// evaluates a bias (one row of 5 tokens), must keep exactly the keys up to
// each query's own (after the past), depend on no input's values (only on
// the sizes: a padding mask goes into the scores by an addition), and the
// fill must be at most maskedBelow. It is the op's causal mask then.
func (a *Attention) readWhere(w *work.Work, b *attn.Block, n *graph.Node) error {
	var scoresAt int
	switch {
	case w.IsAct(n.Input(1)) && slices.Contains(b.ScorePath, producerOf(n.Input(1))) || n.Input(1) == b.QK.Output(0):
		scoresAt = 1
	case w.IsAct(n.Input(2)) && slices.Contains(b.ScorePath, producerOf(n.Input(2))) || n.Input(2) == b.QK.Output(0):
		scoresAt = 2
	default:
		return refuse("the Where %s of the scores does not pass them through", w.OrigName(n))
	}
	cond, fill := n.Input(0), n.Input(3-scoresAt)
	if !sizesOnly(w, cond) {
		return refuse("the Where %s masks by a condition that depends on the inputs' values", w.OrigName(n))
	}
	pr := probe.NewProbe(w, 1, 5, 0)
	f, err := pr.Value(fill)
	if err != nil {
		return refuse("the fill of the Where %s cannot be evaluated: %v", w.OrigName(n), err)
	}
	for _, x := range f.Float64s() {
		if !(x <= maskedBelow) {
			return refuse("the Where %s fills the scores with %g, not a mask", w.OrigName(n), x)
		}
	}
	c, err := pr.Value(cond)
	if err != nil {
		return refuse("the condition of the Where %s cannot be evaluated: %v", w.OrigName(n), err)
	}
	if len(c.Shape) < 2 {
		return refuse("the condition of the Where %s is %v, not [.., queries, keys]", w.OrigName(n), c.Shape)
	}
	q, k := c.Shape[len(c.Shape)-2], c.Shape[len(c.Shape)-1]
	if q == 1 && k > 1 {
		return refuse("the condition of the Where %s has one row for every query", w.OrigName(n))
	}
	for i, x := range c.Float64s() {
		row, col := (i/k)%q, i%k
		keep := (x != 0) == (scoresAt == 1)
		if keep != (col <= k-q+row) {
			return refuse("the Where %s keeps other scores than the keys up to each query's own", w.OrigName(n))
		}
	}
	a.whereCausal = true
	return nil
}

// producerOf is v's producer (nil for a graph input or initializer).
func producerOf(v *graph.Value) *graph.Node {
	if v == nil {
		return nil
	}
	return v.Producer()
}
