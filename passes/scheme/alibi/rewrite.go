package alibi

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/work"
)

// RewriteALiBi folds or fuses the ALiBi bias added to the scores.
var Rewrite = &passes.Pass[*rewrite.Change]{
	Name: "rewrite_alibi",
	Doc: `Fold the ALiBi bias into constants (--alibi fold) or fuse it (--alibi fuse).

fold: what the bias computes from constants only (the slopes, their
powers) becomes constants, operations that do nothing (a cast to the
same type, a product with 1, a sum with 0) go, Reshape targets computed
from shapes become constants (0 copying a dimension, -1 for the one
left), and layers whose biases
are the same function of the lengths share the first layer's: what
remains is the subgraph of the positions themselves (a slice of a
constant table by the key length, the cumulative sum of the mask),
which ONNX Runtime runs.

fuse: each layer's bias becomes one ai.onnxpe ALiBiBias node (slopes,
query and key length), shaped like the scores it is added to. ALiBiBias
is the causal form slope·(j - (key_length - 1)) (or -slope·|i - j|
for symmetric biases), which differs from the model's by a constant per
query row where the model counts positions otherwise: softmax does not
see it. ONNX Runtime has no ALiBiBias: the fused model is for onnxpe's
executor and generated code.`,
	Requires: []passes.Analyzer{work.Normalize, attn.Blocks, attn.Sides, Detect, rewrite.Edit},
	Run:      runRewriteALiBi,
}

func runRewriteALiBi(c *passes.Context) (*rewrite.Change, error) {
	r := rewrite.Of(c)
	blocks := passes.Result(c, attn.Blocks)
	return r.Findings(c, rewrite.Findings{Pass: "rewrite_alibi", Scheme: Name, Detect: Detect,
		Do: func(w *work.Work, f *passes.Finding, ch *rewrite.Change) error {
			terms := biasTerms(w, f, blocks)
			if len(terms) == 0 {
				return fmt.Errorf("%w: the bias added to the scores is not found", rewrite.ErrRewrite)
			}
			rewriteBias := alibiFold
			if r.Opts.ALiBi == passes.ALiBiFuse {
				rewriteBias = alibiFuse
			}
			done, err := rewriteBias(r, w, f, terms)
			if err != nil {
				return err
			}
			// --attention fused: the blocks, the bias (as folded) their
			// op's mask.
			bias := map[int]*graph.Value{}
			for _, t := range terms {
				bias[t.layer] = t.term.Value
			}
			fused, err := r.FuseBiased(w, ch, blocks, passes.Result(c, attn.Sides), f.Layers, bias, "the ALiBi bias")
			if err != nil {
				return err
			}
			if !done && len(fused) == 0 {
				return rewrite.Unchanged("the bias is already constants and the positions' own subgraph: nothing to fold")
			}
			return nil
		}})
}

// biasTerm is one layer's addition of a finding's bias to its scores.
type biasTerm struct {
	layer int
	term  attn.BiasTerm // in the working copy
}

// biasTerms lists, per layer of f, the bias term whose addition is one of
// f's nodes.
func biasTerms(w *work.Work, f *passes.Finding, blocks []*attn.Block) []biasTerm {
	var out []biasTerm
	for _, b := range blocks {
		if !slices.Contains(f.Layers, b.Index) {
			continue
		}
		for _, bt := range b.Bias {
			if slices.Contains(f.Nodes, w.OrigName(bt.Add)) {
				out = append(out, biasTerm{layer: b.Index, term: bt})
				break
			}
		}
	}
	return out
}

