package rewrite

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// Rotary is what a RoPE scheme gives GroupQueryAttention: its caches,
// the pairs' layout and the positions. When the positions are the op's own
// (Positions nil) the op rotates (do_rotary); otherwise q and k rows are
// rotated before it by com.microsoft RotaryEmbedding nodes with the
// model's position_ids, per token: on a prompt GroupQueryAttention reads
// one first position for every row (ONNX Runtime 1.30), which ids that
// repeat or differ by row (left padding) are not.
type Rotary struct {
	Interleaved bool
	RotaryDim   int // of a head of HeadDim
	HeadDim     int
	// Cos and Sin are the caches [rows, rotary_dim/2] (for the check);
	// CosV and SinV the same constants in the rewritten model.
	Cos, Sin   *kernels.Tensor
	CosV, SinV *graph.Value
	// Positions gives the positions a probe's tokens are turned by (first
	// row; the probe's rows read the same); PositionIDs builds the op's
	// position_ids [batch, seq] int64 in the rewritten model. Both nil
	// when the positions are the op's own (0..S-1 on a prompt, past..
	// past+S-1 after a cache: GenAI's models give none).
	Positions   func(pr *probe.Probe) ([]float64, error)
	PositionIDs func() (*graph.Value, error)
	// FromCache: the model counts its positions from 0 in every call and
	// --add-kv-cache gives it a cache: position_ids are the cache's length
	// onwards (past .. past+S-1), not PositionIDs.
	FromCache bool
}

// opAttrs are the op's attributes for a.
func (a *Attention) opAttrs(rot *Rotary) []*graph.Attr {
	if a.ONNX {
		return []*graph.Attr{graph.IntAttr("q_num_heads", int64(a.Heads)), graph.IntAttr("kv_num_heads", int64(a.KVHeads)),
			graph.FloatAttr("scale", float32(a.Scale)), graph.IntAttr("is_causal", boolInt(a.Causal))}
	}
	attrs := []*graph.Attr{graph.IntAttr("num_heads", int64(a.Heads)), graph.IntAttr("kv_num_heads", int64(a.KVHeads)),
		graph.FloatAttr("scale", float32(a.Scale))}
	if rot != nil && rot.Positions == nil {
		attrs = append(attrs, graph.IntAttr("do_rotary", 1))
		if rot.Interleaved {
			attrs = append(attrs, graph.IntAttr("rotary_interleaved", 1))
		}
	}
	return attrs
}

// checkCall is one call the check runs: batch, new tokens, cached ones.
type checkCall struct{ batch, seq, past int }

// Check runs the block as the model computes it and as the op would, on
// pseudo-random q, k, v (and caches), at a prompt, and with a cache at a
// few tokens after it and one token: the op's output (and present caches)
// must equal the model's within the rounding of their type.
func (a *Attention) Check(w *work.Work, rot *Rotary) error {
	calls := []checkCall{{2, 5, 0}}
	if a.PastK != nil {
		calls = append(calls, checkCall{1, 4, 3}, checkCall{2, 1, 6})
	}
	for i, c := range calls {
		if err := a.checkCall(w, rot, c, uint64(i)); err != nil {
			return refuse("the op does not compute the block (batch %d, %d tokens after %d): %v", c.batch, c.seq, c.past, err)
		}
	}
	return nil
}

