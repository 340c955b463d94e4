package passes

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// RewriteALiBi folds or fuses the ALiBi bias added to the scores.
var RewriteALiBi = &Pass{
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
	Requires: []*Pass{Normalize, Blocks, ALiBiPass, Edit},
	Run:      runRewriteALiBi,
}

func runRewriteALiBi(c *Context) (any, error) {
	r := c.rewrite()
	w := c.Work()
	ch := r.begin("rewrite_alibi", ALiBi)
	defer r.end(ch)
	blocks := c.ResultOf[Blocks].([]*Block)
	for _, f := range c.ResultOf[ALiBiPass].([]*Finding) {
		if f.Fused {
			continue
		}
		terms := biasTerms(w, f, blocks)
		if len(terms) == 0 {
			ch.skip(f, "the bias added to the scores is not found")
			continue
		}
		var err error
		var done bool
		if r.opts.ALiBi == ALiBiFuse {
			done, err = r.alibiFuse(w, f, terms)
		} else {
			done, err = r.alibiFold(w, f, terms)
		}
		if err != nil {
			if errors.Is(err, ErrRewrite) {
				ch.skip(f, "%s", reason(err))
				continue
			}
			return ch, err
		}
		if done {
			ch.Layers = append(ch.Layers, f.Layers...)
		} else {
			ch.note("layers %v: the bias is already constants and the positions' own subgraph: nothing to fold", f.Layers)
		}
	}
	return ch, nil
}

// biasTerm is one layer's addition of a finding's bias to its scores.
type biasTerm struct {
	layer int
	term  BiasTerm // in the working copy
}

