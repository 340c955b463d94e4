package kernels

import (
	"errors"
	"sync/atomic"

	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels/gemm"
)

// Decomposed attention, run blockwise.
//
// Exporters write attention as primitive ops: scores = MatMul(q, kᵀ) (or
// com.microsoft FusedMatMul with transB and alpha), then elementwise ops
// on the scores (a scale by Mul or Div, a bias or mask by Add or Sub, a
// mask by Where, Casts around a float32 softmax, Reshapes between the
// [batch*heads, S, T] and [batch, heads, S, T] views), Softmax over the
// keys, perhaps more of the same ops (a Where zeroing masked rows), and
// MatMul(probabilities, v). Run as written, every step holds the whole
// [..., S, T] scores: at 16 heads and 16k positions, 16 GiB per tensor.
//
// When a session is made, each such chain whose intermediate values have
// no other reader (no other node, no graph output, not named in
// Options.Outputs) becomes one step. At run time the step computes blocks
// of query rows of one leading index (batch entry and head) at a time:
// the block's scores by one GEMM, every op of the chain on each row in
// the chain's order with the op's own arithmetic (the other operands read
// at the row with their broadcasting, float16/bfloat16 results rounded
// after each op as the executor rounds a half op's output), the softmax
// of the Softmax kernel, and the block's output rows by a second GEMM.
// The scratch of a worker is a block of rows by the keys, so memory grows
// with N, not N². Each element goes through the same operations as in the
// unfused run; only the GEMMs' blocking differs.
//
// When the run's tensors do not fit what the blockwise step computes (an
// operand that broadcasts the scores to a larger shape, a Reshape that
// changes the last two axes, a softmax over another axis, float64,
// Options.Accumulate64), the step runs the chain's original steps.

// errUnfusable says the blockwise step declines the run's tensors; the
// session then runs the chain as written.
var errUnfusable = errors.New("kernels: the attention chain runs unfused")

type attnKind uint8

const (
	akAdd attnKind = iota
	akSub
	akMul
	akDiv
	akWhere
	akCast
	akSoftmax
	akReshape
	akIdentity
)

// attnOp is one op of a chain after the scores' matrix product: the step
// it came from, where the running value enters it, and the indices (into
// the fused step's inputs) of its other inputs in input order.
type attnOp struct {
	kind attnKind
	pos  int
	args []int
	st   *step
}

// attnChain is a decomposed attention the session runs as one step.
type attnChain struct {
	steps        []*step // the original steps, run when the blockwise step declines
	first, final *step
	q, k, v      int // indices of the fused step's inputs
	ops          []attnOp
	ext          []*graph.Value // the values the chain reads (for lifetimes)
}

// reads are the values a step reads, for the last uses of its plan.
func (st *step) reads() []*graph.Value {
	if st.attn != nil {
		return st.attn.ext
	}
	return st.node.Inputs()
}

// matMulNode reports whether n is a MatMul, or a FusedMatMul without
// transposes of A or of the batch axes.
func matMulNode(st *step) bool {
	n := st.node
	switch {
	case normDomain(n.Domain) == "" && n.OpType == "MatMul":
		return len(n.Inputs()) == 2
	case normDomain(n.Domain) == DomainMicrosoft && n.OpType == "FusedMatMul":
		for _, a := range []string{"transA", "transBatchA", "transBatchB"} {
			if at := st.attrs.attr(a); at != nil && at.Int() != 0 {
				return false
			}
		}
		return len(n.Inputs()) == 2
	}
	return false
}

// fuseAttention replaces the decomposed attention chains of p's steps by
// fused steps. keep holds the values that must stay computed (graph
// outputs, Options.Outputs).
func (s *Session) fuseAttention(p *plan, keep map[*graph.Value]bool) {
	if s.opts.unfused || len(p.steps) < 3 {
		return
	}
	at := make(map[*graph.Node]int, len(p.steps))
	for i, st := range p.steps {
		at[st.node] = i
	}
	taken := make([]bool, len(p.steps))
	fusedAt := map[int]*step{}
	for i, st := range p.steps {
		if taken[i] || !matMulNode(st) {
			continue
		}
		idx := attnChainFrom(p, i, at, keep, taken)
		if idx == nil {
			continue
		}
		for _, j := range idx {
			taken[j] = true
		}
		fusedAt[idx[len(idx)-1]] = s.fusedStep(p, idx)
	}
	if len(fusedAt) == 0 {
		return
	}
	out := p.steps[:0:0]
	for i, st := range p.steps {
		if f := fusedAt[i]; f != nil {
			out = append(out, f)
		} else if !taken[i] {
			out = append(out, st)
		}
	}
	p.steps = out
	s.fusedChains += len(fusedAt)
}