func (a *Attention) checkCall(w *work.Work, rot *Rotary, c checkCall, seed uint64) error {
	pr := probe.NewProbe(w, c.batch, c.seq, 0)
	pr.Past = c.past
	rng := rand.New(rand.NewPCG(seed, 25))
	cuts := map[*graph.Value]*kernels.Tensor{}
	for _, v := range []*graph.Value{a.Q, a.K, a.V, a.PastK, a.PastV} {
		if v == nil {
			continue
		}
		shape, ok := pr.BindShape(w.Shape(v))
		if !ok {
			return fmt.Errorf("the shape %s of %s is not decided", w.ShapeString(w.Shape(v)), w.Name(v))
		}
		cuts[v] = randomOf(rng, a.Type, shape)
	}
	// A model whose shapes fix the batch or the tokens runs at its own
	// sizes, whatever the call asks: read them from the cuts.
	if q := cuts[a.Q]; q != nil {
		switch a.QL {
		case BNSH:
			c.batch, c.seq = q.Shape[0], q.Shape[2]
		default:
			c.batch, c.seq = q.Shape[0], q.Shape[1]
		}
	}
	if pk := cuts[a.PastK]; pk != nil {
		c.past = pk.Shape[2]
	}
	pr.SetCuts(cuts)
	want, err := pr.Value(a.Out)
	if err != nil {
		return err
	}
	ins, err := a.checkInputs(pr, cuts, rot, c)
	if err != nil {
		return err
	}
	outs, err := a.evalOp(ins, rot)
	if err != nil {
		return err
	}
	got := outs[0]
	if got.Len() != c.batch*c.seq*a.Heads*a.HeadDim {
		return fmt.Errorf("the op's output is %v for %d rows of %d tokens", got.Shape, c.batch, c.seq)
	}
	if a.OutBNSH {
		got = transpose12(got.Reshaped(c.batch, c.seq, a.Heads, a.HeadDim))
	}
	if err := near(want, got, a.Type, "the output"); err != nil {
		return err
	}
	for i, p := range []*graph.Value{a.PresentK, a.PresentV} {
		if p == nil {
			continue
		}
		pw, err := pr.Value(p)
		if err != nil {
			return err
		}
		if err := near(pw, outs[1+i], a.Type, "the present cache"); err != nil {
			return err
		}
	}
	return nil
}

// checkInputs are the op's inputs for a probe: q, k, v as rows, the
// caches, the lengths, the rotary's caches and positions, the mask.
func (a *Attention) checkInputs(pr *probe.Probe, cuts map[*graph.Value]*kernels.Tensor, rot *Rotary, c checkCall) ([]*kernels.Tensor, error) {
	rows := func(t *kernels.Tensor, l Layout) *kernels.Tensor {
		switch l {
		case Rows:
			return t
		case BNSH:
			t = transpose12(t)
		}
		return t.Reshaped(t.Shape[0], t.Shape[1], t.Shape[2]*t.Shape[3])
	}
	T := c.past + c.seq
	seqlens := make([]int32, c.batch)
	for i := range seqlens {
		seqlens[i] = int32(T - 1)
	}
	ins := []*kernels.Tensor{rows(cuts[a.Q], a.QL), rows(cuts[a.K], a.KL), rows(cuts[a.V], a.VL), nil, nil,
		kernels.FromSlice([]int{c.batch}, seqlens), kernels.Scalar(int32(T)), nil, nil, nil, nil}
	if a.PastK != nil {
		ins[3], ins[4] = cuts[a.PastK], cuts[a.PastV]
	}
	if rot != nil && rot.Positions == nil && !a.ONNX {
		ins[7], ins[8] = rot.Cos, rot.Sin
	}
	if rot != nil && (rot.Positions != nil || a.ONNX) {
		ps, err := rot.Positions(pr)
		if err != nil {
			return nil, err
		}
		if len(ps) != c.seq {
			return nil, fmt.Errorf("%d positions for %d tokens", len(ps), c.seq)
		}
		ids := make([]int64, c.batch*c.seq)
		for i := range ids {
			ids[i] = int64(ps[i%c.seq])
		}
		pos := kernels.FromSlice([]int{c.batch, c.seq}, ids)
		for i, heads := range []int{a.Heads, a.KVHeads} {
			rin, domain := []*kernels.Tensor{ins[i], pos, rot.Cos, rot.Sin}, DomainMicrosoft
			if a.ONNX {
				rin, domain = []*kernels.Tensor{ins[i], rot.Cos, rot.Sin, pos}, ""
			}
			outs, err := evalNode(domain, rotaryNode, rin, rot.rotaryAttrs(heads), 1)
			if err != nil {
				return nil, err
			}
			ins[i] = outs[0]
		}
	}
	for _, m := range a.Masks {
		b, err := pr.Value(m)
		if err != nil {
			return nil, err
		}
		if a.flatMasks[m] {
			if b.Shape[0] != c.batch*a.Heads {
				return nil, fmt.Errorf("the mask %v is not [batch·heads, ..] for %d rows of %d heads", b.Shape, c.batch, a.Heads)
			}
			b = b.Reshaped(c.batch, a.Heads, b.Shape[1], b.Shape[2])
		}
		ins[10] = addMasks(ins[10], expandRows(rank4(b), c.seq, T))
	}
	for _, wm := range a.wheres {
		cond, err := pr.Value(wm.cond)
		if err != nil {
			return nil, err
		}
		fill, err := pr.Value(wm.fill)
		if err != nil {
			return nil, err
		}
		f := fill.Float64s()[0]
		x := cond.Float64s()
		m := make([]float64, len(x))
		for i, v := range x {
			if (v != 0) != wm.keep {
				m[i] = f
			}
		}
		ins[10] = addMasks(ins[10], expandRows(rank4(probe.FromFloat64Any(a.Type, cond.Shape, m)), c.seq, T))
	}
	if a.ONNX {
		// Attention (opset 23): q, k, v, attn_mask, past_key, past_value.
		ins = []*kernels.Tensor{ins[0], ins[1], ins[2], ins[10], ins[3], ins[4]}
	}
	return ins, nil
}