// biasTerms lists, per layer of f, the bias term whose addition is one of
// f's nodes.
func biasTerms(w *Work, f *Finding, blocks []*Block) []biasTerm {
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
func (r *Rewrite) alibiFold(w *Work, f *Finding, terms []biasTerm) (bool, error) {
	g := r.M.Graph
	own := map[string]bool{}
	for _, n := range f.Nodes {
		own[n] = true
	}
	changed := false
	// 1. Nodes of the finding computed from constants only.
	for _, n := range g.Nodes() {
		if !own[nodeName(n)] || n.OpType == "Constant" || len(n.Subgraphs()) > 0 {
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
		outs, err := kernels.EvalNode(n, r.opsetOf(n), ins, kernels.Options{Threads: 1})
		if err != nil {
			return false, fmt.Errorf("%w: folding %s: %v", ErrRewrite, nodeName(n), err)
		}
		for i, o := range n.Outputs() {
			if o.Name == "" || o.NumUses() == 0 && !o.IsGraphOutput() {
				continue
			}
			gt, err := outs[i].ToGraph("onnxpe_alibi_folded")
			if err != nil {
				return false, err
			}
			c, err := r.addConst(gt)
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
		if !own[nodeName(n)] || !isONNX(n) || len(n.Outputs()) != 1 {
			continue
		}
		out := n.Output(0)
		wv := w.workValue(out.Name)
		var keep *graph.Value
		switch n.OpType {
		case "Cast":
			if in := w.workValue(n.Input(0).Name); in != nil && wv != nil && w.ElemType(in) == w.ElemType(wv) && w.ElemType(wv) != graph.Undefined {
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
				xw := w.workValue(x.Name)
				if !ok || xw == nil || wv == nil || !sameShape(w.Shape(xw), w.Shape(wv)) {
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
		if !own[nodeName(n)] || n.OpType != "Reshape" || !isONNX(n) || n.AttrInt("allowzero", 0) != 0 || n.Input(1) == nil {
			continue
		}
		if _, ok := graph.ConstantValue(n.Input(1)); ok {
			continue
		}
		in, tv := w.workValue(n.Input(0).Name), w.workValue(n.Input(1).Name)
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
			n.SetInput(1, r.vecInt(target...))
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
		for _, pr := range []*Probe{w.NewProbe(1, 5, 0), w.NewProbe(2, 9, 3)} {
			a, err1 := pr.Value(first.term.Value)
			b, err2 := pr.Value(t.term.Value)
			if err1 != nil || err2 != nil || !slices.Equal(a.Shape, b.Shape) || !slices.Equal(a.Float64s(), b.Float64s()) {
				same = false
			}
		}
	}
	if same && len(terms) > 1 {
		v0, err := r.lookup(w.mainName(first.term.Value))
		if err != nil {
			return false, err
		}
		for _, t := range terms[1:] {
			if t.term.Value == first.term.Value {
				continue
			}
			add := r.node(w.OrigName(t.term.Add))
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

// node finds a node of the main graph by name (or first output's name).
func (r *Rewrite) node(name string) *graph.Node {
	for _, n := range r.M.Graph.Nodes() {
		if nodeName(n) == name {
			return n
		}
	}
	return nil
}

// opsetOf is the version of n's domain in the rewritten model.
func (r *Rewrite) opsetOf(n *graph.Node) int64 {
	if n.Domain == "" || n.Domain == "ai.onnx" {
		return r.opset()
	}
	if v := r.M.OpsetVersion(n.Domain); v != 0 {
		return v
	}
	return 1
}

// alibiFuse replaces each layer's bias by an ALiBiBias node.
func (r *Rewrite) alibiFuse(w *Work, f *Finding, terms []biasTerm) (bool, error) {
	p, ok := f.Params.(*ALiBiParams)
	if !ok || len(p.Slopes) == 0 {
		return false, fmt.Errorf("%w: the finding has no slopes", ErrRewrite)
	}
	dt := w.ElemType(terms[0].term.Value)
	if !dt.IsFloat() {
		return false, fmt.Errorf("%w: the bias has element type %v", ErrRewrite, dt)
	}
	slopes, err := r.table("onnxpe_alibi_slopes", dt, []int64{int64(len(p.Slopes))}, p.Slopes)
	if err != nil {
		return false, err
	}
	var attrs []*graph.Attr
	if p.Symmetric {
		attrs = append(attrs, graph.IntAttr("symmetric", 1))
	}
	h := int64(len(p.Slopes))
	for _, t := range terms {
		add := r.node(w.OrigName(t.term.Add))
		if add == nil {
			return false, fmt.Errorf("%w: the addition %q of the bias is not in the model", ErrRewrite, w.OrigName(t.term.Add))
		}
		bi := -1
		for i, in := range add.Inputs() {
			if in != nil && in.Name == w.OrigValue(t.term.Value) {
				bi = i
			}
		}
		if bi < 0 || len(add.Inputs()) != 2 {
			return false, fmt.Errorf("%w: %s does not add the bias", ErrRewrite, nodeName(add))
		}
		scores := add.Input(1 - bi)
		sw := w.workValue(scores.Name)
		rank := 0
		if sw != nil {
			rank = w.Shape(sw).Rank()
		}
		q := r.dimOf(scores, -2)
		k := r.dimOf(scores, -1)
		bias := typed(r.op("ALiBiBias", DomainOnnxpe, []*graph.Value{slopes, q, k}, 1, attrs...)[0], dt, 4)
		switch rank {
		case 4:
		case 3:
			// Scores [batch·heads, q, k]: expand over the batch and fold it
			// into the heads.
			shape := r.shapeOf(scores)
			bh := r.dimOf(scores, 0)
			batch := r.op1("Div", []*graph.Value{bh, r.vecInt(h)})
			full := r.op1("Concat", []*graph.Value{batch, r.vecInt(h), q, k}, graph.IntAttr("axis", 0))
			bias = typed(r.op1("Reshape", []*graph.Value{r.op1("Expand", []*graph.Value{bias, full}), shape}), dt, 3)
		default:
			return false, fmt.Errorf("%w: the scores %s have rank %d; ALiBiBias gives [1, heads, q, k]", ErrRewrite, scores.Name, rank)
		}
		add.SetInput(bi, bias)
	}
	return true, nil
}

// RewriteT5 replaces T5's bucketed relative bias by a table read at the
// relative positions.
var RewriteT5 = &Pass{
	Name: "rewrite_t5",
	Doc: `Replace the T5 bucket computation by a table gathered at key - query.

Default: the bias of every relative position -(N-1)..N-1 (N is
--max-positions, else 4096) is what the model's own bucket function and
[buckets, heads] table give (evaluated with the kernels with the
relative positions replaced): a constant table of 2N-1 rows of heads,
gathered at key - query + N-1 into the [q, k, heads] the model's own
Gather gave, where the model computed buckets with logarithms. (Rows of
heads rather than [heads, 2N-1]: ONNX Runtime gathers whole rows much
faster than single elements along a second axis; with [heads, 2N-1] the
rewritten T5 models were slower than the originals.)
When the buckets no longer change from some distance below N on (they
stop at max_distance), the relative positions are clipped to ±(N-1), so
that any length reads the right bias. ONNX Runtime's CPU provider runs
it. A decoder with a KV cache is rewritten the same way: its key - query
is [S, past + S] (queries after the cache). --t5-op com.microsoft emits
com.microsoft RelativePositionBias instead (ONNX Runtime has it on CUDA
only; after a cache it covers past + S queries, the last S kept).`,
	Requires: []*Pass{Normalize, T5Pass, Edit},
	Run:      runRewriteT5,
}

func runRewriteT5(c *Context) (any, error) {
	r := c.rewrite()
	return r.findingsPass(c, "rewrite_t5", T5RelativeBias, T5Pass,
		func(f *Finding) bool { return !f.Fused },
		func(w *Work, f *Finding, _ *Change) error { return r.t5(w, f) })
}

func (r *Rewrite) t5(w *Work, f *Finding) error {
	ev, ok := f.Evidence.(*T5Evidence)
	p, ok2 := f.Params.(*T5Params)
	if !ok || !ok2 {
		return fmt.Errorf("%w: the finding has no T5 evidence", ErrRewrite)
	}
	buckets := w.workValue(ev.Buckets)
	if buckets == nil || buckets.NumUses() == 0 {
		return fmt.Errorf("%w: the bucket index %q is not a value of the model", ErrRewrite, ev.Buckets)
	}
	var gather *graph.Node
	for _, u := range buckets.Uses() {
		if u.Node.OpType == "Gather" && u.Index == 1 && w.IsConst(u.Node.Input(0)) {
			gather = u.Node
		}
	}
	if gather == nil {
		return fmt.Errorf("%w: no Gather reads the bias table at the buckets", ErrRewrite)
	}
	// The relative positions key - query the buckets are computed from:
	// [queries, keys], the queries the last S of the keys (a decoder with
	// a KV cache of length past: query i at past + i, key j at j, so the
	// value holds j - i - past over [S, past + S]; without a cache j - i
	// over [S, S]).
	var rel *graph.Value
	pr := w.NewProbe(1, 6, 0)
	cached := false // the probe's queries sit after a cache
	for _, n := range w.cone(buckets) {
		for _, o := range n.Outputs() {
			if rel != nil || !w.ElemType(o).IsInt() || w.OrigValue(o) == "" {
				continue
			}
			t, err := pr.Value(o)
			if err != nil || t.Rank() != 2 || t.Shape[0] != pr.Seq || t.Shape[1] < pr.Seq {
				continue
			}
			q, k := t.Shape[0], t.Shape[1]
			x := t.Float64s()
			okRel := true
			for i := 0; i < q && okRel; i++ {
				for j := 0; j < k; j++ {
					if x[i*k+j] != float64(j-i-(k-q)) {
						okRel = false
						break
					}
				}
			}
			if okRel {
				rel, cached = o, k > q
			}
		}
	}
	if rel == nil {
		return fmt.Errorf("%w: no value holds key - query for the buckets (queries at the last %d of the keys, past %d)", ErrRewrite, pr.Seq, pr.Past)
	}
	dt := w.ElemType(gather.Output(0))
	gout, err := r.lookup(w.mainName(gather.Output(0)))
	if err != nil {
		return err
	}
	relV, err := r.lookup(w.mainName(rel))
	if err != nil {
		return err
	}
	if r.opts.T5Op == T5Microsoft {
		return r.t5Fused(w, p, ev, gather, relV, dt, cached)
	}
	n := r.opts.MaxPositions
	if n <= 0 {
		n = DefaultMaxPositions
	}
	// The bias of every relative position, as the model computes it.
	row := make([]int64, 2*n-1)
	for i := range row {
		row[i] = int64(i - (n - 1))
	}
	pr = w.NewProbe(1, 2*n-1, 0)
	pr.Budget = 1 << 20
	relT := kernels.FromSlice([]int{1, 2*n - 1}, row)
	if dt := w.ElemType(rel); dt != graph.Int64 {
		relT = castInts(relT, dt)
	}
	pr.SetCuts(map[*graph.Value]*kernels.Tensor{rel: relT})
	t, err := pr.Value(gather.Output(0))
	if err != nil {
		return fmt.Errorf("%w: evaluating the bias at relative positions ±%d: %v", ErrRewrite, n-1, err)
	}
	h := p.NumHeads
	if t.Len() != (2*n-1)*h {
		return fmt.Errorf("%w: the bias at %d relative positions has shape %v", ErrRewrite, 2*n-1, t.Shape)
	}
	src := t.Float64s() // [1, 2n-1, h]
	// [2N-1, heads]: row n+N-1 is the bias of relative position n for
	// every head, which one Gather reads at key - query + N-1 into the
	// [q, k, heads] the model's own Gather gave (whole rows: the layout
	// that gathers fastest; the model's Transpose to [heads, q, k] stays).
	table, err := r.table("onnxpe_t5_bias_table", dt, []int64{int64(2*n - 1), int64(h)}, src)
	if err != nil {
		return err
	}
	// Clip where the buckets stop changing within the table.
	idx := r.castInt64(relV, w.ElemType(rel))
	if sat := t5Saturation(ev); sat > 0 && sat < n && r.opset() >= 12 {
		idx = r.op1("Clip", []*graph.Value{idx, r.scalarInt(int64(-(n - 1))), r.scalarInt(int64(n - 1))})
	}
	idx = r.op1("Add", []*graph.Value{idx, r.scalarInt(int64(n - 1))})
	y := typed(r.op1("Gather", []*graph.Value{table, idx}, graph.IntAttr("axis", 0)), dt, 3)
	gout.ReplaceKeepingName(y)
	return nil
}

// t5Saturation is the distance from which the bucket map no longer
// changes, in both directions (0 when it changes up to the map's end).
func t5Saturation(ev *T5Evidence) int {
	bm, m := ev.BucketMap, ev.MaxRel
	if len(bm) != 2*m+1 {
		return 0
	}
	sat := 0
	for d := m; d > 0; d-- {
		if bm[m+d] != bm[2*m] || bm[m-d] != bm[0] {
			sat = d + 1
			break
		}
	}
	if sat >= m-8 {
		return 0
	}
	return sat
}

// t5Fused replaces the bias by com.microsoft RelativePositionBias.
//
// RelativePositionBias numbers the queries from 0; when they sit after a
// KV cache (cached: rel is [S, past + S]), the op gives the bias of all
// past + S positions as queries and the last S rows are kept.
func (r *Rewrite) t5Fused(w *Work, p *T5Params, ev *T5Evidence, gather *graph.Node, rel *graph.Value, dt graph.DataType, cached bool) error {
	if p.MaxDistance == nil {
		return fmt.Errorf("%w: max_distance is not known exactly; RelativePositionBias needs it", ErrRewrite)
	}
	// The [1, heads, q, k] value the model makes of the gathered rows.
	v := gather.Output(0)
	for steps := 0; steps < 4; steps++ {
		s := w.Shape(v)
		if s.Rank() == 4 && s.Dims[0] == 1 && s.Dims[1] == Dim(p.NumHeads) {
			break
		}
		var next *graph.Value
		for _, u := range v.Uses() {
			if (u.Node.OpType == "Transpose" || u.Node.OpType == "Unsqueeze" || u.Node.OpType == "Reshape") && u.Index == 0 {
				next = u.Node.Output(0)
			}
		}
		if next == nil {
			return fmt.Errorf("%w: the gathered bias is not laid out as [1, heads, q, k]", ErrRewrite)
		}
		v = next
	}
	s := w.Shape(v)
	if s.Rank() != 4 || s.Dims[0] != 1 {
		return fmt.Errorf("%w: the gathered bias is not laid out as [1, heads, q, k]", ErrRewrite)
	}
	out, err := r.lookup(w.mainName(v))
	if err != nil {
		return err
	}
	table, err := r.lookup(ev.Table)
	if err != nil {
		return err
	}
	// The lengths are those of the relative positions [q, k].
	q := r.op1("Reshape", []*graph.Value{r.dimOf(rel, 0), r.ints([]int64{0})})
	k := r.op1("Reshape", []*graph.Value{r.dimOf(rel, 1), r.ints([]int64{0})})
	bi := int64(0)
	if p.Bidirectional {
		bi = 1
	}
	qs := q
	if cached {
		if r.opset() < 10 {
			return fmt.Errorf("%w: the queries sit after a KV cache and the last rows of RelativePositionBias are kept by a Slice with inputs, which opset %d lacks (10 has it)", ErrRewrite, r.opset())
		}
		qs = k
	}
	y := typed(r.op("RelativePositionBias", DomainMicrosoft, []*graph.Value{table, qs, k}, 1,
		graph.IntAttr("max_distance", int64(*p.MaxDistance)), graph.IntAttr("is_bidirectional", bi))[0], dt, 4)
	if cached {
		last := r.op1("Neg", []*graph.Value{q})
		y = typed(r.op1("Slice", []*graph.Value{y, last, r.vecInt(math.MaxInt64), r.vecInt(2)}), dt, 4)
	}
	out.ReplaceKeepingName(y)
	return nil
}