// attnChainFrom follows the single readers of the matrix product of step
// i to a Softmax and a second product; it returns the chain's step
// indices, or nil.
func attnChainFrom(p *plan, i int, at map[*graph.Node]int, keep map[*graph.Value]bool, taken []bool) []int {
	idx := []int{i}
	softmax := false
	v := p.steps[i].node.Output(0)
	for {
		if v.Name == "" || keep[v] || v.NumUses() != 1 {
			return nil
		}
		u := v.Uses()[0]
		j, ok := at[u.Node]
		if !ok || taken[j] {
			return nil
		}
		cs := p.steps[j]
		n := cs.node
		if cs.fn != nil || cs.subs != nil || len(n.Outputs()) != 1 {
			return nil
		}
		d := normDomain(n.Domain)
		if d != "" && !(d == DomainMicrosoft && n.OpType == "FusedMatMul") {
			return nil
		}
		idx = append(idx, j)
		switch n.OpType {
		case "Add", "Sub", "Mul", "Div":
			if len(n.Inputs()) != 2 || n.Input(1-u.Index) == nil {
				return nil
			}
		case "Where":
			if u.Index == 0 || len(n.Inputs()) != 3 || slicesHasNil(n.Inputs()) {
				return nil
			}
		case "Reshape":
			if u.Index != 0 || cs.opset >= 5 && (len(n.Inputs()) != 2 || n.Input(1) == nil) {
				return nil
			}
		case "Cast":
			if cs.attrs.attr("to") == nil {
				return nil
			}
		case "Identity":
		case "Softmax":
			if softmax {
				return nil
			}
			softmax = true
		case "MatMul", "FusedMatMul":
			if !softmax || u.Index != 0 || !matMulNode(cs) || n.Input(1) == nil {
				return nil
			}
			return idx
		default:
			return nil
		}
		v = n.Output(0)
	}
}

func slicesHasNil(vs []*graph.Value) bool {
	for _, v := range vs {
		if v == nil {
			return true
		}
	}
	return false
}

// fusedStep makes the step that runs the chain of steps idx of p.
func (s *Session) fusedStep(p *plan, idx []int) *step {
	ch := &attnChain{}
	for _, j := range idx {
		ch.steps = append(ch.steps, p.steps[j])
	}
	ch.first, ch.final = ch.steps[0], ch.steps[len(ch.steps)-1]
	fs := &step{node: ch.final.node, opset: ch.final.opset, attrs: ch.final.attrs,
		entry: entry{fn: attnKernel, flags: Native}, attn: ch, outs: ch.final.outs}
	add := func(st *step, i int) int {
		fs.in = append(fs.in, st.in[i])
		ch.ext = append(ch.ext, st.node.Input(i))
		return len(fs.in) - 1
	}
	ch.q, ch.k = add(ch.first, 0), add(ch.first, 1)
	for k, st := range ch.steps[1 : len(ch.steps)-1] {
		n := st.node
		// The running value enters at the input the previous step's
		// output is read.
		prev := ch.steps[k].node.Output(0)
		pos := -1
		for i, v := range n.Inputs() {
			if v == prev {
				pos = i
			}
		}
		op := attnOp{pos: pos, st: st}
		switch n.OpType {
		case "Add":
			op.kind = akAdd
		case "Sub":
			op.kind = akSub
		case "Mul":
			op.kind = akMul
		case "Div":
			op.kind = akDiv
		case "Where":
			op.kind = akWhere
		case "Cast":
			op.kind = akCast
		case "Softmax":
			op.kind = akSoftmax
		case "Reshape":
			op.kind = akReshape
		case "Identity":
			op.kind = akIdentity
		}
		for i := range n.Inputs() {
			if i != pos {
				op.args = append(op.args, add(st, i))
			}
		}
		ch.ops = append(ch.ops, op)
		// Run unfused, the step drops the running value it read.
		st.free = append(st.free[:0:0], p.slots[prev])
	}
	ch.v = add(ch.final, 1)
	fs.ins = make([]*Tensor, len(fs.in))
	return fs
}