// evalOp runs the op alone on ins with a's attributes.
func (a *Attention) evalOp(ins []*kernels.Tensor, rot *Rotary) ([]*kernels.Tensor, error) {
	if a.ONNX {
		return evalNode("", onnxAttentionNode, ins, a.opAttrs(rot), 3)
	}
	return evalNode(DomainMicrosoft, gqaNode, ins, a.opAttrs(rot), 3)
}

const (
	gqaNode           = "GroupQueryAttention"
	rotaryNode        = "RotaryEmbedding"
	onnxAttentionNode = "Attention"
)

// evalNode runs one node of op (com.microsoft, or the ONNX domain of
// opset 23) alone on ins.
func evalNode(domain, op string, ins []*kernels.Tensor, attrs []*graph.Attr, nOut int) ([]*kernels.Tensor, error) {
	m := graph.NewModel(10, "onnxpe-check", graph.Opset{Domain: "", Version: 23}, graph.Opset{Domain: DomainMicrosoft, Version: 1})
	vals := make([]*graph.Value, len(ins))
	for i, t := range ins {
		if t != nil {
			vals[i] = m.Graph.AddInput(fmt.Sprintf("in%d", i), nil)
		}
	}
	n := m.Graph.NewNode(op, domain, vals, nOut, attrs...)
	opset := int64(23)
	if domain == DomainMicrosoft {
		opset = 1
	}
	return kernels.EvalNode(n, opset, ins, kernels.Options{Threads: 1})
}

// rotaryAttrs are the attributes of a RotaryEmbedding (either domain's)
// turning rows of heads heads.
func (rot *Rotary) rotaryAttrs(heads int) []*graph.Attr {
	attrs := []*graph.Attr{graph.IntAttr("num_heads", int64(heads))}
	if rot.Interleaved {
		attrs = append(attrs, graph.IntAttr("interleaved", 1))
	}
	if rot.RotaryDim < rot.HeadDim {
		attrs = append(attrs, graph.IntAttr("rotary_embedding_dim", int64(rot.RotaryDim)))
	}
	return attrs
}

// expandRows broadcasts a [b, h, q, k] mask to q = seq queries and k =
// keys where it has one of either.
func expandRows(t *kernels.Tensor, seq, keys int) *kernels.Tensor {
	B, H, Q, K := t.Shape[0], t.Shape[1], t.Shape[2], t.Shape[3]
	if (Q == seq || Q != 1) && (K == keys || K != 1) {
		return t
	}
	x := t.Float64s()
	out := make([]float64, B*H*seq*keys)
	for i := range out {
		k, q, bh := i%keys, (i/keys)%seq, i/(keys*seq)
		out[i] = x[(bh*Q+q%Q)*K+k%K]
	}
	return probe.FromFloat64Any(t.DType, []int{B, H, seq, keys}, out)
}

