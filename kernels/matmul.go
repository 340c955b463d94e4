package kernels

import (
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels/gemm"
)

// sgemm computes C = alpha*op(A)*op(B) + beta*C for row-major float32
// matrices with leading dimensions lda, ldb, ldc (op transposes when the
// flag is set): C is m×n, op(A) m×k, op(B) k×n.
//
// This is the single entry point of float32 matrix products in the
// package; it calls the blocked, vectorised GEMM of kernels/gemm.
func sgemm(e gemm.Exec, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	e.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// mm is how c's matrix products run: on the session's Threads (each call
// carries its own limit, so sessions with different limits can run at
// the same time).
func (c *Call) mm() gemm.Exec { return gemm.Exec{Threads: c.threads()} }

// parallelRows splits [0,m) into chunks run on e's goroutines when the
// work (multiply-adds) is large enough to pay for goroutines.
func parallelRows(e gemm.Exec, m, work int, f func(i0, i1 int)) {
	p := e.Threads
	if p <= 0 {
		p = runtime.GOMAXPROCS(0)
	}
	if p == 1 || work < 1<<17 || m < 2 {
		f(0, m)
		return
	}
	fanOut(min(p, m), m, f)
}

// gemmT is the generic product (float64, integers, and float32 with
// float64 accumulation when acc is float64-typed through acc64).
func gemmT[T Num](e gemm.Exec, transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int, acc64 bool) {
	at := func(i, p int) T {
		if transA {
			return a[p*lda+i]
		}
		return a[i*lda+p]
	}
	bt := func(p, j int) T {
		if transB {
			return b[j*ldb+p]
		}
		return b[p*ldb+j]
	}
	parallelRows(e, m, m*n*k, func(i0, i1 int) {
		for i := i0; i < i1; i++ {
			for j := range n {
				var r T
				if acc64 {
					s := 0.0
					for p := range k {
						s += float64(at(i, p)) * float64(bt(p, j))
					}
					r = T(float64(alpha) * s)
				} else {
					var s T
					for p := range k {
						s += at(i, p) * bt(p, j)
					}
					r = alpha * s
				}
				if beta != 0 {
					r += beta * c[i*ldc+j]
				}
				c[i*ldc+j] = r
			}
		}
	})
}

// gemmAny dispatches on the element type of the slices.
func gemmAny(e gemm.Exec, dt graph.DataType, transA, transB bool, m, n, k int, alpha float64, a any, lda int, b any, ldb int, beta float64, c any, ldc int, acc64 bool) error {
	switch dt {
	case graph.Float:
		if acc64 {
			gemmT(e, transA, transB, m, n, k, float32(alpha), a.([]float32), lda, b.([]float32), ldb, float32(beta), c.([]float32), ldc, true)
		} else {
			sgemm(e, transA, transB, m, n, k, float32(alpha), a.([]float32), lda, b.([]float32), ldb, float32(beta), c.([]float32), ldc)
		}
	case graph.Double:
		e.Dgemm(transA, transB, m, n, k, alpha, a.([]float64), lda, b.([]float64), ldb, beta, c.([]float64), ldc)
	case graph.Int64:
		gemmT(e, transA, transB, m, n, k, int64(alpha), a.([]int64), lda, b.([]int64), ldb, int64(beta), c.([]int64), ldc, false)
	case graph.Int32:
		gemmT(e, transA, transB, m, n, k, int32(alpha), a.([]int32), lda, b.([]int32), ldb, int32(beta), c.([]int32), ldc, false)
	case graph.Uint8:
		gemmT(e, transA, transB, m, n, k, uint8(alpha), a.([]uint8), lda, b.([]uint8), ldb, uint8(beta), c.([]uint8), ldc, false)
	case graph.Int8:
		gemmT(e, transA, transB, m, n, k, int8(alpha), a.([]int8), lda, b.([]int8), ldb, int8(beta), c.([]int8), ldc, false)
	case graph.Uint32:
		gemmT(e, transA, transB, m, n, k, uint32(alpha), a.([]uint32), lda, b.([]uint32), ldb, uint32(beta), c.([]uint32), ldc, false)
	case graph.Uint64:
		gemmT(e, transA, transB, m, n, k, uint64(alpha), a.([]uint64), lda, b.([]uint64), ldb, uint64(beta), c.([]uint64), ldc, false)
	default:
		return fmt.Errorf("%v: %w", dt, ErrUnsupportedType)
	}
	return nil
}

func sub(t any, off, n int) any {
	switch d := t.(type) {
	case []float32:
		return d[off : off+n]
	case []float64:
		return d[off : off+n]
	case []int64:
		return d[off : off+n]
	case []int32:
		return d[off : off+n]
	case []int8:
		return d[off : off+n]
	case []uint8:
		return d[off : off+n]
	case []int16:
		return d[off : off+n]
	case []uint16:
		return d[off : off+n]
	case []uint32:
		return d[off : off+n]
	case []uint64:
		return d[off : off+n]
	}
	panic(typePanic(fmt.Sprintf("kernels: sub of %T", t)))
}

// batchedMatMul computes alpha * op(a) @ op(b) with numpy broadcasting of
// the batch dimensions; a and b have rank >= 2. transA/transB transpose
// the last two dimensions.
//
// c (nil outside a run) allocates the output and may hold b packed.
func batchedMatMul(c *Call, a, b *Tensor, transA, transB bool, alpha float64) (*Tensor, error) {
	acc64 := c.Acc64()
	if a.DType == graph.Float && isHalf(b.DType) {
		if out, ok := matmulHalfB(c, a, b, transA, transB, alpha); ok {
			return out, nil
		}
		b = castC(c, b, graph.Float)
	}
	if a.DType != b.DType {
		return nil, fmt.Errorf("element types differ: %v and %v", a.DType, b.DType)
	}
	ra, rb := len(a.Shape), len(b.Shape)
	m, ka := a.Shape[ra-2], a.Shape[ra-1]
	if transA {
		m, ka = ka, m
	}
	kb, n := b.Shape[rb-2], b.Shape[rb-1]
	if transB {
		kb, n = n, kb
	}
	if ka != kb {
		return nil, fmt.Errorf("inner dimensions differ: %v × %v", a.Shape, b.Shape)
	}
	k := ka
	batch, err := broadcastShape(a.Shape[:ra-2], b.Shape[:rb-2])
	if err != nil {
		return nil, err
	}
	lda, ldb := a.Shape[ra-1], b.Shape[rb-1]
	sa, sb := m*k, k*n
	// b shared by every batch and a not transposed: one tall product.
	if shapeSize(b.Shape[:rb-2]) == 1 && !transA && shapeSize(a.Shape[:ra-2]) == shapeSize(batch) {
		var out *Tensor
		var sunk bool
		if a.DType == graph.Float || a.DType == graph.Double {
			out, sunk = c.allocOutput(a.DType, slices.Concat(batch, []int{m, n})...)
		} else {
			out = c.alloc(a.DType, slices.Concat(batch, []int{m, n})...)
		}
		rows := shapeSize(batch) * m
		pb := c.packed(b, k, n)
		if !sunk {
			if pb != nil {
				c.mm().SgemmPacked(rows, n, k, float32(alpha), Data[float32](a), lda, pb, 0, Data[float32](out), n)
				return out, nil
			}
			return out, gemmAny(c.mm(), a.DType, false, transB, rows, n, k, alpha, a.data, lda, b.data, ldb, 0, out.data, n, acc64)
		}
		// Written into a file a block of rows at a time, each block's
		// pages released behind it.
		step := max(1, sinkBlock/max(n*elemBytes(a.DType), 1))
		for r0 := 0; r0 < rows; r0 += step {
			r := min(step, rows-r0)
			if pb != nil {
				c.mm().SgemmPacked(r, n, k, float32(alpha), Data[float32](a)[r0*lda:], lda, pb, 0, Data[float32](out)[r0*n:], n)
			} else if err := gemmAny(c.mm(), a.DType, false, transB, r, n, k, alpha, sub(a.data, r0*lda, r*lda), lda, b.data, ldb, 0, sub(out.data, r0*n, r*n), n, acc64); err != nil {
				return out, err
			}
			// From the start: the page a block ends in is released
			// with the next one.
			ReleaseSpilled(out, 0, (r0+r)*n)
		}
		return out, nil
	}
	out := c.alloc(a.DType, slices.Concat(batch, []int{m, n})...)
	if a.DType == graph.Float && !acc64 {
		// One strided batched call: gemm spreads small matrices over the
		// threads.
		abatch, bbatch := a.Shape[:ra-2], b.Shape[:rb-2]
		// Small batches stay on this goroutine: SgemmStrided spreads any
		// batch over the threads.
		if sA, sB, ok := batchStrides(batch, abatch, bbatch, sa, sb); ok && shapeSize(batch)*m*n*k >= 1<<19 {
			c.mm().SgemmStrided(shapeSize(batch), transA, transB, m, n, k, float32(alpha), Data[float32](a), lda, sA,
				Data[float32](b), ldb, sB, 0, Data[float32](out), n, m*n)
			return out, nil
		}
	}
	abatch, bbatch := a.Shape[:ra-2], b.Shape[:rb-2]
	var ferr error
	e := c.mm()
	newBcast(batch, abatch, bbatch).each(func(o int, offs, inc []int, cnt int) {
		for i := range cnt {
			if ferr != nil {
				return
			}
			ao := (offs[0] + i*inc[0]) * sa
			bo := (offs[1] + i*inc[1]) * sb
			co := (o + i) * m * n
			ferr = gemmAny(e, a.DType, transA, transB, m, n, k, alpha, sub(a.data, ao, sa), lda, sub(b.data, bo, sb), ldb, 0, sub(out.data, co, m*n), n, acc64)
		}
	})
	return out, ferr
}

// batchStrides gives the matrix strides of a and b over the output batch
// when each operand either has the whole batch or a single matrix.
func batchStrides(batch, abatch, bbatch []int, sa, sb int) (strideA, strideB int, ok bool) {
	nb := shapeSize(batch)
	stride := func(ob []int, s int) (int, bool) {
		switch shapeSize(ob) {
		case 1:
			return 0, true
		case nb:
			if len(ob) == len(batch) && equalShape(ob, batch) {
				return s, true
			}
		}
		return 0, false
	}
	if strideA, ok = stride(abatch, sa); !ok {
		return 0, 0, false
	}
	strideB, ok = stride(bbatch, sb)
	return strideA, strideB, ok
}

// sinkBlock is the size of the blocks of rows a matrix product writes into
// a Spill at a time (Call.allocOutput): a vocabulary's rows of 32000
// float32 take 512 rows a block, and an unpacked B is packed again per
// block (16 times for 8192 rows). A variable for the tests.
var sinkBlock = 64 << 20

// matmulNumpy is MatMul with numpy's rules for 1-D operands.
func matmulNumpy(c *Call, a, b *Tensor, alpha float64, transA, transB bool) (*Tensor, error) {
	if len(a.Shape) == 0 || len(b.Shape) == 0 {
		return nil, fmt.Errorf("MatMul of a scalar")
	}
	a1, b1 := len(a.Shape) == 1, len(b.Shape) == 1
	if a1 {
		a = view(a, []int{1, a.Shape[0]})
	}
	if b1 {
		b = view(b, []int{b.Shape[0], 1})
	}
	out, err := batchedMatMul(c, a, b, transA, transB, alpha)
	if err != nil {
		return nil, err
	}
	shape := out.Shape
	r := len(shape)
	switch {
	case a1 && b1:
		shape = shape[:r-2]
	case a1:
		shape = append(slices.Clone(shape[:r-2]), shape[r-1])
	case b1:
		shape = shape[:r-1]
	}
	return view(out, shape), nil
}

func matmulOp(c *Call, in []*Tensor) ([]*Tensor, error) {
	o, err := matmulNumpy(c, in[0], in[1], 1, false, false)
	return []*Tensor{o}, err
}

func gemmOp(c *Call, in []*Tensor) ([]*Tensor, error) {
	a, b := in[0], in[1]
	if len(a.Shape) != 2 || len(b.Shape) != 2 {
		return nil, fmt.Errorf("Gemm needs 2-D A and B")
	}
	if a.DType != b.DType {
		return nil, fmt.Errorf("element types differ: %v and %v", a.DType, b.DType)
	}
	ta, tb := c.Int("transA", 0) == 1, c.Int("transB", 0) == 1
	alpha, beta := float64(c.Float("alpha", 1)), float64(c.Float("beta", 1))
	m, k := a.Shape[0], a.Shape[1]
	if ta {
		m, k = k, m
	}
	kb, n := b.Shape[0], b.Shape[1]
	if tb {
		kb, n = n, kb
	}
	if k != kb {
		return nil, fmt.Errorf("inner dimensions differ")
	}
	var out *Tensor
	if len(in) > 2 && in[2] != nil && beta != 0 {
		if sh, err := broadcastShape(in[2].Shape, []int{m, n}); err != nil || !equalShape(sh, []int{m, n}) || in[2].DType != a.DType {
			return nil, fmt.Errorf("C %v does not broadcast to [%d %d] of %v", in[2], m, n, a.DType)
		}
		out = expandC(c, in[2], []int{m, n})
		if out == in[2] {
			out = c.clone(out)
		}
		if len(in[2].Shape) > 2 {
			return nil, fmt.Errorf("C must have rank <= 2")
		}
	} else {
		out = c.alloc(a.DType, m, n)
		beta = 0
	}
	if out.DType != a.DType {
		return nil, fmt.Errorf("C type %v differs from A %v", out.DType, a.DType)
	}
	if a.DType == graph.Float && isHalf(b.DType) {
		if !ta && !c.Acc64() {
			c.mm().SgemmHalfB(halfOf(b), tb, m, n, k, float32(alpha), Data[float32](a), a.Shape[1], halfBits(b), b.Shape[1], float32(beta), Data[float32](out), n)
			return []*Tensor{out}, nil
		}
		b = castC(c, b, graph.Float)
	}
	if pb := c.packed(b, k, n); pb != nil && !ta {
		c.mm().SgemmPacked(m, n, k, float32(alpha), Data[float32](a), a.Shape[1], pb, float32(beta), Data[float32](out), n)
		return []*Tensor{out}, nil
	}
	err := gemmAny(c.mm(), a.DType, ta, tb, m, n, k, alpha, a.data, a.Shape[1], b.data, b.Shape[1], beta, out.data, n, c.Acc64())
	return []*Tensor{out}, err
}

// halfBOps are the matrix products whose constant float16/bfloat16 B the
// executor hands over unwidened (step.halfB).
var halfBOps = map[string]bool{"MatMul": true, "Gemm": true, "com.microsoft.FusedMatMul": true}

// matmulHalfB multiplies a float32 a by a 16-bit b shared by every batch
// entry (a weight), widening b tile by tile as gemm packs it; ok is false
// for other layouts (then b is widened whole).
func matmulHalfB(c *Call, a, b *Tensor, transA, transB bool, alpha float64) (*Tensor, bool) {
	ra := len(a.Shape)
	if len(b.Shape) != 2 || ra < 2 || transA || c.Acc64() {
		return nil, false
	}
	m, k := a.Shape[ra-2], a.Shape[ra-1]
	kb, n := b.Shape[0], b.Shape[1]
	if transB {
		kb, n = n, kb
	}
	if kb != k {
		return nil, false
	}
	batch := a.Shape[:ra-2]
	out := c.alloc(graph.Float, slices.Concat(batch, []int{m, n})...)
	c.mm().SgemmHalfB(halfOf(b), transB, shapeSize(batch)*m, n, k, float32(alpha), Data[float32](a), k, halfBits(b), b.Shape[1], 0, Data[float32](out), n)
	return out, true
}

// halfOf is gemm's name of t's 16-bit type.
func halfOf(t *Tensor) gemm.Half {
	if t.DType == graph.BFloat16 {
		return gemm.BFloat16
	}
	return gemm.Float16
}

// halfBits are the bits of a float16 or bfloat16 tensor's elements.
func halfBits(t *Tensor) []uint16 {
	switch d := t.data.(type) {
	case []float16.Float16:
		return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(d))), len(d))
	case []graph.BF16:
		return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(d))), len(d))
	}
	panic(typePanic("kernels: halfBits of " + t.DType.String()))
}

