package rope

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// fusedRoPE finds the rotations fused ops carry, reported with fused:
// true: RotaryEmbedding (com.microsoft: input, position_ids, cos_cache,
// sin_cache; ONNX opset 23+: X, cos_cache, sin_cache, position_ids) on the
// query and key of a block, and the rotation inside GroupQueryAttention,
// SparseAttention and PagedAttention (do_rotary with cos/sin caches), and
// in Attention and the decoder-masked ops (do_rotary without caches): the
// layout, head and rotary sizes and head counts are read from the
// attributes and shapes as the op contracts define them (num_heads = 0 and
// rotary_embedding_dim = 0 mean "infer from the shapes"); the base and the
// scaling rule are fitted from the values of the cos/sin caches exactly as
// for unfused RoPE (caches the graph computes are evaluated at several
// lengths, so frequencies that depend on it read as dynamic NTK or
// LongRoPE), and are null with a note when the caches are graph inputs or
// absent external data. A rotation made by an op of an unknown domain is
// reported with what the graph proves (sizes, heads, the rows of the
// tables read at positions) and nulls with notes for the rest.
func fusedRoPE(c *passes.Context) []*passes.Finding {
	w := work.Of(c)
	blocks := passes.Result(c, attn.Blocks)
	sides := passes.Result(c, attn.Sides)
	var out []*passes.Finding
	alike := func(g, f *passes.Finding) bool { return g.Fused == f.Fused && slices.Equal(g.Notes, f.Notes) }
	for _, f := range fusedRotary(w, c, blocks, sides) {
		if f.Layers == nil {
			f.Layers = []int{}
		}
		out = w.MergeFinding(out, f, alike)
	}
	return out
}

// rotUse is a RotaryEmbedding reaching one operand of a block.
type rotUse struct {
	b   *attn.Block
	key bool
	op  *graph.Node
}

// sideRotation finds the op rotating a side: a RotaryEmbedding, or an op
// of a domain onnxpe does not know the semantics of.
func sideRotation(s *attn.Side) (rot, custom *graph.Node) {
	if s == nil {
		return nil, nil
	}
	for _, n := range s.Nodes {
		switch {
		case work.IsRotaryOp(n):
			return n, nil
		case !work.IsONNX(n) && custom == nil:
			custom = n
		}
	}
	return nil, custom
}

func fusedRotary(w *work.Work, c *passes.Context, blocks []*attn.Block, sides map[*attn.Block]*attn.BlockSides) []*passes.Finding {
	var out []*passes.Finding
	rots, extra, free := blockRotaryOps(w, blocks, sides)
	for _, b := range blocks {
		bs := sides[b]
		if bs == nil {
			continue
		}
		r := rots[b]
		_, qc := sideRotation(bs.Q)
		_, kc := sideRotation(bs.K)
		switch {
		case r[0] != nil || r[1] != nil:
			f := rotaryOpFinding(w, c, b, r[0], r[1])
			if p, ok := f.Params.(*Params); ok && r[0] != nil && bs.Q != nil {
				p.QKNorm = bs.Q.Norm // q and k normalised after the op
			}
			out = append(out, f)
		case qc != nil && len(bs.Q.Pos) > 0:
			if f := customRotation(w, c, b, bs, qc, kc); f != nil {
				out = append(out, f)
			}
		}
	}
	// Rotations inside fused attention ops.
	for _, b := range blocks {
		if b.Fused == nil {
			continue
		}
		if f := opRotation(w, c, b); f != nil {
			out = append(out, f)
		}
	}
	// A second RotaryEmbedding reaching an operand one already rotates.
	for _, u := range extra {
		if u.key {
			out = append(out, rotaryOpFinding(w, c, u.b, nil, u.op))
		} else {
			out = append(out, rotaryOpFinding(w, c, u.b, u.op, nil))
		}
	}
	// RotaryEmbedding ops that reach no block's q or k.
	for _, n := range free {
		out = append(out, rotaryOpFinding(w, c, nil, n, nil))
	}
	return out
}

// blockRotaryOps gives each block with sides the RotaryEmbedding ops that
// rotate its q and k ([q, k]): the op on each side, else an op on no
// block's side whose output reaches the operand unchanged (unchangedReach:
// the walk back from the scores stopped short of it, as at a static cache
// written by a scatter). extra are such ops reaching an operand another
// op rotates, free those that reach no block.
func blockRotaryOps(w *work.Work, blocks []*attn.Block, sides map[*attn.Block]*attn.BlockSides) (rots map[*attn.Block][2]*graph.Node, extra []rotUse, free []*graph.Node) {
	rots = map[*attn.Block][2]*graph.Node{}
	onSide := map[*graph.Node]bool{}
	for _, b := range blocks {
		if bs := sides[b]; bs != nil {
			q, _ := sideRotation(bs.Q)
			k, _ := sideRotation(bs.K)
			rots[b] = [2]*graph.Node{q, k}
			onSide[q], onSide[k] = true, true
		}
	}
	for _, g := range attn.DetectGraphs(w) {
		for n := range g.All() {
			if !work.IsRotaryOp(n) || onSide[n] {
				continue
			}
			reach := unchangedReach(w, n.Output(0))
			found := false
			for _, b := range blocks {
				r, ok := rots[b]
				for i, operand := range []*graph.Value{b.Q, b.K} {
					switch {
					case !ok || !reach[operand]:
					case r[i] == nil:
						r[i], found = n, true
					default:
						extra, found = append(extra, rotUse{b: b, key: i == 1, op: n}), true
					}
				}
				if ok {
					rots[b] = r
				}
			}
			if !found {
				free = append(free, n)
			}
		}
	}
	return rots, extra, free
}