// finishFused gives the last original step of each chain the frees of the
// fused step (the values the chain reads last), after the plan's last uses
// are known.
func finishFused(p *plan) {
	for _, st := range p.steps {
		if ch := st.attn; ch != nil {
			prev := ch.steps[len(ch.steps)-2].node.Output(0)
			ch.final.free = append([]int{p.slots[prev]}, st.free...)
		}
	}
}

// rowSrc reads the rows of an operand broadcast to the scores' shape
// [lead..., S, T]: row s of flat leading index l starts at lead[l] +
// s*rs, its elements cs apart (cs 0: one value for the row).
type rowSrc struct {
	t      *Tensor
	lead   []int
	rs, cs int
}

// broadcastRows describes x broadcast to shape (rank >= 2, the last two
// axes rows and columns); ok is false when x does not broadcast to shape
// without enlarging it.
func broadcastRows(x *Tensor, shape []int) (rowSrc, bool) {
	r := len(shape)
	if len(x.Shape) > r {
		return rowSrc{}, false
	}
	pad := make([]int, r)
	for i := range pad {
		pad[i] = 1
	}
	copy(pad[r-len(x.Shape):], x.Shape)
	for i, d := range pad {
		if d != shape[i] && d != 1 {
			return rowSrc{}, false
		}
	}
	src := rowSrc{t: x}
	if pad[r-1] != 1 {
		src.cs = 1
	}
	if pad[r-2] != 1 {
		src.rs = pad[r-1]
	}
	src.lead = leadOffsets(pad[:r-2], shape[:r-2], pad[r-2]*pad[r-1])
	return src, true
}

// leadOffsets gives, for every flat index of the leading shape lead, the
// offset of the matching block of an operand whose leading dimensions are
// dims (right-aligned to lead, 1 broadcasting) and whose blocks hold tail
// elements.
func leadOffsets(dims, lead []int, tail int) []int {
	n := shapeSize(lead)
	offs := make([]int, n)
	strides := make([]int, len(lead))
	st := tail
	for i := len(lead) - 1; i >= 0; i-- {
		j := i - (len(lead) - len(dims))
		if j >= 0 && dims[j] != 1 {
			strides[i] = st
			st *= dims[j]
		}
	}
	idx := make([]int, len(lead))
	for l := range n {
		o := 0
		for i, x := range idx {
			o += x * strides[i]
		}
		offs[l] = o
		for i := len(idx) - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < lead[i] {
				break
			}
			idx[i] = 0
		}
	}
	return offs
}

// attnRunOp is an op of a chain prepared for a run's tensors.
type attnRunOp struct {
	kind  attnKind
	pos   int
	a, b  rowSrc         // the other operand (binary), or cond and the other value (Where)
	round graph.DataType // the half type the op's output is rounded to, or 0
}

// attnRun is a chain prepared for one run's tensors.
type attnRun struct {
	L, S, T, D, Hv int // leading entries, query rows, keys, head sizes of q·k and of v
	q, k, v        *Tensor
	ql, kl, vl     []int // leading offsets of q, k, v
	transK, transV bool
	alpha, alphaV  float32
	round          graph.DataType // the half type of the products' outputs, or 0
	ops            []attnRunOp
	out            *Tensor
}

func isFloat32Like(dt graph.DataType) bool {
	return dt == graph.Float || dt == graph.Float16 || dt == graph.BFloat16
}

func halfOr0(dt graph.DataType) graph.DataType {
	if isHalf(dt) {
		return dt
	}
	return 0
}