// alibiFold folds a finding's constant arithmetic, drops its operations
// that do nothing, makes its shape arithmetic constant, and shares one
// bias between layers whose biases are the same.
func alibiFold(r *rewrite.Rewrite, w *work.Work, f *passes.Finding, terms []biasTerm) (bool, error) {
	g := r.M.Graph
	own := map[string]bool{}
	for _, n := range f.Nodes {
		own[n] = true
	}
	changed := false
	// 1. Nodes of the finding computed from constants only.
	for _, n := range g.Nodes() {
		if !own[work.NodeName(n)] || n.OpType == "Constant" || len(n.Subgraphs()) > 0 {
			continue
		}
		ins := make([]*kernels.Tensor, len(n.Inputs()))
		all := len(n.Inputs()) > 0
		for i, in := range n.Inputs() {
			if in == nil {
				continue
			}
			t, ok := graph.ConstantValue(in)
			if !ok {
				all = false
				break
			}
			kt, err := kernels.FromGraph(t)
			if err != nil {
				all = false
				break
			}
			ins[i] = kt
		}
		if !all {
			continue
		}
		outs, err := kernels.EvalNode(n, r.OpsetOf(n), ins, kernels.Options{Threads: 1})
		if err != nil {
			return false, fmt.Errorf("%w: folding %s: %v", rewrite.ErrRewrite, work.NodeName(n), err)
		}
		for i, o := range n.Outputs() {
			if o.Name == "" || o.NumUses() == 0 && !o.IsGraphOutput() {
				continue
			}
			gt, err := outs[i].ToGraph("onnxpe_alibi_folded")
			if err != nil {
				return false, err
			}
			c, err := r.AddConst(gt)
			if err != nil {
				return false, err
			}
			o.ReplaceAllUsesWith(c)
			changed = true
		}
	}
	// 2. Operations that do nothing: a cast to the type it has, a product
	// with ones, a sum with zeros (of a constant that does not broadcast
	// the value to a larger shape).
	for _, n := range g.Nodes() {
		if !own[work.NodeName(n)] || !work.IsONNX(n) || len(n.Outputs()) != 1 {
			continue
		}
		out := n.Output(0)
		wv := rewrite.WorkValue(w, out.Name)
		var keep *graph.Value
		switch n.OpType {
		case "Cast":
			if in := rewrite.WorkValue(w, n.Input(0).Name); in != nil && wv != nil && w.ElemType(in) == w.ElemType(wv) && w.ElemType(wv) != graph.Undefined {
				keep = n.Input(0)
			}
		case "Mul", "Add", "Sub", "Div":
			neutral := 1.0
			if n.OpType == "Add" || n.OpType == "Sub" {
				neutral = 0
			}
			for i := 0; i < 2; i++ {
				if i == 0 && (n.OpType == "Sub" || n.OpType == "Div") {
					continue
				}
				t, ok := graph.ConstantValue(n.Input(i))
				x := n.Input(1 - i)
				xw := rewrite.WorkValue(w, x.Name)
				if !ok || xw == nil || wv == nil || !work.SameShape(w.Shape(xw), w.Shape(wv)) {
					continue
				}
				vals, err := t.Float64s()
				if err != nil || len(vals) == 0 {
					continue
				}
				if !slices.ContainsFunc(vals, func(v float64) bool { return v != neutral }) {
					keep = x
				}
			}
		}
		if keep != nil {
			out.ReplaceAllUsesWith(keep)
			changed = true
		}
	}
	// 3. Reshape targets computed from shapes (Shape, Gather, Mul,
	// Unsqueeze, Concat) become constants: sizes the graph fixes, 0 for a
	// dimension the input has at the same place, -1 for the one left.
	for _, n := range g.Nodes() {
		if !own[work.NodeName(n)] || n.OpType != "Reshape" || !work.IsONNX(n) || n.AttrInt("allowzero", 0) != 0 || n.Input(1) == nil {
			continue
		}
		if _, ok := graph.ConstantValue(n.Input(1)); ok {
			continue
		}
		in, tv := rewrite.WorkValue(w, n.Input(0).Name), rewrite.WorkValue(w, n.Input(1).Name)
		if in == nil || tv == nil {
			continue
		}
		dims, ok := w.Partial(tv)
		is := w.Shape(in)
		if !ok || !is.Ranked {
			continue
		}
		target := make([]int64, len(dims))
		free := false
		for i, d := range dims {
			switch {
			case d.Known() && d != 0:
				target[i] = int64(d)
			case i < len(is.Dims) && d == is.Dims[i] && !d.Known():
				target[i] = 0
			case !free:
				target[i], free = -1, true
			default:
				ok = false
			}
		}
		if ok {
			n.SetInput(1, r.VecInt(target...))
			changed = true
		}
	}
	// 4. One bias for the layers whose biases are the same function of
	// the lengths (each layer read its own key length).
	first := terms[0]
	same := true
	for _, t := range terms[1:] {
		if t.term.Value == first.term.Value {
			continue
		}
		for _, pr := range []*probe.Probe{probe.NewProbe(w, 1, 5, 0), probe.NewProbe(w, 2, 9, 3)} {
			a, err1 := pr.Value(first.term.Value)
			b, err2 := pr.Value(t.term.Value)
			if err1 != nil || err2 != nil || !slices.Equal(a.Shape, b.Shape) || !slices.Equal(a.Float64s(), b.Float64s()) {
				same = false
			}
		}
	}
	if same && len(terms) > 1 {
		v0, err := r.Lookup(rewrite.MainName(w, first.term.Value))
		if err != nil {
			return false, err
		}
		for _, t := range terms[1:] {
			if t.term.Value == first.term.Value {
				continue
			}
			add := r.Node(w.OrigName(t.term.Add))
			if add == nil {
				continue
			}
			for i, in := range add.Inputs() {
				if in != nil && in.Name == w.OrigValue(t.term.Value) {
					add.SetInput(i, v0)
					changed = true
				}
			}
		}
	}
	return changed, nil
}