// addMasks is x + y for masks [b, h, queries, keys] whose batch and heads
// may be 1 (x nil: y).
func addMasks(x, y *kernels.Tensor) *kernels.Tensor {
	if x == nil {
		return y
	}
	B, H := max(x.Shape[0], y.Shape[0]), max(x.Shape[1], y.Shape[1])
	Q, K := y.Shape[2], y.Shape[3]
	xs, ys := x.Float64s(), y.Float64s()
	at := func(t *kernels.Tensor, v []float64, b, h, i int) float64 {
		return v[((b%t.Shape[0])*t.Shape[1]+h%t.Shape[1])*Q*K+i]
	}
	out := make([]float64, B*H*Q*K)
	for b := range B {
		for h := range H {
			for i := range Q * K {
				out[(b*H+h)*Q*K+i] = at(x, xs, b, h, i) + at(y, ys, b, h, i)
			}
		}
	}
	return probe.FromFloat64Any(y.DType, []int{B, H, Q, K}, out)
}

// rank4 is t with 1s before its shape up to rank 4 (numpy's broadcast).
func rank4(t *kernels.Tensor) *kernels.Tensor {
	sh := slices.Clone(t.Shape)
	for len(sh) < 4 {
		sh = append([]int{1}, sh...)
	}
	return t.Reshaped(sh...)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// randomOf is a tensor of dt with values N(0, 1).
func randomOf(rng *rand.Rand, dt graph.DataType, shape []int) *kernels.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return probe.FromFloat64Any(dt, shape, v)
}

// transpose12 swaps axes 1 and 2 of a 4-D tensor ([B, N, S, H] and [B, S,
// N, H]), as float64s of the tensor's type.
func transpose12(t *kernels.Tensor) *kernels.Tensor {
	B, X, Y, H := t.Shape[0], t.Shape[1], t.Shape[2], t.Shape[3]
	x := t.Float64s()
	out := make([]float64, len(x))
	for b := range B {
		for i := range X {
			for j := range Y {
				copy(out[((b*Y+j)*X+i)*H:][:H], x[((b*X+i)*Y+j)*H:][:H])
			}
		}
	}
	return probe.FromFloat64Any(t.DType, []int{B, Y, X, H}, out)
}

// near compares the model's values with the op's: within 1e-4 of
// max(1, |x|) in float32, 1e-2 in float16.
func near(want, got *kernels.Tensor, dt graph.DataType, what string) error {
	if want.Len() != got.Len() {
		return fmt.Errorf("%s has %v elements, the op's %v", what, want.Shape, got.Shape)
	}
	tol := 1e-4
	if dt == graph.Float16 {
		tol = 1e-2
	}
	w, g := want.Float64s(), got.Float64s()
	for i := range w {
		if d := math.Abs(w[i] - g[i]); !(d <= tol*math.Max(1, math.Abs(w[i]))) {
			return fmt.Errorf("%s differs by %.3g at element %d (%.6g, the op %.6g)", what, d, i, w[i], g[i])
		}
	}
	return nil
}