// prepare checks the run's tensors against what the blockwise step
// computes and lays them out; ok is false when the chain must run as
// written.
func (ch *attnChain) prepare(c *Call, in []*Tensor) (r *attnRun, ok bool) {
	if c.Acc64() {
		return nil, false
	}
	for _, t := range in {
		if t == nil || t.notTensor() {
			return nil, false
		}
	}
	q, k, v := in[ch.q], in[ch.k], in[ch.v]
	if q.DType != k.DType || !isFloat32Like(q.DType) || len(q.Shape) < 2 || len(k.Shape) < 2 || len(v.Shape) < 2 {
		return nil, false
	}
	r = &attnRun{q: q, k: k, v: v, alpha: 1, alphaV: 1}
	fm := func(st *step) (alpha float32, transB bool) {
		if normDomain(st.node.Domain) != DomainMicrosoft {
			return 1, false
		}
		alpha, transB = 1, false
		if a := st.attrs.attr("alpha"); a != nil {
			alpha = a.Float()
		}
		if a := st.attrs.attr("transB"); a != nil {
			transB = a.Int() == 1
		}
		return alpha, transB
	}
	r.alpha, r.transK = fm(ch.first)
	r.alphaV, r.transV = fm(ch.final)
	rq, rk := len(q.Shape), len(k.Shape)
	r.S, r.D = q.Shape[rq-2], q.Shape[rq-1]
	dk, T := k.Shape[rk-2], k.Shape[rk-1]
	if r.transK {
		dk, T = T, dk
	}
	r.T = T
	if dk != r.D || r.S == 0 || T == 0 || r.D == 0 {
		return nil, false
	}
	lead, err := broadcastShape(q.Shape[:rq-2], k.Shape[:rk-2])
	if err != nil {
		return nil, false
	}
	r.L = shapeSize(lead)
	if r.L == 0 {
		return nil, false
	}
	r.ql = leadOffsets(q.Shape[:rq-2], lead, r.S*r.D)
	r.kl = leadOffsets(k.Shape[:rk-2], lead, dk*T)
	cur := append(append([]int(nil), lead...), r.S, T)
	dt := q.DType
	r.round = halfOr0(dt)
	for _, op := range ch.ops {
		ro := attnRunOp{kind: op.kind, pos: op.pos}
		switch op.kind {
		case akAdd, akSub, akMul, akDiv:
			x := in[op.args[0]]
			if x.DType != dt {
				return nil, false
			}
			if ro.a, ok = broadcastRows(x, cur); !ok {
				return nil, false
			}
			ro.round = halfOr0(dt)
		case akWhere:
			cond, x := in[op.args[0]], in[op.args[1]]
			if op.pos == 0 || cond.DType != graph.Bool || x.DType != dt {
				return nil, false
			}
			if ro.a, ok = broadcastRows(cond, cur); !ok {
				return nil, false
			}
			if ro.b, ok = broadcastRows(x, cur); !ok {
				return nil, false
			}
		case akCast:
			to := graph.DataType(op.st.attrs.attr("to").Int())
			if !isFloat32Like(to) {
				return nil, false
			}
			if to != dt && isHalf(to) {
				ro.round = to
			}
			if isHalf(dt) && isHalf(to) && dt != to {
				return nil, false // float16 <-> bfloat16: not worth a path
			}
			dt = to
		case akSoftmax:
			def := int64(-1)
			if op.st.opset < 13 {
				def = 1
			}
			axis, err := normAxis(op.st.attrs.int("axis", def), len(cur))
			if err != nil || axis != len(cur)-1 {
				return nil, false
			}
			ro.round = halfOr0(dt)
		case akReshape:
			var spec []int64
			if op.st.opset < 5 {
				spec = op.st.attrs.ints("shape")
			} else {
				x := in[op.args[0]]
				if x.DType != graph.Int64 || len(x.Shape) != 1 {
					return nil, false
				}
				spec = Data[int64](x)
			}
			shape, ok := reshapeTo(cur, spec, op.st.attrs.int("allowzero", 0) == 1)
			if !ok || len(shape) < 2 || shape[len(shape)-1] != T || shape[len(shape)-2] != r.S {
				return nil, false
			}
			cur = shape
		case akIdentity:
		}
		r.ops = append(r.ops, ro)
	}
	rv := len(v.Shape)
	tv, hv := v.Shape[rv-2], v.Shape[rv-1]
	if r.transV {
		tv, hv = hv, tv
	}
	if v.DType != dt || tv != T {
		return nil, false
	}
	r.Hv = hv
	lead = cur[:len(cur)-2]
	if ol, err := broadcastShape(lead, v.Shape[:rv-2]); err != nil || !equalShape(ol, lead) {
		return nil, false
	}
	r.vl = leadOffsets(v.Shape[:rv-2], lead, tv*hv)
	out := append(append([]int(nil), lead...), r.S, hv)
	r.out = c.alloc(dt, out...)
	return r, true
}

func (l attrList) int(name string, def int64) int64 {
	if a := l.attr(name); a != nil {
		return a.Int()
	}
	return def
}

func (l attrList) ints(name string) []int64 {
	if a := l.attr(name); a != nil {
		return a.Ints()
	}
	return nil
}