// unchangedReach are the values v reaches through ops that carry a
// rotated tensor to the scores (layout changes, scales, a KV cache's
// concatenation or scatter, a GQA repeat), stopping at products with
// weights, learned norms, Softmax and fused attention ops: an op whose
// output reaches a block's q or k only through a projection does not
// rotate the block's q or k.
func unchangedReach(w *work.Work, v *graph.Value) map[*graph.Value]bool {
	reach := map[*graph.Value]bool{v: true}
	queue := []*graph.Value{v}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		for _, n := range x.Consumers() {
			if attn.IsProjection(w, n) || n.OpType == "Softmax" || work.FusedAttentionOps[work.OpKey(n)] {
				continue
			}
			for _, o := range n.Outputs() {
				if !reach[o] {
					reach[o] = true
					queue = append(queue, o)
				}
			}
		}
	}
	return reach
}

// rotaryArgs are the operands of a RotaryEmbedding by the op contract of
// its domain.
type rotaryArgs struct {
	x, cos, sin, pos *graph.Value
	ms               bool
}

func rotaryOperands(n *graph.Node) rotaryArgs {
	in := func(i int) *graph.Value {
		if i < len(n.Inputs()) {
			return n.Input(i)
		}
		return nil
	}
	if n.Domain == "com.microsoft" {
		return rotaryArgs{x: in(0), pos: in(1), cos: in(2), sin: in(3), ms: true}
	}
	return rotaryArgs{x: in(0), cos: in(1), sin: in(2), pos: in(3)}
}

// rotarySizes are the sizes a RotaryEmbedding works with, by its contract.
type rotarySizes struct {
	heads, headDim, rotaryDim int // 0: not known
	notes                     []string
}

// rotaryOpSizes reads the head count, head size and rotary size of a
// RotaryEmbedding from its attributes and the shapes of its input and
// caches. num_heads = 0 and rotary_embedding_dim = 0 mean "infer":
// com.microsoft (ONNX Runtime's rotary_embedding_helper) takes the head
// size from the cache width (2·columns) when rotary_embedding_dim is 0;
// the ONNX op takes it from the 4-D input or hidden/num_heads.
func rotaryOpSizes(w *work.Work, n *graph.Node, a rotaryArgs) rotarySizes {
	var r rotarySizes
	nh := int(n.AttrInt("num_heads", 0))
	rdAttr := int(n.AttrInt("rotary_embedding_dim", 0))
	xs := w.Shape(a.x)
	half := 0
	if cl := w.Shape(a.cos).Last(); cl.Known() {
		half = int(cl)
	}
	known := func(d work.Dim) int {
		if d.Known() {
			return int(d)
		}
		return 0
	}
	switch xs.Rank() {
	case 4: // (batch, heads, sequence, head size)
		r.heads, r.headDim = known(xs.Dims[1]), known(xs.Dims[3])
		if nh > 0 && r.heads > 0 && nh != r.heads {
			r.notes = append(r.notes, fmt.Sprintf("num_heads: the attribute says %d, the 4-D input has %d heads; reported the input's", nh, r.heads))
		}
	case 3: // (batch, sequence, hidden)
		hidden := known(xs.Dims[2])
		switch {
		case rdAttr == 0 && (a.ms || nh == 0) && half > 0:
			// com.microsoft: head_size = 2·cache columns when
			// rotary_embedding_dim is 0; num_heads = hidden/head_size when 0.
			r.headDim = 2 * half
			r.heads = nh
			if nh > 0 && hidden > 0 && hidden/nh != r.headDim {
				r.headDim = hidden / nh
			}
			if nh == 0 && hidden > 0 && hidden%r.headDim == 0 {
				r.heads = hidden / r.headDim
				r.notes = append(r.notes, "num_heads: 0 in the op; inferred as hidden size / (2 x cache columns)")
			}
			if !a.ms && nh == 0 {
				r.notes = append(r.notes, "num_heads: the ONNX op requires it for 3-D input; inferred from the cache width as com.microsoft's op does")
			}
		case nh > 0 && hidden > 0 && hidden%nh == 0:
			r.heads, r.headDim = nh, hidden/nh
		}
	}
	switch {
	case rdAttr > 0:
		r.rotaryDim = rdAttr
	case a.ms && half > 0:
		r.rotaryDim = 2 * half
	default:
		r.rotaryDim = r.headDim
	}
	if half > 0 && r.rotaryDim != 2*half {
		r.notes = append(r.notes, fmt.Sprintf("rotary_dim: the caches have %d columns, not rotary_dim/2 = %d", half, r.rotaryDim/2))
	}
	return r
}