// Fuse replaces the block by one GroupQueryAttention node in the
// rewritten model: q, k and v as [batch, seq, heads·head] rows (the
// model's own when it reshapes them from such rows), the caches, the
// lengths from the sizes (every key valid: padding is the mask's), the
// rotary's caches and positions, the mask as attention_bias. Its output
// replaces the block's, its present caches the concatenations. With
// a.ONNX the op is Attention of opset 23 (q_num_heads, kv_num_heads,
// is_causal, the mask as attn_mask, the caches as past_key and
// past_value), q and k rows turned before it by RotaryEmbedding of opset
// 23 at the model's position_ids.
func (r *Rewrite) Fuse(w *work.Work, a *Attention, rot *Rotary) error {
	q, err := r.rowsOf(w, a.Q, a.QL, a.Heads*a.HeadDim)
	if err != nil {
		return err
	}
	k, err := r.rowsOf(w, a.K, a.KL, a.KVHeads*a.HeadDim)
	if err != nil {
		return err
	}
	v, err := r.rowsOf(w, a.V, a.VL, a.KVHeads*a.HeadDim)
	if err != nil {
		return err
	}
	if p := v.Producer(); a.ONNX && (p == nil || p.OpType != "Reshape" || !r.added[p]) {
		// The op's shape inference reads v's width (see rowsOf): the
		// model's own rows may not tell it.
		v = Typed(r.Op1("Reshape", []*graph.Value{v, r.VecInt(0, 0, int64(a.KVHeads*a.HeadDim))}), a.Type, 3)
	}
	ins := []*graph.Value{q, k, v, nil, nil, nil, nil, nil, nil, nil, nil}
	// adding: --add-kv-cache gives the block a cache (attention_cache.go);
	// its padding mask is then read over past and new tokens.
	adding := r.Opts.AddKVCache && a.PastK == nil
	var pad *graph.Value
	if adding {
		if !a.Causal {
			return refuse("a KV cache is added to causal blocks only")
		}
		if pad, err = r.cachePadding(w, a); err != nil {
			return err
		}
		if ins[3], ins[4], err = r.addCache(a); err != nil {
			return err
		}
	}
	if a.PastK != nil {
		if r.Opts.AddKVCache {
			if r.KV == nil {
				r.KV = &KVCache{}
			}
			r.KV.Had = append(r.KV.Had, a.Block.Index)
		}
		if ins[3], err = r.Lookup(MainName(w, a.PastK)); err != nil {
			return err
		}
		if ins[4], err = r.Lookup(MainName(w, a.PastV)); err != nil {
			return err
		}
	}
	if !a.ONNX {
		ins[5], ins[6] = r.gqaLengths(q, ins[3])
	}
	if rot != nil && rot.Positions == nil && !a.ONNX {
		ins[7], ins[8] = rot.CosV, rot.SinV
	}
	if rot != nil && (rot.Positions != nil || a.ONNX) {
		var pos *graph.Value
		if rot.FromCache && adding {
			pos = r.cachePositions(q, ins[3])
		} else if pos, err = rot.PositionIDs(); err != nil {
			return err
		}
		for i, heads := range []int{a.Heads, a.KVHeads} {
			var y *graph.Value
			if a.ONNX {
				y = r.Op(rotaryNode, "", []*graph.Value{ins[i], rot.CosV, rot.SinV, pos}, 1, rot.rotaryAttrs(heads)...)[0]
			} else {
				y = r.Op(rotaryNode, DomainMicrosoft, []*graph.Value{ins[i], pos, rot.CosV, rot.SinV}, 1, rot.rotaryAttrs(heads)...)[0]
			}
			ins[i] = Typed(y, a.Type, 3)
		}
	}
	masks, wheres := a.Masks, a.wheres
	if adding {
		masks, wheres, ins[10] = nil, nil, pad
	}
	for _, m := range masks {
		v, err := r.Lookup(MainName(w, m))
		if err != nil {
			return err
		}
		switch {
		case a.flatMasks[m]:
			// [batch·heads, q, k] -> [batch, heads, q, k]
			dims := Typed(r.Op1("Concat", []*graph.Value{r.VecInt(-1, int64(a.Heads)), r.DimOf(v, 1, 2)}, graph.IntAttr("axis", 0)), graph.Int64, 1)
			v = Typed(r.Op1("Reshape", []*graph.Value{v, dims}), a.Type, 4)
		case w.Shape(m).Rank() == 2:
			v = Typed(r.Unsqueeze(v, 0, 1), a.Type, 4)
		case w.Shape(m).Rank() == 3:
			v = Typed(r.Unsqueeze(v, 0), a.Type, 4)
		}
		if ins[10] == nil {
			ins[10] = v
		} else {
			ins[10] = Typed(r.Op1("Add", []*graph.Value{ins[10], v}), a.Type, 4)
		}
	}
	for _, wm := range wheres {
		cond, err := r.Lookup(MainName(w, wm.cond))
		if err != nil {
			return err
		}
		f, err := probe.NewProbe(w, 1, 1, 0).Value(wm.fill)
		if err != nil {
			return refuse("the fill of a Where: %v", err)
		}
		fill, err := r.Table("onnxpe_mask_fill", a.Type, nil, f.Float64s()[:1])
		if err != nil {
			return err
		}
		zero, err := r.Table("onnxpe_zero", a.Type, nil, []float64{0})
		if err != nil {
			return err
		}
		if w.ElemType(wm.cond) != graph.Bool {
			cond = Typed(r.Op1("Cast", []*graph.Value{cond}, graph.IntAttr("to", int64(graph.Bool))), graph.Bool, w.Shape(wm.cond).Rank())
		}
		sel := []*graph.Value{cond, fill, zero}
		if wm.keep {
			sel = []*graph.Value{cond, zero, fill}
		}
		v := Typed(r.Op1("Where", sel), a.Type, w.Shape(wm.cond).Rank())
		if w.Shape(wm.cond).Rank() == 2 {
			v = Typed(r.Unsqueeze(v, 0, 1), a.Type, 4)
		}
		if ins[10] == nil {
			ins[10] = v
		} else {
			ins[10] = Typed(r.Op1("Add", []*graph.Value{ins[10], v}), a.Type, 4)
		}
	}
	if ins[10] != nil {
		// [.., queries, keys] as the op takes it: a mask may broadcast
		// along them (a single query's row, say) where the scores do not.
		sizes := Typed(r.Op1("Concat", []*graph.Value{r.VecInt(1, 1), r.DimOf(q, 1), r.gqaTotal(q, ins[3])},
			graph.IntAttr("axis", 0)), graph.Int64, 1)
		ins[10] = Typed(r.Op1("Expand", []*graph.Value{ins[10], sizes}), a.Type, 4)
	}
	var outs []*graph.Value
	if a.ONNX {
		outs = r.Op(onnxAttentionNode, "", []*graph.Value{ins[0], ins[1], ins[2], ins[10], ins[3], ins[4]}, 3, a.opAttrs(rot)...)
	} else {
		outs = r.Op(gqaNode, DomainMicrosoft, ins, 3, a.opAttrs(rot)...)
	}
	if err := r.replaceByOp(w, a, outs); err != nil {
		return err
	}
	if adding {
		return r.addPresents(a, outs)
	}
	return nil
}

