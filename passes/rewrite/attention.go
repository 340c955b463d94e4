package rewrite

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/work"
)

// Attention is an unfused attention block read for one fused attention op
// (com.microsoft GroupQueryAttention): what the op takes and what its
// outputs replace, as values of the working copy. A scheme fuses its
// encoding into the op (RoPE: do_rotary and the cos/sin caches) and the
// shared code here does the rest: the projections as [batch, seq,
// heads·head] rows, the KV caches given as inputs, the scale, the causal
// mask (the op's own) and a padding mask (its attention_bias).
type Attention struct {
	Block *attn.Block
	// Q, K and V are the projected q, k and v as the block reads them
	// before any position-dependent change (a scheme's rotation): [batch,
	// heads, seq, head] (BNSH), or [batch, seq, heads, head].
	Q, K, V        *graph.Value
	QL, KL, VL     Layout
	PastK, PastV   *graph.Value // KV caches given as inputs (nil: none)
	PresentK       *graph.Value // past ++ new keys, [batch, kv_heads, total, head]
	PresentV       *graph.Value
	Out            *graph.Value // the block's output the op's replaces
	OutBNSH        bool         // Out is [batch, heads, seq, head] (else [batch, seq, heads·head])
	Heads, KVHeads int
	HeadDim        int
	Scale          float64
	// Masks are the additive terms of the scores the op's mask input
	// sums (a padding mask, the scheme's position bias); Causal says the
	// block hides the keys after each query's own by a term that depends
	// on the sizes only, or a Where: the op's own causal mask, which
	// GroupQueryAttention always applies.
	Masks            []*graph.Value
	Causal           bool
	Type             graph.DataType
	scores, keysSeen work.Dim // the scores' query and key lengths
	// whereCausal: a Where of the score path masks the keys after each
	// query's own (the op's causal mask).
	whereCausal bool
	// ONNX asks for the standard ops of opset 23 instead (--rope-op onnx):
	// RotaryEmbedding on q and k rows, then Attention with is_causal.
	ONNX bool
	bias []*graph.Value // the scheme's terms (ReadAttention)
	// flat: the block computes its scores and weights as [batch·heads,
	// queries, keys] (BLOOM's baddbmm and bmm); flatMasks are its terms
	// of that shape, added before the scores are viewed as 4-D.
	flat      bool
	flatMasks map[*graph.Value]bool
	// wheres are the Wheres of the score path whose condition depends on
	// the inputs' values (a padding mask, with or without the causal
	// one): each is the additive mask Where(cond, 0, fill) (keep: the
	// condition says which scores stay) or Where(cond, fill, 0).
	wheres []whereMask
}

type whereMask struct {
	cond, fill *graph.Value
	keep       bool
}

// Layout is how q, k or v holds its heads.
type Layout int

const (
	BNSH Layout = iota // [batch, heads, seq, head]
	BSNH               // [batch, seq, heads, head]
	Rows               // [batch, seq, heads·head]
)