// rotaryOpFinding reads the RoPE of a block whose q (and k) a
// RotaryEmbedding rotates; b nil for a RotaryEmbedding that reaches no
// block.
func rotaryOpFinding(w *work.Work, c *passes.Context, b *attn.Block, qr, kr *graph.Node) *passes.Finding {
	op := qr
	if op == nil {
		op = kr
	}
	a := rotaryOperands(op)
	sz := rotaryOpSizes(w, op, a)
	layout := "half_split"
	if op.AttrInt("interleaved", 0) == 1 {
		layout = "interleaved"
	}
	p := &Params{Layout: layout, HeadDim: sz.headDim, RotaryDim: sz.rotaryDim}
	notes := append([]string{}, sz.notes...)
	if qr != nil && sz.heads > 0 {
		p.NumHeads = passes.Ptr(sz.heads)
	}
	if kr != nil {
		if ks := rotaryOpSizes(w, kr, rotaryOperands(kr)); ks.heads > 0 {
			p.NumKVHeads = passes.Ptr(ks.heads)
		}
	}
	switch {
	case b == nil:
		notes = append(notes, "layers, num_kv_heads: the rotation reaches the scores of no attention block")
	case qr == nil:
		notes = append(notes, "num_heads: only the keys are rotated by the op")
	case kr == nil:
		notes = append(notes, "num_kv_heads: the keys are not rotated by a RotaryEmbedding")
	}
	if op.Domain == "com.microsoft" {
		if s := op.AttrFloat("scale", 1); s != 1 {
			notes = append(notes, fmt.Sprintf("the op scales its input by %g", s))
		}
	}
	// Positions counted from the length of a KV cache given as input
	// (the offset of com.microsoft's op, or ids from a Range after it).
	for _, n := range w.Cone(a.pos) {
		if n.OpType == "Shape" && w.CacheInput(n.Input(0)) {
			p.PositionSource = "past_length"
		}
	}
	ev, cnotes := cacheParams(w, c, p, a.cos, a.sin, a.pos != nil, op)
	notes = append(notes, cnotes...)
	f := &passes.Finding{Scheme: Name, Fused: true, Params: p, Notes: notes, Evidence: ev}
	var nodes []*graph.Node
	for _, n := range []*graph.Node{qr, kr} {
		if n != nil {
			nodes = append(nodes, n)
			nodes = append(nodes, w.Cone(rotaryOperands(n).cos, rotaryOperands(n).sin, rotaryOperands(n).pos)...)
		}
	}
	if b != nil {
		f.Layers = []int{b.Index}
		rb := Block{Layer: b.Index}
		if qr != nil {
			rb.Q = opSide(w, qr)
		}
		if kr != nil {
			rb.K = opSide(w, kr)
		}
		ev.Blocks = append(ev.Blocks, rb)
	}
	f.Nodes = w.OrigNames(nodes)
	return f
}

func opSide(w *work.Work, n *graph.Node) Side {
	a := rotaryOperands(n)
	s := Side{In: w.OrigValue(a.x), Out: w.OrigValue(n.Output(0)), Nodes: w.OrigNames([]*graph.Node{n})}
	for _, v := range []*graph.Value{a.cos, a.sin, a.pos} {
		if v != nil {
			s.Pos = append(s.Pos, w.OrigValue(v))
		}
	}
	return s
}

