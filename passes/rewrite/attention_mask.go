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

// swampedBelow is the largest fill a Where that masks by the inputs'
// values may have to become an additive mask: fill + score rounds to the
// fill in float32 for any score below 1e20 in magnitude.
const swampedBelow = -1e28

// readMasks reads the block's additive terms as the op's masks. Each
// mask is evaluated with every token valid (the probe's masks are ones):
// a causal mask (0 for the keys up to the query's own, at most maskedBelow
// after them) or zeros (a padding mask). One that depends only on the
// sizes is the op's own causal mask and goes; one that depends on inputs
// (the padding of an attention_mask) goes into the op's mask input, as the
// model computes it, and so does the scheme's own bias (a.bias), whatever
// its values. GroupQueryAttention is causal: one term must be. Several
// terms are summed.
func (a *Attention) readMasks(w *work.Work, b *attn.Block) error {
	for _, bt := range b.Bias {
		if bt.Add != nil && bt.Add.OpType == "Where" {
			continue // the fill of a Where that masks (readWhere)
		}
		if slices.Contains(a.bias, bt.Value) {
			if err := a.biasShape(w, bt.Value); err != nil {
				return err
			}
			a.Masks = append(a.Masks, bt.Value)
			continue
		}
		kind, err := maskKind(w, bt.Value)
		if err != nil {
			return err
		}
		a.Causal = a.Causal || kind == "causal"
		if sizesOnly(w, bt.Value) && kind == "causal" {
			continue
		}
		if sizesOnly(w, bt.Value) && kind == "zero" {
			continue // adds nothing
		}
		if err := a.biasShape(w, bt.Value); err != nil {
			return err
		}
		a.Masks = append(a.Masks, bt.Value)
	}
	a.Causal = a.Causal || a.whereCausal
	if !a.Causal && !a.ONNX {
		return refuse("no causal mask: the op is causal")
	}
	return nil
}

// biasShape checks that v can be a term of the op's mask: [batch or 1,
// heads or 1, queries, keys], [heads or 1, queries, keys] (ALiBi's per
// head) or [queries, keys], where queries and keys
// may be 1 (one row for every query, as a padding mask has it: Fuse
// expands it, as the op wants all of them).
func (a *Attention) biasShape(w *work.Work, v *graph.Value) error {
	sh := w.Shape(v)
	fits := func(d, want work.Dim) bool { return d == want || d == work.Dim(1) }
	if a.flat && sh.Rank() == 3 && sh.Dims[0] != 1 && sh.Dims[0] != work.Dim(a.Heads) {
		// [batch·heads, queries or 1, keys], added to the flat scores
		// (whose sizes the model may leave to a Reshape's -1): the check
		// on numbers confirms the view as [batch, heads, ..].
		if a.flatMasks == nil {
			a.flatMasks = map[*graph.Value]bool{}
		}
		a.flatMasks[v] = true
		if w.ElemType(v) != a.Type {
			return refuse("the mask %s is %v, the scores %v", w.Name(v), w.ElemType(v), a.Type)
		}
		return nil
	}
	if sh.Rank() < 2 || sh.Rank() > 4 || !fits(sh.Dims[sh.Rank()-2], a.scores) || !fits(sh.Dims[sh.Rank()-1], a.keysSeen) {
		return refuse("the mask %s is %s, not [batch, 1, queries, keys]", w.Name(v), w.ShapeString(sh))
	}
	if sh.Rank() >= 3 && sh.Dims[sh.Rank()-3] != 1 && sh.Dims[sh.Rank()-3] != work.Dim(a.Heads) {
		return refuse("the mask %s is %s: its axis before the queries is not the heads", w.Name(v), w.ShapeString(sh))
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
// or Where(hidden, fill, scores), whose fill must be at most maskedBelow.
// Its condition is evaluated as maskKind evaluates a bias (one row of 5
// tokens, every token valid). One that depends only on the sizes must keep
// exactly the keys up to each query's own (after the past): it is the op's
// causal mask. One that depends on the inputs' values (an attention_mask's
// padding, with or without the causal mask: MPT) must keep those keys or
// all of them, and its fill must be at most swampedBelow: it becomes an
// additive mask, Where(cond, 0, fill), which gives every score it hides
// the fill plus a score that rounds away, and input reports it.
func (a *Attention) readWhere(w *work.Work, b *attn.Block, n *graph.Node) (input bool, err error) {
	var scoresAt int
	switch {
	case w.IsAct(n.Input(1)) && slices.Contains(b.ScorePath, producerOf(n.Input(1))) || n.Input(1) == b.QK.Output(0):
		scoresAt = 1
	case w.IsAct(n.Input(2)) && slices.Contains(b.ScorePath, producerOf(n.Input(2))) || n.Input(2) == b.QK.Output(0):
		scoresAt = 2
	default:
		return false, refuse("the Where %s of the scores does not pass them through", w.OrigName(n))
	}
	cond, fill := n.Input(0), n.Input(3-scoresAt)
	input = !sizesOnly(w, cond)
	pr := probe.NewProbe(w, 1, 5, 0)
	f, err := pr.Value(fill)
	if err != nil {
		return false, refuse("the fill of the Where %s cannot be evaluated: %v", w.OrigName(n), err)
	}
	for _, x := range f.Float64s() {
		if !(x <= maskedBelow) {
			return false, refuse("the Where %s fills the scores with %g, not a mask", w.OrigName(n), x)
		}
	}
	if input && f.Len() != 1 {
		return false, refuse("the Where %s fills the scores with %v values, not one", w.OrigName(n), f.Shape)
	}
	if input && !(f.Float64s()[0] <= swampedBelow) {
		// Added instead of put in place, a fill this small is the fill
		// whatever the score (a row whose keys are all hidden stays
		// uniform); -1e4 would not be.
		return false, refuse("the Where %s masks by the inputs' values with a fill of %g: as an addition it would leave the scores in", w.OrigName(n), f.Float64s()[0])
	}
	c, err := pr.Value(cond)
	if err != nil {
		return false, refuse("the condition of the Where %s cannot be evaluated: %v", w.OrigName(n), err)
	}
	if len(c.Shape) < 2 {
		return false, refuse("the condition of the Where %s is %v, not [.., queries, keys]", w.OrigName(n), c.Shape)
	}
	q, k := c.Shape[len(c.Shape)-2], c.Shape[len(c.Shape)-1]
	if q == 1 && k > 1 && !input {
		return false, refuse("the condition of the Where %s has one row for every query", w.OrigName(n))
	}
	causal, all := true, true
	for i, x := range c.Float64s() {
		row, col := (i/k)%q, i%k
		keep := (x != 0) == (scoresAt == 1)
		causal = causal && keep == (col <= k-q+row)
		all = all && keep
	}
	switch {
	case causal && (q > 1 || k == 1):
		a.whereCausal = true
	case !input || !all:
		return false, refuse("the Where %s keeps other scores than the keys up to each query's own", w.OrigName(n))
	}
	if input {
		if len(c.Shape) != 4 && len(c.Shape) != 2 {
			return false, refuse("the condition of the Where %s is %v, not [batch, 1, queries, keys]", w.OrigName(n), c.Shape)
		}
		a.wheres = append(a.wheres, whereMask{cond: cond, fill: fill, keep: scoresAt == 1})
	}
	return input, nil
}

// producerOf is v's producer (nil for a graph input or initializer).
func producerOf(v *graph.Value) *graph.Node {
	if v == nil {
		return nil
	}
	return v.Producer()
}