// ReadAttention reads block b (its sides s) as one fused attention op, or
// says why it cannot be one (an ErrRewrite): the op takes q, k and v
// projected, a scale, a causal mask and additive ones, KV caches of
// [batch, kv_heads, past, head], and nothing else between the projections
// and the product with v. rotated says the sides' regions are the
// scheme's (a rotation the op applies itself): q and k are read before
// them; otherwise a side must have no region. onnx asks for the opset-23
// Attention (which need not be causal); bias are the values the scheme
// adds to the scores as its encoding (ALiBi's, T5's), which the op's mask
// input takes with the masks.
func ReadAttention(w *work.Work, b *attn.Block, s *attn.BlockSides, rotated, onnx bool, bias ...*graph.Value) (*Attention, error) {
	a := &Attention{Block: b, Scale: 1, ONNX: onnx, bias: bias}
	if err := a.readShape(w, b, s); err != nil {
		return nil, err
	}
	if err := a.readScores(w, b); err != nil {
		return nil, err
	}
	for _, sd := range []*attn.Side{s.Q, s.K} {
		if err := a.readSide(w, sd, rotated); err != nil {
			return nil, err
		}
	}
	if err := a.readV(w, b); err != nil {
		return nil, err
	}
	if a.flat {
		for _, x := range []**graph.Value{&a.Q, &a.K, &a.V} {
			if *x = unflat(w, *x); w.Shape(*x).Rank() != 4 {
				return nil, refuse("%s is %s: not made from [batch, heads, seq, head]", w.Name(*x), w.ShapeString(w.Shape(*x)))
			}
		}
	}
	if err := a.readHeads(w, s); err != nil {
		return nil, err
	}
	if !a.ONNX && a.HeadDim%8 != 0 {
		// ONNX Runtime 1.30 refuses to run it (and crashed loading an MPT
		// block of head 12 rewritten so).
		return nil, refuse("heads of %d: ONNX Runtime's GroupQueryAttention takes a multiple of 8", a.HeadDim)
	}
	if err := a.readMasks(w, b); err != nil {
		return nil, err
	}
	if err := a.readCache(w, s); err != nil {
		return nil, err
	}
	if err := a.readOut(w, b); err != nil {
		return nil, err
	}
	return a, nil
}

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRewrite, fmt.Sprintf(format, args...))
}

// readShape checks the block's frame: an unfused block of 4-D scores
// [batch, heads, queries, keys] whose Softmax over the keys is read by the
// product with v alone.
func (a *Attention) readShape(w *work.Work, b *attn.Block, s *attn.BlockSides) error {
	switch {
	case b.Fused != nil:
		return refuse("the block is a fused op already (%s)", b.Fused.OpType)
	case b.AV == nil || s == nil || s.Q == nil || s.K == nil:
		return refuse("the block's q, k or v is not found")
	case len(b.Terms) > 0 || len(b.OutTerms) > 0:
		return refuse("the scores have terms besides q·kᵀ (relative positions)")
	}
	sh := w.Shape(b.Softmax.Input(0))
	if sh.Rank() != 4 {
		return refuse("the scores are %s, not [batch, heads, queries, keys]", w.ShapeString(sh))
	}
	if ax := b.Softmax.AttrInt("axis", -1); ax != -1 && ax != 3 {
		return refuse("the Softmax is over axis %d, not the keys", ax)
	}
	if !weightsToV(w, b) {
		return refuse("the attention weights are read beyond the product with v")
	}
	a.flat = w.Shape(b.AV.Output(0)).Rank() == 3
	a.Type = w.ElemType(b.AV.Output(0))
	if a.Type != graph.Float && a.Type != graph.Float16 {
		return refuse("the block computes in %v (the op takes float32 or float16)", a.Type)
	}
	a.scores, a.keysSeen = sh.Dims[2], sh.Dims[3]
	return nil
}

// weightsToV reports whether the Softmax's output reaches the product
// with v alone, through casts to its own type (Hugging Face's
// .to(dtype)) and copies.
func weightsToV(w *work.Work, b *attn.Block) bool {
	v := b.Softmax.Output(0)
	for steps := 0; steps < 4; steps++ {
		n := onlyUse(v)
		switch {
		case n == b.AV:
			return true
		case n == nil || !work.IsONNX(n):
			return false
		case n.OpType == "Identity", n.OpType == "Dropout" && len(n.Outputs()) == 1,
			n.OpType == "Cast" && w.ElemType(n.Output(0)).IsFloat():
			v = n.Output(0)
		case n.OpType == "Reshape" && folds(w, n):
			// BLOOM's weights viewed as [batch·heads, queries, keys]
			// for its bmm with v.
			v = n.Output(0)
		default:
			return false
		}
	}
	return false
}

// folds reports whether Reshape n views [batch, heads, q, k] as
// [batch·heads, q, k].
func folds(w *work.Work, n *graph.Node) bool {
	// The keys' size may be left to the Reshape (-1): the check on
	// numbers confirms the view.
	in, out := w.Shape(n.Input(0)), w.Shape(n.Output(0))
	return in.Rank() == 4 && out.Rank() == 3 && in.Dims[2] == out.Dims[1]
}