// opRotation reads the rotation a fused attention op applies itself
// (do_rotary).
func opRotation(w *work.Work, c *passes.Context, b *attn.Block) *passes.Finding {
	n := b.Fused
	spec, ok := work.FusedSpecs[work.OpKey(n)]
	if !ok || !spec.Rotary || n.AttrInt("do_rotary", 0) != 1 {
		return nil
	}
	in := func(i int) *graph.Value {
		if i >= 0 && i < len(n.Inputs()) {
			return n.Input(i)
		}
		return nil
	}
	nq := int(n.AttrInt(spec.Heads, 0))
	nkv := nq
	if spec.KVHeads != "" {
		nkv = int(n.AttrInt(spec.KVHeads, 0))
	}
	// The head size from the query: (B, S, Nq·H), or packed (B, S,
	// (Nq+2·Nkv)·H); the ops that project q themselves from their weights
	// (B·3·N·H columns).
	hd := 0
	q := in(0)
	if spec.Q < 0 {
		q = nil
		if wt := w.Shape(in(1)); wt.Rank() == 2 && wt.Dims[1].Known() && nq > 0 {
			cols := int(wt.Dims[1])
			if sz := n.AttrInts("qkv_hidden_sizes"); len(sz) == 3 {
				cols = int(sz[0]) * 3
			}
			if cols%(3*nq) == 0 {
				hd = cols / (3 * nq)
			}
		}
	}
	if qs := w.Shape(q); q != nil && qs.Rank() == 3 && qs.Last().Known() && nq > 0 {
		hid := int(qs.Last())
		packed := spec.K >= 0 && in(spec.K) == nil
		if packed && hid%(nq+2*nkv) == 0 {
			hd = hid / (nq + 2*nkv)
		} else if !packed && hid%nq == 0 {
			hd = hid / nq
		}
	}
	layout := "half_split"
	if n.AttrInt("rotary_interleaved", 0) == 1 {
		layout = "interleaved"
	}
	p := &Params{Layout: layout, HeadDim: hd}
	if nq > 0 {
		p.NumHeads = passes.Ptr(nq)
	}
	if nkv > 0 {
		p.NumKVHeads = passes.Ptr(nkv)
	}
	var notes []string
	f := &passes.Finding{Scheme: Name, Fused: true, Layers: []int{b.Index}, Params: p}
	nodes := []*graph.Node{n}
	cosV, sinV := in(spec.CosCache), in(spec.SinCache)
	if cosV == nil || sinV == nil {
		// Attention and the decoder-masked ops rotate with cos/sin they
		// compute inside (ONNX Runtime's CUDA kernels); nothing in the graph
		// gives their frequencies or pairing.
		p.RotaryDim = int(n.AttrInt("rotary_embedding_dim", int64(hd)))
		if p.RotaryDim == 0 {
			p.RotaryDim = hd
		}
		p.Layout = ""
		notes = append(notes, fmt.Sprintf("layout, base, scaling, factor: %s rotates with cos/sin it computes inside (do_rotary without cos/sin inputs); the graph holds neither their frequencies nor the pairing of dimensions", n.OpType))
		ev := &Evidence{Blocks: []Block{{Layer: b.Index}}}
		f.Notes, f.Evidence = notes, ev
		f.Nodes = w.OrigNames(nodes)
		return f
	}
	if cl := w.Shape(cosV).Last(); cl.Known() {
		p.RotaryDim = 2 * int(cl)
	}
	posV := in(spec.PosIDs)
	if posV == nil && (work.OpKey(n) != "com.microsoft.GroupQueryAttention" || in(3) != nil) {
		// Positions after the cache (a GroupQueryAttention without a past
		// counts 0..S-1: no cache to count from).
		p.PositionSource = "past_length"
	}
	ev, cnotes := cacheParams(w, c, p, cosV, sinV, true, n)
	ev.Blocks = append(ev.Blocks, Block{Layer: b.Index, Op: w.OrigName(n)})
	f.Notes = append(notes, cnotes...)
	f.Evidence = ev
	nodes = append(nodes, w.Cone(cosV, sinV, posV)...)
	f.Nodes = w.OrigNames(nodes)
	return f
}

// ---------------------------------------------------------------------
// cos/sin caches

// maxCacheRows bounds the rows of a stored cache the fit reads.
const maxCacheRows = 4096

// cacheParams reads the cos/sin caches of a fused rotation into p: the
// rows of a stored table (max_positions) and the base and scaling rule
// fitted from the values. table says whether the caches are indexed by
// position ids (a table) or hold one row per token.
func cacheParams(w *work.Work, c *passes.Context, p *Params, cosV, sinV *graph.Value, table bool, op *graph.Node) (*Evidence, []string) {
	ev := &Evidence{Amplitude: math.NaN()}
	var notes []string
	half := p.RotaryDim / 2
	if half > 0 {
		if p.Layout == "interleaved" {
			for k := 0; k < half; k++ {
				ev.Pairs = append(ev.Pairs, [2]int{2 * k, 2*k + 1})
			}
		} else {
			for k := 0; k < half; k++ {
				ev.Pairs = append(ev.Pairs, [2]int{k, k + half})
			}
		}
	}
	ev.CosSinNodes = w.OrigNames(w.Cone(cosV, sinV))
	if f, ok := switchedCaches(w, c, p, ev, cosV, sinV, op); ok {
		return ev, f
	}
	cr, why := readCache(w, cosV, table)
	sr, why2 := readCache(w, sinV, table)
	if cr.rows > 0 {
		p.MaxPositions = passes.Ptr(cr.rows)
		ev.Table = cr.name
	}
	switch {
	case why != "" || why2 != "":
		if why == "" {
			why = why2
		}
		ev.Synthetic = true
		notes = append(notes, "base, scaling, factor: "+why)
		if cr.rows == 0 {
			notes = append(notes, "max_positions: no stored cos/sin table")
		}
		c.Miss("fused", w.OrigName(op), "cos/sin caches: "+why, 1)
		return ev, notes
	case cr.rows == 0:
		notes = append(notes, "max_positions: the cos/sin values are computed, not read from a stored table")
	}
	r, why := cacheRotation(cr, sr, p.RotaryDim)
	if r == nil {
		notes = append(notes, "base, scaling, factor: "+why)
		c.Miss("fused", w.OrigName(op), "cos/sin caches: "+why, 2)
		return ev, notes
	}
	if r.halfAngles {
		r.halfAngles = anglesInHalf(w, w.Cone(cosV, sinV))
	}
	r.layout, r.headDim, r.pairs = p.Layout, p.HeadDim, ev.Pairs
	ev.InvFreq, ev.Amplitude = r.omega, r.amp
	if table && cr.rows > 0 && sr.rows > 0 && cr.width == half && sr.width == half {
		// By the op's contract, column k of the caches is pair k.
		st := &StoredCosSin{Rows: min(cr.rows, sr.rows), Out: w.ElemType(cosV)}
		for k := 0; k < half; k++ {
			st.Cos = append(st.Cos, TableColumn{Table: cr.name, Col: k})
			st.Sin = append(st.Sin, TableColumn{Table: sr.name, Col: k})
		}
		ev.Stored = st
		r.tableRows = st.Rows
	}
	fit := r.fitFrequencies()
	if cr.rows == 0 && sr.rows == 0 {
		// Computed caches may depend on the length (dynamic NTK, an If
		// choosing LongRoPE's frequencies inside the computation): they
		// are measured again at other lengths, as unfused rotations are.
		r.remeasure = func(L int) (dynPoint, bool) {
			if L > 1<<16 {
				return dynPoint{}, false
			}
			c, why := evalCache(w, cosV, L)
			s, why2 := evalCache(w, sinV, L)
			if why != "" || why2 != "" {
				return dynPoint{}, false
			}
			rl, _ := cacheRotation(c, s, p.RotaryDim)
			if rl == nil || rl.seq != L {
				return dynPoint{}, false // rows that do not follow the length
			}
			return dynPoint{L: L, span: rl.seq, omega: rl.omega}, true
		}
		r.findDynamic(dynamicProbes(r.seq))
		if r.dynamic != nil {
			angErr := r.angErr()
			fit = fitDynamic(w, r, angErr, max(1e-6, 2*angErr))
			ev.InvFreqLong = r.omegaLong
		}
	}
	notes = append(notes, setFit(p, r, fit)...)
	return ev, notes
}