// replaceByOp puts the op's outputs in place of the block's.
func (r *Rewrite) replaceByOp(w *work.Work, a *Attention, outs []*graph.Value) error {
	y := Typed(outs[0], a.Type, 3)
	if a.OutBNSH {
		y = r.Op1("Reshape", []*graph.Value{y, r.VecInt(0, 0, int64(a.Heads), int64(a.HeadDim))})
		y = Typed(r.Op1("Transpose", []*graph.Value{y}, graph.IntsAttr("perm", 0, 2, 1, 3)), a.Type, 4)
	}
	out, err := r.Lookup(MainName(w, a.Out))
	if err != nil {
		return err
	}
	if out.Type != nil {
		y.Type = out.Type.Clone()
	}
	out.ReplaceKeepingName(y)
	before := ancestors(outs[0].Producer())
	for i, p := range []*graph.Value{a.PresentK, a.PresentV} {
		Typed(outs[1+i], a.Type, 4)
		if p == nil {
			continue
		}
		pv, err := r.Lookup(MainName(w, p))
		if err != nil {
			return err
		}
		if pv.Type != nil {
			outs[1+i].Type = pv.Type.Clone()
		}
		// Readers the op depends on (a mask sized by the concatenated
		// cache's Shape) keep the concatenation: the op's present comes
		// after them.
		var keep []graph.Use
		for _, u := range pv.Uses() {
			if before[u.Node] {
				keep = append(keep, u)
			}
		}
		pv.ReplaceKeepingName(outs[1+i])
		for _, u := range keep {
			u.Node.SetInput(u.Index, pv)
		}
	}
	return nil
}

// ancestors are the nodes n depends on.
func ancestors(n *graph.Node) map[*graph.Node]bool {
	seen := map[*graph.Node]bool{}
	stack := []*graph.Node{n}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, in := range x.Inputs() {
			if in == nil {
				continue
			}
			if p := in.Producer(); p != nil && !seen[p] {
				seen[p] = true
				stack = append(stack, p)
			}
		}
	}
	return seen
}