// unflat is the [batch, heads, seq, head] value a block of flat scores
// made x from: x viewed as [batch·heads, seq, head], or that view
// transposed to [batch·heads, head, seq] (BLOOM's keys); x otherwise.
func unflat(w *work.Work, x *graph.Value) *graph.Value {
	if p := x.Producer(); p != nil && p.OpType == "Transpose" && work.IsONNX(p) && equalInts(p.AttrInts("perm"), 0, 2, 1) {
		x = p.Input(0)
	}
	if p := x.Producer(); p != nil && p.OpType == "Reshape" && work.IsONNX(p) {
		in, out := w.Shape(p.Input(0)), w.Shape(x)
		if in.Rank() == 4 && out.Rank() == 3 && in.Dims[2] == out.Dims[1] {
			return p.Input(0)
		}
	}
	return x
}

// readScores reads the score path: constant scalar scales, then
// additions of masks, nothing else; or a Where that keeps the scores of
// the visible keys and fills the others (GPT-J's and GPT-NeoX's causal
// mask), before or after the scales.
func (a *Attention) readScores(w *work.Work, b *attn.Block) error {
	lastScale, firstAdd := -1, math.MaxInt
	for _, n := range b.ScorePath {
		switch n.OpType {
		case "Mul", "Div":
			c, err := scalarOf(w, n)
			if err != nil {
				return err
			}
			if c < 0 {
				return refuse("%s (%s) scales the scores by %g: a mask filled before it would no longer mask", n.OpType, w.OrigName(n), c)
			}
			a.Scale *= c
			lastScale = max(lastScale, w.Pos(n))
		case "Where":
			input, err := a.readWhere(w, b, n)
			if err != nil {
				return err
			}
			if input {
				firstAdd = min(firstAdd, w.Pos(n))
			}
		case "Reshape":
			// GPT-NeoX's product of [batch·heads, seq, head] rows, viewed
			// back as [batch, heads, queries, keys] before its mask.
			if sh := w.Shape(n.Output(0)); sh.Rank() != 4 || sh.Dims[2] != a.scores || sh.Dims[3] != a.keysSeen {
				return refuse("the scores are reshaped to %s (%s)", w.ShapeString(sh), w.OrigName(n))
			}
		case "Add":
			firstAdd = min(firstAdd, w.Pos(n))
		case "Cast": // softmax in float32 (Hugging Face's half models)
			if !w.ElemType(n.Output(0)).IsFloat() {
				return refuse("the scores are cast to %v", w.ElemType(n.Output(0)))
			}
		default:
			return refuse("the scores go through %s (%s): the op takes a scale and an additive mask only", n.OpType, w.OrigName(n))
		}
	}
	if lastScale > firstAdd {
		return refuse("the scores are scaled after a mask is added")
	}
	return nil
}

// scalarOf is the constant a Mul multiplies by (a Div divides by) when it
// is one number.
func scalarOf(w *work.Work, n *graph.Node) (float64, error) {
	acts := w.ActInputs(n)
	if len(acts) != 1 || n.OpType == "Div" && acts[0] != 0 {
		return 0, refuse("%s (%s) is not a scale by a constant", n.OpType, w.OrigName(n))
	}
	c := w.Const(n.Input(1 - acts[0]))
	if c == nil || c.Len() != 1 {
		return 0, refuse("%s (%s) scales by more than one number", n.OpType, w.OrigName(n))
	}
	x := c.Float64s()[0]
	if n.OpType == "Div" {
		x = 1 / x
	}
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return 0, refuse("%s (%s) scales by %g", n.OpType, w.OrigName(n), x)
	}
	return x, nil
}