// switchedCaches reads caches an If chooses by the sequence length (ONNX
// Runtime GenAI's LongRoPE models: a short and a long pair of stored
// tables, the long one beyond the original length): the frequencies of
// both, and the length where the choice switches, fitted with the
// unfused detector's LongRoPE rule. It reports false when the caches are
// not chosen so.
func switchedCaches(w *work.Work, c *passes.Context, p *Params, ev *Evidence, cosV, sinV *graph.Value, op *graph.Node) ([]string, bool) {
	cn, ci := ifOutput(cosV)
	sn, si := ifOutput(sinV)
	if cn == nil || cn != sn {
		return nil, false
	}
	then, els := cn.Attr("then_branch"), cn.Attr("else_branch")
	if then == nil || els == nil || then.Graph == nil || els.Graph == nil {
		return nil, false
	}
	branch := func(g *graph.Graph) (cacheRead, cacheRead, bool) {
		if ci >= len(g.Outputs) || si >= len(g.Outputs) {
			return cacheRead{}, cacheRead{}, false
		}
		cr, why := readCache(w, g.Outputs[ci], true)
		sr, why2 := readCache(w, g.Outputs[si], true)
		return cr, sr, why == "" && why2 == "" && cr.rows > 0 && sr.rows > 0
	}
	tc, ts, ok1 := branch(then.Graph)
	ec, es, ok2 := branch(els.Graph)
	if !ok1 || !ok2 {
		return nil, false
	}
	// The branch taken at a length: the condition on a probe of that
	// length.
	cond := func(L int) (bool, bool) {
		pr := probe.NewProbe(w, 1, L, 0)
		t, err := pr.Value(cn.Input(0))
		if err != nil || t.Len() != 1 {
			return false, false
		}
		return t.Float64s()[0] != 0, true
	}
	c0, ok := cond(4)
	if !ok {
		c.Miss("fused", w.OrigName(op), "the If choosing the cos/sin caches could not be evaluated", 1)
		return nil, false
	}
	switchAt := 0
	for L := 8; L <= 1<<20; L *= 2 {
		ck, ok := cond(L)
		if !ok {
			break
		}
		if ck != c0 {
			switchAt = L
			break
		}
	}
	if switchAt == 0 {
		return nil, false // one branch at every length we can probe
	}
	shortC, shortS, longC, longS := ec, es, tc, ts
	if c0 {
		shortC, shortS, longC, longS = tc, ts, ec, es
	}
	rs, why := cacheRotation(shortC, shortS, p.RotaryDim)
	rl, why2 := cacheRotation(longC, longS, p.RotaryDim)
	if rs == nil || rl == nil {
		if why == "" {
			why = why2
		}
		return []string{"base, scaling, factor: " + why}, true
	}
	p.MaxPositions = passes.Ptr(max(shortC.rows, longC.rows))
	ev.Table = shortC.name + "|" + longC.name
	point := func(L int) (dynPoint, bool) {
		ck, ok := cond(L)
		if !ok {
			return dynPoint{}, false
		}
		if ck == c0 {
			return dynPoint{L: L, span: rs.seq, omega: rs.omega}, true
		}
		return dynPoint{L: L, span: rl.seq, omega: rl.omega}, true
	}
	rs.layout, rs.headDim, rs.pairs = p.Layout, p.HeadDim, ev.Pairs
	rs.remeasure = point
	short, _ := point(4)
	long, _ := point(switchAt)
	rs.dynamic = []dynPoint{short, long}
	angErr := max(rs.angErr(), rl.angErr())
	fit, ok := fitLongRoPE(w, rs, angErr, max(1e-6, 2*angErr))
	if !ok {
		return []string{"scaling: the caches switch with the length but not from one set of frequencies to another"}, true
	}
	ev.InvFreq, ev.InvFreqLong, ev.Amplitude = rs.omega, rs.omegaLong, rs.amp
	last := switchAt - 1
	if fit.Orig != nil {
		last = *fit.Orig
	}
	notes := []string{fmt.Sprintf("the cos/sin caches are chosen by an If on the sequence length: %s up to %d positions, %s beyond", shortC.name, last, longC.name)}
	return append(notes, setFit(p, rs, fit)...), true
}