// attnKernel is the fused step's kernel: the chain run blockwise, or
// errUnfusable before anything is allocated.
func attnKernel(c *Call, in []*Tensor) ([]*Tensor, error) {
	r, ok := c.step.attn.prepare(c, in)
	if !ok {
		return nil, errUnfusable
	}
	if c.tr != nil {
		// The workers' scratch, for the step: a block of scores and k
		// and v (widened or packed) per goroutine.
		rb := int64(min(max(attnBlockFloats/r.T, 32), r.S))
		n := int64(c.threads()) * 4 * (rb*int64(r.T) + 2*int64(r.T)*int64(max(r.D, r.Hv)+32) + rb*int64(r.D+r.Hv))
		if err := c.tr.take(n); err != nil {
			return nil, err
		}
		defer c.tr.give(n)
	}
	r.run(c)
	if c.tr != nil {
		c.tr.blockwise++
	}
	return []*Tensor{r.out}, nil
}

// attnBlockFloats is the size (in float32s) of the score block a worker
// aims for, as attnScratchFloats for the attention ops.
const attnBlockFloats = 1 << 15

// run computes the chain on c's threads. A task is every row block of one
// leading index when there are enough of them to share, else one block.
func (r *attnRun) run(c *Call) {
	rb := min(max(attnBlockFloats/r.T, 32), r.S)
	nblk := (r.S + rb - 1) / rb
	p := c.threads()
	if r.L*r.S*r.T*(r.D+r.Hv) < 1<<17 {
		p = 1
	}
	per := 1 // blocks per task
	if r.L >= 2*p {
		per = nblk
	}
	tasks := r.L * ((nblk + per - 1) / per)
	p = min(p, tasks)
	s := c.sess
	for len(s.attnWorkers) < p {
		s.attnWorkers = append(s.attnWorkers, &attnFusedWorker{})
	}
	var next atomic.Int64
	fanOut(p, p, func(i, _ int) {
		w := s.attnWorkers[i]
		w.r, w.pl = r, -1
		if cap(w.sc) < rb*r.T {
			w.sc = make([]float32, rb*r.T)
		}
		defer func() { w.r = nil }()
		for {
			t := int(next.Add(1) - 1)
			if t >= tasks {
				return
			}
			l, b := t/((nblk+per-1)/per), t%((nblk+per-1)/per)*per
			for ; b < nblk && per > 0; b++ {
				w.block(l, b*rb, min((b+1)*rb, r.S))
				if per == 1 {
					break
				}
			}
		}
	})
}

// attnPackRows is the number of query rows of a leading index from which
// its k and v are packed once for all its blocks (fewer rows multiply
// them in place).
const attnPackRows = 16

// attnPackWork is the multiply-adds of one leading index's product from
// which packing pays off (gemm multiplies smaller ones in place).
const attnPackWork = 1 << 18

// attnFusedWorker holds one goroutine's scratch.
type attnFusedWorker struct {
	r    *attnRun
	sc   []float32 // the block's scores, T wide
	qbuf []float32 // the block's queries widened (half q)
	kbuf []float32 // k widened (half k)
	vbuf []float32 // v widened (half v)
	obuf []float32 // the block's outputs before rounding (half v)
	row  []float32 // an operand's row widened
	h16  []float16.Float16
	// pk and pv are k and v of leading index pl packed.
	pk, pv *gemm.PackedB
	pl     int
}

// widenInto returns n elements of t from off as float32: t's own slice
// for float32, else a widened copy in *buf.
func widenInto(buf *[]float32, t *Tensor, off, n int) []float32 {
	switch d := t.data.(type) {
	case []float32:
		return d[off : off+n]
	case []float16.Float16:
		if cap(*buf) < n {
			*buf = make([]float32, n)
		}
		b := (*buf)[:n]
		widen16(b, d[off:off+n])
		return b
	case []graph.BF16:
		if cap(*buf) < n {
			*buf = make([]float32, n)
		}
		b := (*buf)[:n]
		for i, v := range d[off : off+n] {
			b[i] = v.Float32()
		}
		return b
	}
	panic("kernels: widenInto of " + t.DType.String())
}

// roundTo rounds x to dt (float16 or bfloat16) in place.
func (w *attnFusedWorker) roundTo(x []float32, dt graph.DataType) {
	switch dt {
	case graph.Float16:
		if cap(w.h16) < len(x) {
			w.h16 = make([]float16.Float16, len(x))
		}
		h := w.h16[:len(x)]
		narrow16(h, x)
		widen16(x, h)
	case graph.BFloat16:
		for i, v := range x {
			x[i] = graph.BF16FromFloat32(v).Float32()
		}
	}
}