// readSide reads the q or k side: between the projection and the scores
// only layout changes, the repeat of grouped heads, constant scales (into
// the op's scale), the concatenation with a KV cache, and the scheme's
// region when rotated.
func (a *Attention) readSide(w *work.Work, s *attn.Side, rotated bool) error {
	if s.Norm != "" {
		return refuse("%s is normalised after the rotation (%s): the op has no such step", w.Name(s.Out), s.Norm)
	}
	if !rotated && len(s.Nodes) > 0 {
		return refuse("%s changes with the position before the scores", w.Name(s.Out))
	}
	for _, n := range s.Skipped {
		switch {
		case n.OpType == "Mul" || n.OpType == "Div":
			c, err := scalarOf(w, n)
			if err != nil {
				return err
			}
			a.Scale *= c
		case n.OpType == "Cast" && w.ElemType(n.Input(0)) != w.ElemType(n.Output(0)):
			return refuse("%s casts %v to %v", w.OrigName(n), w.ElemType(n.Input(0)), w.ElemType(n.Output(0)))
		case n.OpType == "Concat" || work.LayoutOps[n.OpType]:
		default:
			return refuse("%s (%s) between the projection and the scores", n.OpType, w.OrigName(n))
		}
	}
	in := s.Out
	if rotated {
		in = s.In
	}
	if a.Q == nil {
		a.Q = in
	} else {
		a.K = in
	}
	return nil
}

// readV walks back from the product with v through layout changes, the
// repeat of grouped heads and the concatenation with a cache.
func (a *Attention) readV(w *work.Work, b *attn.Block) error {
	hd := w.Shape(b.V).Last()
	s, why := attn.RegionOf(w, b.V, hd)
	if s == nil {
		return refuse("v: %s", why)
	}
	if len(s.Nodes) > 0 || len(s.Pos) > 0 {
		return refuse("v changes with the position")
	}
	for _, n := range s.Skipped {
		if n.OpType != "Concat" && !work.LayoutOps[n.OpType] || n.OpType == "Cast" && w.ElemType(n.Input(0)) != w.ElemType(n.Output(0)) {
			return refuse("v goes through %s (%s)", n.OpType, w.OrigName(n))
		}
	}
	a.V = s.Out
	a.PastV = s.Cache
	if s.Cache != nil {
		a.PresentV = concatOf(s)
	}
	return nil
}

// concatOf is the output of the Concat of a side with its cache.
func concatOf(s *attn.Side) *graph.Value {
	for _, n := range s.Skipped {
		if n.OpType == "Concat" && slices.Contains(n.Inputs(), s.Cache) {
			return n.Output(0)
		}
	}
	return nil
}

// readHeads reads the layout of q, k and v ([batch, heads, seq, head],
// [batch, seq, heads, head], told apart by the scores' query length, or
// rows [batch, seq, heads·head]) and the numbers of heads.
func (a *Attention) readHeads(w *work.Work, s *attn.BlockSides) error {
	var err error
	var hk, hv, dk, dv int
	if a.QL, a.Heads, a.HeadDim, err = a.layout(w, a.Q, "q", 0); err != nil {
		return err
	}
	if a.KL, hk, dk, err = a.layout(w, a.K, "k", a.HeadDim); err != nil {
		return err
	}
	if a.VL, hv, dv, err = a.layout(w, a.V, "v", a.HeadDim); err != nil {
		return err
	}
	a.KVHeads = hk
	if hk == 0 || hv != hk || dk != a.HeadDim || dv != a.HeadDim || a.Heads%hk != 0 {
		return refuse("q has %d heads of %d, k %d of %d, v %d of %d", a.Heads, a.HeadDim, hk, dk, hv, dv)
	}
	return nil
}

// layout reads v's layout, heads and head size (rows of heads·head give
// their heads from hd, the head size of q).
func (a *Attention) layout(w *work.Work, v *graph.Value, what string, hd int) (Layout, int, int, error) {
	sh := w.Shape(v)
	seq := a.scores
	switch {
	case sh.Rank() == 3 && sh.Dims[1] == seq && sh.Dims[2].Known() && hd > 0 && int(sh.Dims[2])%hd == 0:
		return Rows, int(sh.Dims[2]) / hd, hd, nil
	case sh.Rank() != 4 || !sh.Dims[3].Known():
	case sh.Dims[2] == seq && sh.Dims[1] != seq && sh.Dims[1].Known():
		return BNSH, int(sh.Dims[1]), int(sh.Dims[3]), nil
	case sh.Dims[1] == seq && sh.Dims[2] != seq && sh.Dims[2].Known():
		return BSNH, int(sh.Dims[2]), int(sh.Dims[3]), nil
	}
	return 0, 0, 0, refuse("%s is %s: not [batch, heads, seq, head], [batch, seq, heads, head] or [batch, seq, heads·head] with its heads told apart", what, w.ShapeString(sh))
}