// ifOutput finds the If (through casts and layout ops) whose output v is,
// and the output's index.
func ifOutput(v *graph.Value) (*graph.Node, int) {
	for steps := 0; steps < 8 && v != nil; steps++ {
		n := v.Producer()
		if n == nil || !work.IsONNX(n) {
			return nil, 0
		}
		switch n.OpType {
		case "If":
			return n, v.OutputIndex()
		case "Cast", "Reshape", "Squeeze", "Unsqueeze":
			v = n.Input(0)
		default:
			return nil, 0
		}
	}
	return nil, 0
}

// cacheRead is a cos or sin cache as read: its rows (one per position,
// rd/2 values each), the rows of the stored table it comes from (0 when
// computed) and the table's name.
type cacheRead struct {
	vals  []float64
	width int
	rows  int
	name  string
	half  bool
}

func (r cacheRead) n() int {
	if r.width == 0 {
		return 0
	}
	return len(r.vals) / r.width
}

// readCache reads a cos or sin cache. A stored table (through casts,
// layout ops and slices of its rows) is read whole; a cache computed in
// the graph is evaluated on a probe. It returns why the values are not in
// the file (graph inputs, absent external data).
func readCache(w *work.Work, v *graph.Value, table bool) (cacheRead, string) {
	var r cacheRead
	r.half = probe.IsHalfType(w.ElemType(v))
	// The stored table behind the cache.
	t := v
	for steps := 0; steps < 16 && t != nil && !w.IsConst(t); steps++ {
		n := t.Producer()
		if n == nil || !work.IsONNX(n) {
			break
		}
		switch {
		case n.OpType == "Cast" || n.OpType == "Reshape" || n.OpType == "Squeeze" || n.OpType == "Unsqueeze" || n.OpType == "Identity":
		case n.OpType == "Slice" && table:
			// rows 0..k of the table: the table is what is stored.
		case (n.OpType == "Gather" || n.OpType == "GatherElements") && !table:
			// rows gathered by positions (one row per token).
		default:
			n = nil
		}
		if n == nil {
			break
		}
		t = n.Input(0)
	}
	if n := work.ProducerOf(t); n != nil && t.Const == nil && n.OpType == "Constant" && work.IsONNX(n) {
		// A Constant node kept for a graph output (an If branch returning
		// a table).
		if gt, err := graph.ConstantNodeValue(n); err == nil && len(gt.Dims()) >= 2 {
			if ct, err := kernels.FromGraph(gt); err == nil {
				dims := gt.Dims()
				r.rows, r.name, r.width = int(dims[0]), w.Name(t), int(dims[len(dims)-1])
				r.half = r.half || probe.IsHalfType(gt.DataType())
				vals := ct.Float64s()
				r.vals = vals[:min(len(vals), maxCacheRows*r.width)]
				return r, ""
			}
		}
	}
	if t != nil && t.Const != nil {
		dims := t.Const.Dims()
		if len(dims) >= 2 {
			r.rows, r.name = int(dims[0]), w.Name(t)
			for _, d := range dims[1 : len(dims)-1] {
				r.rows = max(r.rows, int(d))
			}
		}
		r.half = r.half || probe.IsHalfType(t.Const.DataType())
		if t.Const.IsExternal() && w.Const(t) == nil {
			return r, fmt.Sprintf("the cos/sin table %s is in external data that could not be read (%v)", w.Name(t), w.ConstErr[t])
		}
		ct := w.Const(t)
		if ct == nil {
			return r, fmt.Sprintf("the cos/sin table %s could not be decoded (%v)", w.Name(t), w.ConstErr[t])
		}
		if len(dims) >= 2 {
			r.width = int(dims[len(dims)-1])
			vals := ct.Float64s()
			r.vals = vals[:min(len(vals), maxCacheRows*r.width)]
			return r, ""
		}
	}
	if t != nil && t.Producer() == nil && !w.IsConst(t) && t.Graph() == w.M.Graph {
		if s := w.Shape(t); s.Rank() >= 2 && s.Dims[0].Known() && table {
			r.rows, r.name = int(s.Dims[0]), w.Name(t)
		}
		return r, fmt.Sprintf("the cos/sin caches are graph inputs (%s), not in the file", w.Name(t))
	}
	// Computed in the graph: evaluate it (rows at positions 0..15).
	c, why := evalCache(w, v, 16)
	c.half = c.half || r.half
	return c, why
}