// alibiFuse replaces each layer's bias by an ALiBiBias node.
func alibiFuse(r *rewrite.Rewrite, w *work.Work, f *passes.Finding, terms []biasTerm) (bool, error) {
	p, ok := f.Params.(*Params)
	if !ok || len(p.Slopes) == 0 {
		return false, fmt.Errorf("%w: the finding has no slopes", rewrite.ErrRewrite)
	}
	dt := w.ElemType(terms[0].term.Value)
	if !dt.IsFloat() {
		return false, fmt.Errorf("%w: the bias has element type %v", rewrite.ErrRewrite, dt)
	}
	slopes, err := r.Table("onnxpe_alibi_slopes", dt, []int64{int64(len(p.Slopes))}, p.Slopes)
	if err != nil {
		return false, err
	}
	var attrs []*graph.Attr
	if p.Symmetric {
		attrs = append(attrs, graph.IntAttr("symmetric", 1))
	}
	h := int64(len(p.Slopes))
	for _, t := range terms {
		add := r.Node(w.OrigName(t.term.Add))
		if add == nil {
			return false, fmt.Errorf("%w: the addition %q of the bias is not in the model", rewrite.ErrRewrite, w.OrigName(t.term.Add))
		}
		bi := -1
		for i, in := range add.Inputs() {
			if in != nil && in.Name == w.OrigValue(t.term.Value) {
				bi = i
			}
		}
		if bi < 0 || len(add.Inputs()) != 2 {
			return false, fmt.Errorf("%w: %s does not add the bias", rewrite.ErrRewrite, work.NodeName(add))
		}
		scores := add.Input(1 - bi)
		sw := rewrite.WorkValue(w, scores.Name)
		rank := 0
		if sw != nil {
			rank = w.Shape(sw).Rank()
		}
		q := r.DimOf(scores, -2)
		k := r.DimOf(scores, -1)
		bias := rewrite.Typed(r.Op("ALiBiBias", rewrite.DomainOnnxpe, []*graph.Value{slopes, q, k}, 1, attrs...)[0], dt, 4)
		switch rank {
		case 4:
		case 3:
			// Scores [batch·heads, q, k]: expand over the batch and fold it
			// into the heads.
			shape := r.ShapeOf(scores)
			bh := r.DimOf(scores, 0)
			batch := r.Op1("Div", []*graph.Value{bh, r.VecInt(h)})
			full := r.Op1("Concat", []*graph.Value{batch, r.VecInt(h), q, k}, graph.IntAttr("axis", 0))
			bias = rewrite.Typed(r.Op1("Reshape", []*graph.Value{r.Op1("Expand", []*graph.Value{bias, full}), shape}), dt, 3)
		default:
			return false, fmt.Errorf("%w: the scores %s have rank %d; ALiBiBias gives [1, heads, q, k]", rewrite.ErrRewrite, scores.Name, rank)
		}
		add.SetInput(bi, bias)
	}
	return true, nil
}