// readCache checks the KV caches: both or neither, [batch, kv_heads,
// past, head] concatenated along the sequence before the new keys.
func (a *Attention) readCache(w *work.Work, s *attn.BlockSides) error {
	a.PastK = s.K.Cache
	if a.PresentK = nil; a.PastK != nil {
		a.PresentK = concatOf(s.K)
	}
	if (a.PastK == nil) != (a.PastV == nil) {
		return refuse("only one of k and v is concatenated with a cache")
	}
	for _, c := range []*graph.Value{a.PastK, a.PastV, a.PresentK, a.PresentV} {
		if c == nil {
			continue
		}
		sh := w.Shape(c)
		if sh.Rank() != 4 || sh.Dims[1] != work.Dim(a.KVHeads) || sh.Dims[3] != work.Dim(a.HeadDim) {
			return refuse("the KV cache %s is %s, not [batch, %d, seq, %d]", w.Name(c), w.ShapeString(sh), a.KVHeads, a.HeadDim)
		}
	}
	if a.PastK != nil && (a.PresentK == nil || a.PresentV == nil || !seqAxis(a.PresentK) || !seqAxis(a.PresentV)) {
		return refuse("the caches are not concatenated along the sequence")
	}
	return nil
}

// seqAxis reports whether the Concat making v joins along axis 2 of 4.
func seqAxis(v *graph.Value) bool { return (v.Producer().AttrInt("axis", 0)+4)%4 == 2 }

// readOut finds the value the op's output replaces: the product with v
// transposed to [batch, seq, heads, head] and reshaped to [batch, seq,
// heads·head] when the model does so, else the product itself.
func (a *Attention) readOut(w *work.Work, b *attn.Block) error {
	a.Out, a.OutBNSH = b.AV.Output(0), true
	if a.flat {
		// [batch·heads, seq, head] viewed back as [batch, heads, seq, head].
		rs := onlyUseBesidesShape(a.Out)
		if rs == nil || rs.OpType != "Reshape" || !work.IsONNX(rs) || w.Shape(rs.Output(0)).Rank() != 4 ||
			w.Shape(rs.Output(0)).Dims[1] != work.Dim(a.Heads) {
			return refuse("the product with v, [batch·heads, seq, head], is not viewed back as [batch, heads, seq, head]")
		}
		a.Out = rs.Output(0)
	}
	t := onlyUse(a.Out)
	if t == nil || t.OpType != "Transpose" || !slices.Equal(t.AttrInts("perm"), []int64{0, 2, 1, 3}) || !work.IsONNX(t) {
		return nil
	}
	rs := onlyUse(t.Output(0))
	if rs == nil || rs.OpType != "Reshape" || !work.IsONNX(rs) {
		return nil
	}
	if sh := w.Shape(rs.Output(0)); sh.Rank() == 3 && sh.Dims[2] == work.Dim(a.Heads*a.HeadDim) {
		a.Out, a.OutBNSH = rs.Output(0), false
	}
	return nil
}

// onlyUseBesidesShape is the one node reading v's values (Shape nodes
// read its sizes, which the op's output has too); nil when several do.
func onlyUseBesidesShape(v *graph.Value) *graph.Node {
	var only *graph.Node
	for _, u := range v.Uses() {
		if u.Node.OpType == "Shape" {
			continue
		}
		if only != nil {
			return nil
		}
		only = u.Node
	}
	if v.IsGraphOutput() {
		return nil
	}
	return only
}

// onlyUse is the one node reading v (nil when v has other readers or is
// a graph output).
func onlyUse(v *graph.Value) *graph.Node {
	if u := v.Uses(); len(u) == 1 && !v.IsGraphOutput() {
		return u[0].Node
	}
	return nil
}