// evalCache evaluates a cos or sin cache the graph computes on a probe of
// one sequence of L tokens at positions 0..L-1: its rows at those
// positions.
func evalCache(w *work.Work, v *graph.Value, L int) (cacheRead, string) {
	r := cacheRead{half: probe.IsHalfType(w.ElemType(v))}
	p := probe.NewProbe(w, 1, L, 0)
	ct, err := p.Value(v)
	if err != nil {
		return r, "the cos/sin values could not be evaluated: " + err.Error()
	}
	if p.Synthetic(v) {
		return r, "the cos/sin values are computed from graph inputs (frequencies or tables not in the file)"
	}
	if ct.Rank() < 2 {
		return r, fmt.Sprintf("the cos/sin values have shape %v", ct.Shape)
	}
	r.width = ct.Shape[ct.Rank()-1]
	n := ct.Shape[ct.Rank()-2]
	r.vals = ct.Float64s()[:n*r.width] // leading axes at index 0
	return r, ""
}

// cacheRotation measures the frequency of every column of a cos/sin cache
// pair over its rows (consecutive positions): the angle atan2(sin, cos)
// must grow linearly with the row.
func cacheRotation(cr, sr cacheRead, rd int) (*rotation, string) {
	n := min(cr.n(), sr.n())
	if cr.width != sr.width || n < 3 {
		return nil, fmt.Sprintf("the cos and sin caches have %d and %d columns and %d rows", cr.width, sr.width, n)
	}
	if rd > 0 && cr.width != rd/2 {
		return nil, fmt.Sprintf("the caches have %d columns, not rotary_dim/2 = %d", cr.width, rd/2)
	}
	wd := cr.width
	theta := make([][]float64, wd)
	amp := make([][]float64, wd)
	for k := 0; k < wd; k++ {
		theta[k] = make([]float64, n)
		amp[k] = make([]float64, n)
		for i := 0; i < n; i++ {
			c, s := cr.vals[i*wd+k], sr.vals[i*wd+k]
			theta[k][i] = math.Atan2(s, c)
			amp[k][i] = math.Hypot(c, s)
		}
	}
	omega, a, noise := omegas(theta, amp, []int{n, 2 * wd}, 0)
	for _, x := range omega {
		if math.IsNaN(x) {
			return nil, "the cache values are not cos and sin of angles linear in the position"
		}
	}
	for k := range amp {
		for _, x := range amp[k] {
			if math.Abs(x-a) > 1e-2*a+1e-3 {
				return nil, "the cos/sin pairs of the caches do not lie on one circle"
			}
		}
	}
	if omega[0] < 0 {
		for i := range omega {
			omega[i] = -omega[i]
		}
	}
	r := &rotation{rotaryDim: 2 * wd, omega: omega, amp: a, noise: noise, seq: n, half: cr.half || sr.half || noise > 1e-5}
	// Stored caches hold cos and sin of angles computed elsewhere (in
	// float32 or float64), each rounded once to the caches' type: off by
	// up to 2^-11 at any row, the measured angles' noise, which does not
	// grow with the position. Computed caches are taken as computed in a
	// half type until the caller looks at their angles (anglesInHalf).
	r.halfAngles = r.half && (cr.rows == 0 || sr.rows == 0)
	return r, ""
}

// customRotation reports a rotation of q and k whose rotating op is of a
// domain onnxpe does not know the semantics of (a custom rotate_half):
// the sizes and head counts the shapes prove and the rows of the tables
// read at positions; the layout and frequencies are not guessed.
func customRotation(w *work.Work, c *passes.Context, b *attn.Block, bs *attn.BlockSides, qc, kc *graph.Node) *passes.Finding {
	at := w.OrigName(qc)
	qs := w.Shape(bs.Q.In)
	if qs.Rank() < 3 || !qs.Last().Known() {
		c.Miss("fused", at, "the shape of q rotated by the custom op is not known", 0)
		return nil
	}
	hd := int(qs.Last())
	op := qc.Domain + "." + qc.OpType
	p := &Params{HeadDim: hd, RotaryDim: hd}
	var notes []string
	if why := rotatesHalves(w, qc, bs.Q, hd); why != "" {
		p.Layout = "half_split"
		notes = append(notes, "layout: "+why)
	} else {
		notes = append(notes, fmt.Sprintf("layout: q and k are rotated with the op %s, whose semantics onnxpe does not know; the pairing of dimensions is not read from it", op))
	}
	width := 0
	for _, v := range bs.Q.Pos {
		if l := w.Shape(v).Last(); l.Known() {
			width = max(width, int(l))
		}
	}
	if width != hd {
		notes = append(notes, fmt.Sprintf("rotary_dim: the position-dependent values are %d wide; reported the head size", width))
	}
	if h := headAxisCount(w, bs.Q); h > 0 {
		p.NumHeads = passes.Ptr(h)
	}
	if bs.K != nil {
		if h := headAxisCount(w, bs.K); h > 0 {
			p.NumKVHeads = passes.Ptr(h)
		}
	}
	cone := w.Cone(bs.Q.Pos...)
	rows, name, input := tableRoots(w, cone, width)
	if rows > 0 {
		p.MaxPositions = passes.Ptr(rows)
	}
	switch {
	case input:
		notes = append(notes, fmt.Sprintf("base, scaling, factor: the cos/sin tables are graph inputs (%s), not in the file", name))
	default:
		notes = append(notes, "base, scaling, factor: not fitted, the pairing of dimensions the op makes is not known")
	}
	nodes := append(append([]*graph.Node{}, bs.Q.Nodes...), cone...)
	rb := Block{Layer: b.Index, Q: sideEvidence(w, bs.Q)}
	if bs.K != nil {
		nodes = append(nodes, bs.K.Nodes...)
		rb.K = sideEvidence(w, bs.K)
	}
	ev := &Evidence{Amplitude: math.NaN(), Synthetic: true, Table: name, Blocks: []Block{rb}, CosSinNodes: w.OrigNames(cone)}
	_ = kc
	return &passes.Finding{Scheme: Name, Layers: []int{b.Index}, Params: p, Notes: notes, Evidence: ev, Nodes: w.OrigNames(nodes)}
}