// rowsOf is the [batch, seq, heads·head] rows of x (a value of the
// working copy, BNSH or BSNH; heads·head = width): the rank-3 value the
// model reshaped and transposed it from when there is one, else x
// transposed and reshaped to the width given as a number (ONNX Runtime's
// shape inference of the opset-23 Attention reads v's width, and makes
// its output 0 wide when it cannot tell).
func (r *Rewrite) rowsOf(w *work.Work, x *graph.Value, l Layout, width int) (*graph.Value, error) {
	if l != Rows {
		if y := rowsBefore(w, x, l == BNSH); y != nil && MainName(w, y) != "" {
			x, l = y, Rows
		}
	}
	v, err := r.Lookup(MainName(w, x))
	if err != nil || l == Rows {
		return v, err
	}
	dt := w.ElemType(x)
	if l == BNSH {
		v = Typed(r.Op1("Transpose", []*graph.Value{v}, graph.IntsAttr("perm", 0, 2, 1, 3)), dt, 4)
	}
	return Typed(r.Op1("Reshape", []*graph.Value{v, r.VecInt(0, 0, int64(width))}), dt, 3), nil
}

// rowsBefore is the rank-3 [batch, seq, heads·head] value x was made from
// by a Reshape to [batch, seq, heads, head] (and a Transpose to BNSH),
// nil when it was not.
func rowsBefore(w *work.Work, x *graph.Value, bnsh bool) *graph.Value {
	n := x.Producer()
	if bnsh {
		if n == nil || n.OpType != "Transpose" || !work.IsONNX(n) || !equalInts(n.AttrInts("perm"), 0, 2, 1, 3) {
			return nil
		}
		n = n.Input(0).Producer()
	}
	if n == nil || n.OpType != "Reshape" || !work.IsONNX(n) {
		return nil
	}
	in, out := w.Shape(n.Input(0)), w.Shape(n.Output(0))
	if in.Rank() != 3 || out.Rank() != 4 || in.Dims[0] != out.Dims[0] || in.Dims[1] != out.Dims[1] || !in.Dims[2].Known() ||
		!out.Dims[2].Known() || !out.Dims[3].Known() || in.Dims[2] != out.Dims[2]*out.Dims[3] {
		return nil
	}
	return n.Input(0)
}

func equalInts(a []int64, b ...int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// gqaLengths are seqlens_k (every row: total - 1) and
// total_sequence_length (past + seq) for rows q and the cache past.
func (r *Rewrite) gqaLengths(q, past *graph.Value) (*graph.Value, *graph.Value) {
	key := "gqa|" + q.Name
	if past != nil {
		key += "|" + past.Name
	}
	if v, ok := r.Memo[key+"|seqlens"]; ok {
		return v, r.Memo[key+"|total"]
	}
	total := r.gqaTotal(q, past)
	i32 := func(v *graph.Value, rank int) *graph.Value {
		return Typed(r.Op1("Cast", []*graph.Value{v}, graph.IntAttr("to", int64(graph.Int32))), graph.Int32, rank)
	}
	last := Typed(r.Op1("Sub", []*graph.Value{total, r.VecInt(1)}), graph.Int64, 1)
	seqlens := i32(Typed(r.Op1("Expand", []*graph.Value{last, r.DimOf(q, 0)}), graph.Int64, 1), 1)
	tot := i32(Typed(r.Op1("Reshape", []*graph.Value{total, r.Ints([]int64{0})}), graph.Int64, 0), 0)
	r.Memo[key+"|seqlens"], r.Memo[key+"|total"] = seqlens, tot
	return seqlens, tot
}

// gqaTotal is the keys' count, past and new tokens, as int64 [1].
func (r *Rewrite) gqaTotal(q, past *graph.Value) *graph.Value {
	key := "gqa|total|" + q.Name
	if past != nil {
		key += "|" + past.Name
	}
	if v, ok := r.Memo[key]; ok {
		return v
	}
	total := r.DimOf(q, 1)
	if past != nil {
		total = Typed(r.Op1("Add", []*graph.Value{r.DimOf(past, 2), total}), graph.Int64, 1)
	}
	r.Memo[key] = total
	return total
}