func init() {
	reg("MatMul", 1, 0, matmulOp)
	reg("Gemm", 1, 0, gemmOp)
}

// packedWeight is the constant right-hand side of a MatMul, Gemm or
// FusedMatMul step, packed once when the session is made (and shared with
// the sessions whose weight has the same bytes: sharedweights.go).
type packedWeight struct {
	src *Tensor // the constant B as the kernel receives it
	pd  *packedData
}

// packWeights packs the float32 constant 2-D B operands of p's matrix
// products (not graph inputs, which a caller may override).
func (s *Session) packWeights(p *plan) error {
	if s.opts.Accumulate64 {
		return nil
	}
	isInput := map[*graph.Value]bool{}
	for _, v := range p.g.Inputs {
		isInput[v] = true
	}
	for _, st := range p.steps {
		n := st.node
		if st.fn != nil || len(n.Inputs()) < 2 || n.Input(1) == nil || isInput[n.Input(1)] {
			continue
		}
		b := p.consts[n.Input(1)]
		if b == nil || b.DType != graph.Float || len(b.Shape) != 2 {
			continue
		}
		var transB bool
		switch d := normDomain(n.Domain); {
		case d == "" && n.OpType == "MatMul":
		case d == DomainMicrosoft && (n.OpType == "Attention" || n.OpType == "GemmFastGelu"):
			// Their weights (input 1) multiply the input as MatMul's B.
		case d == "" && n.OpType == "Gemm" || d == DomainMicrosoft && n.OpType == "FusedMatMul":
			if a := st.attrs.attr("transB"); a != nil {
				transB = a.Int() == 1
			}
			if a := st.attrs.attr("transBatchB"); a != nil && a.Int() != 0 {
				continue
			}
		default:
			continue
		}
		k, nn := b.Shape[0], b.Shape[1]
		if transB {
			k, nn = nn, k
		}
		key := packKey{b, transB}
		if pw := s.packedOf[key]; pw != nil {
			st.packed = pw
			continue
		}
		m := s.mapped[b]
		if m != nil {
			// Read in one go, not a page fault per page; dropped below.
			graph.PopulateMapped(m)
		}
		pd := acquirePacked(s.budget(), transB, k, nn, Data[float32](b), b.Shape[1], m != nil)
		if pd == nil {
			continue // over the budget: the step packs per call
		}
		s.holds.list = append(s.holds.list, pd)
		st.packed = &packedWeight{src: b, pd: pd}
		s.packed += pd.bytes
		if s.packedOf == nil {
			s.packedOf = map[packKey]*packedWeight{}
		}
		s.packedOf[key] = st.packed
		if m != nil {
			// The steps read the packed copy: the file's pages need not
			// stay (a kernel that reads b itself faults them back in).
			graph.ReleaseMapped(m)
		}
	}
	return nil
}

// packKey identifies a packed weight: its source and whether it is
// transposed.
type packKey struct {
	src    *Tensor
	transB bool
}

// packed returns the packed form of b when this step packed it and it
// is a k x n op(B); nil otherwise (then the caller multiplies b itself).
func (c *Call) packed(b *Tensor, k, n int) *gemm.PackedB {
	if c == nil || c.step == nil || c.step.packed == nil || c.step.packed.src != b || c.Acc64() {
		return nil
	}
	if pb := c.step.packed.pd.pb; pb.K() == k && pb.N() == n {
		return pb
	}
	return nil
}