// rotateHalfOps are ops of other domains whose contract is rotate_half.
// onnx-extended's Rotary (its reference implementation,
// onnx_extended/reference/c_custom_ops): X and two equal split sizes
// covering X's last axis; side "right" gives concat(-X[..., h:], X[..., :h]),
// "left" concat(X[..., h:], -X[..., :h]): either way dimension i is
// combined with i+h only.
var rotateHalfOps = map[string]bool{"onnx_extended.ortops.optim.cuda.Rotary": true}

// rotatesHalves says why custom op n rotates the halves of the side's q
// (the op's contract, its split sizes, and the side's structure: q times
// the position-dependent values plus n's output times others), or "".
func rotatesHalves(w *work.Work, n *graph.Node, s *attn.Side, hd int) string {
	key := n.Domain + "." + n.OpType
	if !rotateHalfOps[key] || len(n.Inputs()) < 2 || n.Input(0) != s.In || hd%2 != 0 {
		return ""
	}
	side := n.AttrString("side", "")
	if side != "left" && side != "right" {
		return ""
	}
	t := w.Const(n.Input(1))
	if t == nil || t.Len() != 2 {
		return ""
	}
	sp := t.Float64s()
	if sp[0] != sp[1] || int(sp[0]+sp[1]) != hd {
		return ""
	}
	// q and the op's output are each multiplied by a position-dependent
	// value and added: q·cos + rotate_half(q)·sin.
	mulByPos := func(v *graph.Value) *graph.Node {
		for _, u := range v.Uses() {
			m := u.Node
			if m.OpType == "Mul" && work.IsONNX(m) && len(m.Inputs()) == 2 && slices.Contains(s.Nodes, m) && !w.IsAct(m.Input(1-u.Index)) {
				return m
			}
		}
		return nil
	}
	a, b := mulByPos(s.In), mulByPos(n.Output(0))
	if a == nil || b == nil {
		return ""
	}
	for _, u := range a.Output(0).Uses() {
		if add := u.Node; add.OpType == "Add" && work.IsONNX(add) && slices.Contains(add.Inputs(), b.Output(0)) {
			return fmt.Sprintf("half_split by the contract of %s: equal splits [%d, %d], side %q, make rotate_half; its output times the position-dependent values is added to q times them, so dimension i pairs with i+%d",
				key, int(sp[0]), int(sp[1]), side, hd/2)
		}
	}
	return ""
}

// headAxisCount is the number of heads of a side's q: the axis (not the
// first nor the last) along which the position-dependent values
// broadcast (size 1) while q is larger.
func headAxisCount(w *work.Work, s *attn.Side) int {
	qs := w.Shape(s.In)
	if qs.Rank() != 4 {
		return 0
	}
	for a := 1; a < 3; a++ {
		if !qs.Dims[a].Known() || qs.Dims[a] <= 1 {
			continue
		}
		all := len(s.Pos) > 0
		for _, v := range s.Pos {
			ps := w.Shape(v)
			k := a - (qs.Rank() - ps.Rank())
			if ps.Rank() < 1 || k >= 0 && ps.Dims[k] != 1 {
				all = false
			}
		}
		if all {
			return int(qs.Dims[a])
		}
	}
	return 0
}

// tableRoots finds the tables the position-dependent values of a cone are
// read from: rank-2 float values (constants or graph inputs) of the given
// width. It returns their rows, a name and whether they are graph inputs.
func tableRoots(w *work.Work, cone []*graph.Node, width int) (int, string, bool) {
	rows, name, input := 0, "", false
	for _, n := range cone {
		for _, v := range n.Inputs() {
			if v == nil || v.Producer() != nil {
				continue
			}
			s := w.Shape(v)
			if s.Rank() != 2 || !work.IsFloatType(w.ElemType(v)) || !s.AllKnown() || int(s.Dims[1]) != width {
				continue
			}
			if int(s.Dims[0]) > rows {
				rows, name, input = int(s.Dims[0]), w.Name(v), !w.IsConst(v)
			}
		}
	}
	return rows, name, input
}