// block computes rows [s0, s1) of leading index l.
func (w *attnFusedWorker) block(l, s0, s1 int) {
	r := w.r
	m, T, D, hv := s1-s0, r.T, r.D, r.Hv
	one := gemm.Exec{Threads: 1}
	q := widenInto(&w.qbuf, r.q, r.ql[l]+s0*D, m*D)
	ldk, ldv := T, hv
	if r.transK {
		ldk = D
	}
	if r.transV {
		ldv = T
	}
	// k and v are packed once per leading index for products of many
	// rows; small ones are multiplied as they are (in place).
	packed := r.S >= attnPackRows && r.S*T*max(D, hv) >= attnPackWork
	if packed && w.pl != l {
		w.pk = gemm.PackBInto(w.pk, r.transK, D, T, widenInto(&w.kbuf, r.k, r.kl[l], T*D), ldk)
		w.pv = gemm.PackBInto(w.pv, r.transV, T, hv, widenInto(&w.vbuf, r.v, r.vl[l], T*hv), ldv)
		w.pl = l
	}
	sc := w.sc[:m*T]
	if packed {
		one.SgemmPacked(m, T, D, r.alpha, q, D, w.pk, 0, sc, T)
	} else {
		one.Sgemm(false, r.transK, m, T, D, r.alpha, q, D, widenInto(&w.kbuf, r.k, r.kl[l], T*D), ldk, 0, sc, T)
	}
	if r.round != 0 {
		w.roundTo(sc, r.round)
	}
	for j := range r.ops {
		w.apply(&r.ops[j], sc, l, s0, m)
	}
	oo := (l*r.S + s0) * hv
	var o []float32
	if d, ok := r.out.data.([]float32); ok {
		o = d[oo : oo+m*hv]
	} else {
		if cap(w.obuf) < m*hv {
			w.obuf = make([]float32, m*hv)
		}
		o = w.obuf[:m*hv]
	}
	if packed {
		one.SgemmPacked(m, hv, T, r.alphaV, sc, T, w.pv, 0, o, hv)
	} else {
		one.Sgemm(false, r.transV, m, hv, T, r.alphaV, sc, T, widenInto(&w.vbuf, r.v, r.vl[l], T*hv), ldv, 0, o, hv)
	}
	switch d := r.out.data.(type) {
	case []float16.Float16:
		narrow16(d[oo:oo+len(o)], o)
	case []graph.BF16:
		for i, x := range o {
			d[oo+i] = graph.BF16FromFloat32(x)
		}
	}
}

// operand returns row s of leading index l of src as float32s: len T, or
// len 1 when the row is one value.
func (w *attnFusedWorker) operand(src *rowSrc, l, s int) []float32 {
	off := src.lead[l] + s*src.rs
	n := 1
	if src.cs != 0 {
		n = w.r.T
	}
	return widenInto(&w.row, src.t, off, n)
}

// apply runs one op of the chain on the m score rows from s0 of leading
// index l (sc holds them, T wide).
func (w *attnFusedWorker) apply(op *attnRunOp, sc []float32, l, s0, m int) {
	T := w.r.T
	switch op.kind {
	case akAdd, akSub, akMul, akDiv:
		b := binOp(opAdd + binOp(op.kind-akAdd))
		ix := op.a.cs
		for i := range m {
			row := sc[i*T : i*T+T]
			x := w.operand(&op.a, l, s0+i)
			if op.pos == 0 {
				binRun(b, row, row, x, 1, ix)
			} else {
				binRun(b, row, x, row, ix, 1)
			}
		}
	case akWhere:
		cd := Data[bool](op.a.t)
		keepRunning := op.pos == 1 // cond true selects input 1
		for i := range m {
			row := sc[i*T : i*T+T]
			co := op.a.lead[l] + (s0+i)*op.a.rs
			x := w.operand(&op.b, l, s0+i)
			if op.a.cs == 1 && op.b.cs == 0 {
				cr, v := cd[co:co+T], x[0]
				for j, c := range cr {
					if c != keepRunning {
						row[j] = v
					}
				}
				continue
			}
			for j := range row {
				if cd[co+j*op.a.cs] != keepRunning {
					row[j] = x[j*op.b.cs]
				}
			}
		}
		return
	case akSoftmax:
		softmaxFast32(sc, sc, 0, m, T, false)
	}
	if op.round != 0 {
		w.roundTo(sc[:m*T], op.round)
	}
}
