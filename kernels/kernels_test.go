package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
)

// runOp runs one node of op on the inputs through a Session and returns
// its outputs.
func runOp(t testing.TB, domain, op string, opset int64, nout int, attrs []*graph.Attr, ins ...*Tensor) ([]*Tensor, error) {
	t.Helper()
	return runOpWith(t, Options{}, domain, op, opset, nout, attrs, ins...)
}

// runOpWith is runOp in a session with options opts.
func runOpWith(t testing.TB, opts Options, domain, op string, opset int64, nout int, attrs []*graph.Attr, ins ...*Tensor) ([]*Tensor, error) {
	t.Helper()
	opsets := []graph.Opset{{Domain: "", Version: opset}}
	if domain != "" {
		opsets = append(opsets, graph.Opset{Domain: domain, Version: 1})
	}
	m := graph.NewModel(9, "kernels-test", opsets...)
	g := m.Graph
	var vs []*graph.Value
	feed := map[string]*Tensor{}
	for i, x := range ins {
		if x == nil {
			vs = append(vs, nil)
			continue
		}
		v := g.AddInput(fmt.Sprintf("in%d", i), graph.TensorType(x.DType, nil))
		vs = append(vs, v)
		feed[v.Name] = x
	}
	n := g.NewNode(op, domain, vs, nout, attrs...)
	g.Append(n)
	for _, o := range n.Outputs() {
		g.AddOutput(o)
	}
	s, err := NewSession(m, opts)
	if err != nil {
		return nil, err
	}
	res, err := s.Run(feed)
	if err != nil {
		return nil, err
	}
	outs := make([]*Tensor, nout)
	for i, o := range n.Outputs() {
		outs[i] = res[o.Name]
	}
	return outs, nil
}

func mustOp(t testing.TB, domain, op string, opset int64, attrs []*graph.Attr, ins ...*Tensor) *Tensor {
	t.Helper()
	outs, err := runOp(t, domain, op, opset, 1, attrs, ins...)
	if err != nil {
		t.Fatal(err)
	}
	return outs[0]
}

func randF32(rng *rand.Rand, shape ...int) *Tensor {
	d := make([]float32, shapeSize(shape))
	for i := range d {
		d[i] = float32(rng.NormFloat64())
	}
	return FromSlice(shape, d)
}

// refMatMul is a float64 reference for 2-D or batched (same batch) products.
func refMatMul(a, b []float64, batch, m, n, k int, bBatched bool) (out, absSum []float64) {
	out = make([]float64, batch*m*n)
	absSum = make([]float64, batch*m*n)
	for bi := range batch {
		bo := 0
		if bBatched {
			bo = bi * k * n
		}
		for i := range m {
			for j := range n {
				var s, as float64
				for p := range k {
					x, y := a[bi*m*k+i*k+p], b[bo+p*n+j]
					s += x * y
					as += math.Abs(x * y)
				}
				out[bi*m*n+i*n+j], absSum[bi*m*n+i*n+j] = s, as
			}
		}
	}
	return out, absSum
}

func TestMatMulAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		batch, m, n, k int
		bBatched       bool
	}{{1, 3, 5, 4, false}, {2, 3, 5, 4, true}, {4, 7, 9, 33, false}, {3, 300, 70, 300, true}, {1, 1, 1, 1, false}} {
		for _, acc64 := range []bool{false, true} {
			name := fmt.Sprintf("%dx%dx%dx%d/b%v/acc64=%v", tc.batch, tc.m, tc.n, tc.k, tc.bBatched, acc64)
			t.Run(name, func(t *testing.T) {
				a := randF32(rng, tc.batch, tc.m, tc.k)
				bs := []int{tc.k, tc.n}
				if tc.bBatched {
					bs = []int{tc.batch, tc.k, tc.n}
				}
				b := randF32(rng, bs...)
				got, err := matmulNumpy(&Call{opts: &Options{Accumulate64: acc64}}, a, b, 1, false, false)
				if err != nil {
					t.Fatal(err)
				}
				want, abs := refMatMul(a.Float64s(), b.Float64s(), tc.batch, tc.m, tc.n, tc.k, tc.bBatched)
				// float32 accumulation: |err| <= k * 2^-24 * sum|a*b| (plus
				// the final rounding); with float64 accumulation only the
				// final rounding remains.
				g := got.Float64s()
				for i := range want {
					tol := float64(tc.k+1) * 0x1p-24 * abs[i]
					if acc64 {
						tol = 0x1p-24*math.Abs(want[i]) + 1e-30
					}
					if !(math.Abs(g[i]-want[i]) <= tol) {
						t.Fatalf("element %d: got %v, want %v (tol %.3g)", i, g[i], want[i], tol)
					}
				}
			})
		}
	}
}

func TestMatMulNumpyRanks(t *testing.T) {
	a := FromSlice([]int{3}, []float32{1, 2, 3})
	b := FromSlice([]int{3, 2}, []float32{1, 2, 3, 4, 5, 6})
	o := mustOp(t, "", "MatMul", 17, nil, a, b)
	if !equalShape(o.Shape, []int{2}) || Data[float32](o)[0] != 22 || Data[float32](o)[1] != 28 {
		t.Fatalf("vector @ matrix = %v %v", o, Data[float32](o))
	}
	// broadcast batch: (2,1,2,3) @ (3,3,2) -> (2,3,2,2)
	rng := rand.New(rand.NewPCG(3, 4))
	x, y := randF32(rng, 2, 1, 2, 3), randF32(rng, 3, 3, 2)
	o = mustOp(t, "", "MatMul", 17, nil, x, y)
	if !equalShape(o.Shape, []int{2, 3, 2, 2}) {
		t.Fatalf("shape %v", o.Shape)
	}
	xd, yd, od := x.Float64s(), y.Float64s(), o.Float64s()
	for b0 := range 2 {
		for b1 := range 3 {
			for i := range 2 {
				for j := range 2 {
					var s float64
					for p := range 3 {
						s += xd[b0*6+i*3+p] * yd[b1*6+p*2+j]
					}
					if got := od[((b0*3+b1)*2+i)*2+j]; !(math.Abs(got-s) <= 1e-5) {
						t.Fatalf("[%d,%d,%d,%d] = %v, want %v", b0, b1, i, j, got, s)
					}
				}
			}
		}
	}
}

func TestSoftmaxAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, axis := range []int64{-1, 1, 0} {
		x := randF32(rng, 3, 4, 5)
		for i, v := range Data[float32](x) {
			Data[float32](x)[i] = v * 10
		}
		o := mustOp(t, "", "Softmax", 13, []*graph.Attr{graph.IntAttr("axis", axis)}, x)
		a, _ := normAxis(axis, 3)
		outer, d, inner := shapeSize(x.Shape[:a]), x.Shape[a], shapeSize(x.Shape[a+1:])
		xs, os := x.Float64s(), o.Float64s()
		for p := range outer {
			for q := range inner {
				m := math.Inf(-1)
				for j := range d {
					m = math.Max(m, xs[(p*d+j)*inner+q])
				}
				var s float64
				for j := range d {
					s += math.Exp(xs[(p*d+j)*inner+q] - m)
				}
				for j := range d {
					idx := (p*d+j)*inner + q
					want := math.Exp(xs[idx]-m) / s
					// a few float32 roundings: 4 ulps relative
					if !(math.Abs(os[idx]-want) <= 4*0x1p-24*want+1e-30) {
						t.Fatalf("axis %d: element %d got %v want %v", axis, idx, os[idx], want)
					}
				}
			}
		}
	}
}

func TestSoftmaxOpset11Flattens(t *testing.T) {
	x := FromSlice([]int{2, 2}, []float32{0, 0, 0, 0})
	o := mustOp(t, "", "Softmax", 11, []*graph.Attr{graph.IntAttr("axis", 0)}, x)
	if !equalShape(o.Shape, []int{2, 2}) || o.DType != graph.Float {
		t.Fatalf("got %v, want float32[2,2]", o)
	}
	for _, v := range Data[float32](o) {
		if v != 0.25 {
			t.Fatalf("opset 11 axis 0 must normalise over all 4 elements: %v", Data[float32](o))
		}
	}
}

// refEinsum evaluates an explicit equation without ellipsis by brute force.
func refEinsum(eq string, ins []*Tensor) ([]float64, []int) {
	lhs, rhs, _ := strings.Cut(eq, "->")
	terms := strings.Split(lhs, ",")
	size := map[byte]int{}
	var letters []byte
	for i, term := range terms {
		for j := range len(term) {
			if _, ok := size[term[j]]; !ok {
				letters = append(letters, term[j])
			}
			size[term[j]] = max(size[term[j]], ins[i].Shape[j])
		}
	}
	var oshape []int
	for j := range len(rhs) {
		oshape = append(oshape, size[rhs[j]])
	}
	out := make([]float64, shapeSize(oshape))
	vals := make([][]float64, len(ins))
	for i, x := range ins {
		vals[i] = x.Float64s()
	}
	idx := map[byte]int{}
	var rec func(int)
	rec = func(l int) {
		if l == len(letters) {
			p := 1.0
			for i, term := range terms {
				off := 0
				for j := range len(term) {
					c := idx[term[j]]
					if ins[i].Shape[j] == 1 {
						c = 0
					}
					off = off*ins[i].Shape[j] + c
				}
				p *= vals[i][off]
			}
			o := 0
			for j := range len(rhs) {
				o = o*oshape[j] + idx[rhs[j]]
			}
			out[o] += p
			return
		}
		for v := range size[letters[l]] {
			idx[letters[l]] = v
			rec(l + 1)
		}
	}
	rec(0)
	return out, oshape
}

func TestEinsumAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		eq     string
		shapes [][]int
	}{
		{"ij,jk->ik", [][]int{{3, 4}, {4, 5}}},
		{"bij,bjk->bik", [][]int{{2, 3, 4}, {2, 4, 5}}},
		{"bhqd,bhkd->bhqk", [][]int{{2, 3, 4, 5}, {2, 3, 6, 5}}},
		{"ii->i", [][]int{{4, 4}}},
		{"ii->", [][]int{{4, 4}}},
		{"ij->ji", [][]int{{3, 4}}},
		{"ij->", [][]int{{3, 4}}},
		{"i,j->ij", [][]int{{3}, {4}}},
		{"i,i->", [][]int{{5}, {5}}},
		{"bij,jk,bkl->bil", [][]int{{2, 3, 4}, {4, 5}, {2, 5, 2}}},
		{"abc,cd->abd", [][]int{{2, 1, 3}, {3, 4}}},
		{"ijk,ik->j", [][]int{{2, 3, 4}, {2, 4}}},
		{"iij->j", [][]int{{3, 3, 2}}},
	} {
		t.Run(tc.eq, func(t *testing.T) {
			var ins []*Tensor
			for _, s := range tc.shapes {
				ins = append(ins, randF32(rng, s...))
			}
			o := mustOp(t, "", "Einsum", 12, []*graph.Attr{graph.StringAttr("equation", tc.eq)}, ins...)
			want, shape := refEinsum(tc.eq, ins)
			if !equalShape(o.Shape, shape) {
				t.Fatalf("shape %v, want %v", o.Shape, shape)
			}
			for i, g := range o.Float64s() {
				if !(math.Abs(g-want[i]) <= 1e-5*(1+math.Abs(want[i]))) {
					t.Fatalf("element %d: got %v want %v", i, g, want[i])
				}
			}
		})
	}
	// ellipsis with broadcasting: "...ij,...jk->...ik" over (2,1,3,4) and (5,4,2)
	a, b := randF32(rng, 2, 1, 3, 4), randF32(rng, 5, 4, 2)
	o := mustOp(t, "", "Einsum", 12, []*graph.Attr{graph.StringAttr("equation", "...ij,...jk->...ik")}, a, b)
	m, err := matmulNumpy(nil, a, b, 1, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if msg := compareTensors(o, m, 1e-5, 1e-6); msg != "" {
		t.Fatal("ellipsis einsum vs MatMul:", msg)
	}
}

func TestCastRounding(t *testing.T) {
	// Each case rounds once: no double rounding through float32 (a value
	// just above a tie of the half type must round up).
	for _, tc := range []struct {
		name string
		in   *Tensor
		to   graph.DataType
		want []float32
	}{
		// float64 -> float16: ties go to even; 1 + 2^-11 + 2^-40 is just
		// above a tie.
		{"double->float16", FromSlice([]int{4}, []float64{1 + 0x1p-11, 1 + 3*0x1p-11, 1 + 0x1p-11 + 0x1p-40, 65520}),
			graph.Float16, []float32{1, 1 + 4*0x1p-11, 1 + 2*0x1p-11, float32(math.Inf(1))}},
		// float32 -> bfloat16: round to nearest even.
		{"float->bfloat16", FromSlice([]int{2}, []float32{1 + 0x1p-8, 1 + 3*0x1p-8}),
			graph.BFloat16, []float32{1, 1 + 4*0x1p-8}},
		// float64 -> bfloat16: 1 + 2^-8 + 2^-40 is just above a tie.
		{"double->bfloat16", FromSlice([]int{4}, []float64{1 + 0x1p-8, 1 + 0x1p-8 + 0x1p-40, -(1 + 0x1p-8 + 0x1p-40), 1 + 3*0x1p-8}),
			graph.BFloat16, []float32{1, 1.0078125, -1.0078125, 1 + 4*0x1p-8}},
		// int64 -> bfloat16: 2^24 + 2^16 + 1 is just above the tie
		// 2^24 + 2^16 (float32 would round it to the tie first, and
		// float64 does the same to 2^62 + 2^54 + 1).
		{"int64->bfloat16", FromSlice([]int{5}, []int64{16842753, 16842752, -16842753, 16908289, 1<<62 + 1<<54 + 1}),
			graph.BFloat16, []float32{16908288, 16777216, -16908288, 16908288, 0x1p62 + 0x1p55}},
		// int64 -> float16: 2049 and 2051 are ties (to even), 2^40
		// overflows.
		{"int64->float16", FromSlice([]int{3}, []int64{2049, 2051, 1 << 40}),
			graph.Float16, []float32{2048, 2052, float32(math.Inf(1))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := mustOp(t, "", "Cast", 19, []*graph.Attr{graph.IntAttr("to", int64(tc.to))}, tc.in)
			if o.DType != tc.to || !equalShape(o.Shape, tc.in.Shape) {
				t.Fatalf("got %v, want %v%v", o, tc.to, tc.in.Shape)
			}
			for i, v := range o.Float64s() {
				if v != float64(tc.want[i]) {
					t.Errorf("element %d: got %v want %v", i, v, tc.want[i])
				}
			}
		})
	}
	// float -> int truncates toward zero; int -> bool is nonzero.
	o := mustOp(t, "", "Cast", 19, []*graph.Attr{graph.IntAttr("to", int64(graph.Int32))}, FromSlice([]int{2}, []float32{-2.7, 2.7}))
	if d := Data[int32](o); len(d) != 2 || d[0] != -2 || d[1] != 2 {
		t.Errorf("float->int32: %v", d)
	}
}

func TestHalfComputedInFloat32AndRoundedOnce(t *testing.T) {
	one := float16.Fromfloat32(1)
	tiny := float16.Fromfloat32(0x1p-11) // half an ulp of 1
	a := FromSlice([]int{1}, []float16.Float16{one})
	b := FromSlice([]int{1}, []float16.Float16{tiny})
	// (1 + 2^-11) + 2^-11 in float32 is 1 + 2^-10, which float16 holds;
	// rounding after each Add would give 1.
	m := graph.NewModel(9, "t", graph.Opset{Version: 17})
	g := m.Graph
	x := g.AddInput("a", graph.TensorType(graph.Float16, nil))
	y := g.AddInput("b", graph.TensorType(graph.Float16, nil))
	s := g.Op("Sum", []*graph.Value{x, y, y}, 1)[0]
	g.AddOutput(s)
	sess, err := NewSession(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.Run(map[string]*Tensor{"a": a, "b": b})
	if err != nil {
		t.Fatal(err)
	}
	r := out[s.Name]
	if r.DType != graph.Float16 {
		t.Fatalf("type %v", r.DType)
	}
	// Sum is one op: 1 + 2^-11 + 2^-11 = 1 + 2^-10 exactly.
	if got := Data[float16.Float16](r)[0].Float32(); got != 1+0x1p-10 {
		t.Fatalf("got %v, want %v", got, 1+0x1p-10)
	}
}

func TestRelativePositionBiasBuckets(t *testing.T) {
	// Hugging Face T5, 32 buckets, max_distance 128, bidirectional.
	for _, tc := range []struct{ rel, want int64 }{{0, 0}, {1, 17}, {-1, 1}, {7, 23}, {-8, 8}, {20, 26}, {-20, 10}, {200, 31}, {-200, 15}} {
		if got := T5Bucket(tc.rel, 32, 128, true); got != tc.want {
			t.Errorf("bidirectional bucket(%d) = %d, want %d", tc.rel, got, tc.want)
		}
	}
	// unidirectional (decoder): positive offsets all map to 0.
	for _, tc := range []struct{ rel, want int64 }{{5, 0}, {-5, 5}, {-20, 17}, {-1000, 31}} {
		if got := T5Bucket(tc.rel, 32, 128, false); got != tc.want {
			t.Errorf("causal bucket(%d) = %d, want %d", tc.rel, got, tc.want)
		}
	}
	table := make([]float32, 32*2)
	for i := range table {
		table[i] = float32(i)
	}
	o := mustOp(t, DomainMicrosoft, "RelativePositionBias", 17,
		[]*graph.Attr{graph.IntAttr("max_distance", 128), graph.IntAttr("is_bidirectional", 1)},
		FromSlice([]int{32, 2}, table), Scalar(int64(3)), Scalar(int64(4)))
	if !equalShape(o.Shape, []int{1, 2, 3, 4}) {
		t.Fatalf("shape %v", o.Shape)
	}
	// head 1, i=2, j=0: rel -2 -> bucket 2 -> table[2*2+1] = 5
	if got := Data[float32](o)[(1*3+2)*4+0]; got != 5 {
		t.Fatalf("bias[1,2,0] = %v, want 5", got)
	}
}

func TestALiBiBias(t *testing.T) {
	slopes := FromSlice([]int{2}, []float32{0.5, 0.25})
	o := mustOp(t, DomainOnnxpe, "ALiBiBias", 17, nil, slopes, Scalar(int64(2)), Scalar(int64(3)))
	want := []float32{-1, -0.5, 0, -1, -0.5, 0, -0.5, -0.25, 0, -0.5, -0.25, 0}
	if !equalShape(o.Shape, []int{1, 2, 2, 3}) || o.DType != graph.Float {
		t.Fatalf("causal: got %v, want float32[1,2,2,3]", o)
	}
	for i, v := range Data[float32](o) {
		if v != want[i] {
			t.Fatalf("causal: %v, want %v", Data[float32](o), want)
		}
	}
	o = mustOp(t, DomainOnnxpe, "ALiBiBias", 17, []*graph.Attr{graph.IntAttr("symmetric", 1)}, slopes, Scalar(int64(2)), Scalar(int64(3)))
	// queries at positions 1 and 2
	want = []float32{-0.5, 0, -0.5, -1, -0.5, 0, -0.25, 0, -0.25, -0.5, -0.25, 0}
	if !equalShape(o.Shape, []int{1, 2, 2, 3}) || o.DType != graph.Float {
		t.Fatalf("symmetric: got %v, want float32[1,2,2,3]", o)
	}
	for i, v := range Data[float32](o) {
		if v != want[i] {
			t.Fatalf("symmetric: %v, want %v", Data[float32](o), want)
		}
	}
}

func TestNodeErrorNamesNodeOpAndShapes(t *testing.T) {
	_, err := runOp(t, "", "MatMul", 17, 1, nil, New(graph.Float, 2, 3), New(graph.Float, 4, 5))
	if err == nil {
		t.Fatal("no error")
	}
	for _, s := range []string{"MatMul", "float32[2,3]", "float32[4,5]"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	var ne *NodeError
	if !asNodeError(err, &ne) || ne.Op != "MatMul" {
		t.Errorf("error %v is not a NodeError for MatMul", err)
	}
}

func TestUnsupportedOpFailsAtSessionCreation(t *testing.T) {
	_, err := runOp(t, "", "NoSuchOp", 17, 1, nil, New(graph.Float, 1))
	if err == nil || !strings.Contains(err.Error(), "NoSuchOp") {
		t.Fatalf("err = %v", err)
	}
}

func TestLoopAndIf(t *testing.T) {
	// Loop 5 times: acc += i; then If(acc > 5) acc*2 else acc.
	m := graph.NewModel(9, "t", graph.Opset{Version: 17})
	g := m.Graph
	trip := g.AddInitializer(mustTensor(graph.NewTensor("trip", graph.Int64, nil, []int64{5})))
	acc0 := g.AddInput("acc0", graph.TensorType(graph.Int64, nil))
	body := g.NewSubgraph("body")
	iv := body.AddInput("i", graph.TensorType(graph.Int64, nil))
	cv := body.AddInput("c", graph.TensorType(graph.Bool, nil))
	av := body.AddInput("a", graph.TensorType(graph.Int64, nil))
	sum := body.Op("Add", []*graph.Value{av, iv}, 1)[0]
	cc := body.Op("Identity", []*graph.Value{cv}, 1)[0]
	sq := body.Op("Mul", []*graph.Value{iv, iv}, 1)[0] // scan output
	body.AddOutput(cc)
	body.AddOutput(sum)
	body.AddOutput(sq)
	loop := g.NewNode("Loop", "", []*graph.Value{trip, nil, acc0}, 2, graph.GraphAttr("body", body))
	g.Append(loop)
	five := g.AddInitializer(mustTensor(graph.NewTensor("five", graph.Int64, nil, []int64{5})))
	cond := g.Op("Greater", []*graph.Value{loop.Output(0), five}, 1)[0]
	then := g.NewSubgraph("then")
	then.AddOutput(then.Op("Add", []*graph.Value{loop.Output(0), loop.Output(0)}, 1)[0])
	els := g.NewSubgraph("else")
	els.AddOutput(els.Op("Identity", []*graph.Value{loop.Output(0)}, 1)[0])
	ifn := g.NewNode("If", "", []*graph.Value{cond}, 1, graph.GraphAttr("then_branch", then), graph.GraphAttr("else_branch", els))
	g.Append(ifn)
	g.AddOutput(ifn.Output(0))
	g.AddOutput(loop.Output(1))
	s, err := NewSession(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Run(map[string]*Tensor{"acc0": Scalar(int64(1))})
	if err != nil {
		t.Fatal(err)
	}
	if got := Data[int64](out[ifn.Output(0).Name])[0]; got != 22 {
		t.Errorf("if(loop) = %d, want 22", got)
	}
	if got := Data[int64](out[loop.Output(1).Name]); fmt.Sprint(got) != "[0 1 4 9 16]" {
		t.Errorf("scan output %v", got)
	}
}

func TestModelLocalFunction(t *testing.T) {
	m := graph.NewModel(9, "t", graph.Opset{Version: 17}, graph.Opset{Domain: "local", Version: 1})
	f := m.AddFunction("local", "AddMul")
	fx := f.Body.AddInput("x", nil)
	fy := f.Body.AddInput("y", nil)
	s := f.Body.Op("Add", []*graph.Value{fx, fy}, 1)[0]
	f.Body.AddOutput(f.Body.Op("Mul", []*graph.Value{s, fy}, 1)[0])
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, nil))
	y := g.AddInput("y", graph.TensorType(graph.Float, nil))
	call := g.NewNode("AddMul", "local", []*graph.Value{x, y}, 1)
	g.Append(call)
	g.AddOutput(call.Output(0))
	sess, err := NewSession(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.Run(map[string]*Tensor{x.Name: Scalar(float32(2)), y.Name: Scalar(float32(3))})
	if err != nil {
		t.Fatal(err)
	}
	if got := Data[float32](out[call.Output(0).Name])[0]; got != 15 {
		t.Fatalf("(2+3)*3 = %v", got)
	}
}

func TestIntermediatesFreedAfterLastUse(t *testing.T) {
	m, _ := transformerModel(16, 2, 8, 1)
	s, err := NewSession(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	e := newEnv(s.main, nil)
	e.vals[s.main.slots[m.Graph.Inputs[0]]] = randF32(rng, 8, 16)
	if err := s.exec(s.main, e); err != nil {
		t.Fatal(err)
	}
	for v, sl := range s.main.slots {
		if e.vals[sl] != nil && !v.IsGraphOutput() && !v.IsGraphInput() {
			t.Errorf("value %q is still held after the run", v.Name)
		}
	}
}

func TestAccumulate64(t *testing.T) {
	// Summing 2^24 + 2 ones in float32 gets stuck at 2^24; float64
	// accumulation does not.
	n := 1<<24 + 2
	d := make([]float32, n)
	for i := range d {
		d[i] = 1
	}
	x := FromSlice([]int{n}, d)
	plain := reduceT[float32](&Call{opts: &Options{}}, redSum, x, []int{0}, false)
	acc := reduceT[float32](&Call{opts: &Options{Accumulate64: true}}, redSum, x, []int{0}, false)
	if Data[float32](acc)[0] != float32(n) || Data[float32](plain)[0] == float32(n) {
		t.Fatalf("acc64 %v, plain %v, want %v", Data[float32](acc)[0], Data[float32](plain)[0], n)
	}
}

func mustTensor(t *graph.Tensor, err error) *graph.Tensor {
	if err != nil {
		panic(err)
	}
	return t
}

func asNodeError(err error, target **NodeError) bool {
	for err != nil {
		if ne, ok := err.(*NodeError); ok {
			*target = ne
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

func TestGeluOpset20(t *testing.T) {
	x := FromSlice([]int{5}, []float32{-3, -0.5, 0, 0.7, 2.5})
	for _, tc := range []struct {
		approx string
		f      func(float64) float64
	}{
		{"none", func(v float64) float64 { return v * 0.5 * math.Erfc(-v/math.Sqrt2) }},
		{"tanh", func(v float64) float64 {
			return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*math.Pow(v, 3))))
		}},
	} {
		o := mustOp(t, "", "Gelu", 20, []*graph.Attr{graph.StringAttr("approximate", tc.approx)}, x)
		for i, v := range x.Float64s() {
			want := tc.f(v)
			if got := o.Float64s()[i]; !(math.Abs(got-want) <= 2*0x1p-24*math.Abs(want)+1e-12) {
				t.Errorf("%s: gelu(%v) = %v, want %v", tc.approx, v, got, want)
			}
		}
	}
}

// TestLogSoftmaxAgainstReference checks LogSoftmax (the contiguous fast
// path for the last axis, the general one for others) against float64
// math.Exp and math.Log: within 1 ulp of the correctly rounded result.
func TestLogSoftmaxAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		shape []int
		axis  int64
	}{{[]int{3, 4, 5}, -1}, {[]int{3, 4, 5}, 1}, {[]int{2, 12, 64}, -1}, {[]int{2, 300}, -1}, {[]int{5, 9}, 0}} {
		x := randF32(rng, tc.shape...)
		for i, v := range Data[float32](x) {
			Data[float32](x)[i] = v * 10
		}
		o := mustOp(t, "", "LogSoftmax", 13, []*graph.Attr{graph.IntAttr("axis", tc.axis)}, x)
		a, _ := normAxis(tc.axis, len(tc.shape))
		outer, d, inner := shapeSize(x.Shape[:a]), x.Shape[a], shapeSize(x.Shape[a+1:])
		xs, os := x.Float64s(), Data[float32](o)
		for p := range outer {
			for q := range inner {
				m := math.Inf(-1)
				for j := range d {
					m = math.Max(m, xs[(p*d+j)*inner+q])
				}
				var s float64
				for j := range d {
					s += math.Exp(xs[(p*d+j)*inner+q] - m)
				}
				for j := range d {
					idx := (p*d+j)*inner + q
					want := xs[idx] - m - math.Log(s)
					if d := ulpDiff(os[idx], want); d > 1 {
						t.Fatalf("%v axis %d: element %d got %v want %v (%d ulp)", tc.shape, tc.axis, idx, os[idx], want, d)
					}
				}
			}
		}
	}
}

// TestSoftmaxShortRowsBits: softmax over short rows computes several rows
// per expN call; the results must have the bits of the row-at-a-time
// computation (softmaxT-free rows done one per call, and the -Inf/+Inf
// rows that take the general path), for softmax and log-softmax.
func TestSoftmaxShortRowsBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, d := range []int{1, 2, 7, 8, 12, 16, 17, 31, 64, 100, 128, 129} {
		rows := 3*vecChunk/d + 5
		x := make([]float32, rows*d)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 8)
		}
		x[min(2*d, len(x)-1)] = float32(math.Inf(1))
		for j := range d { // a fully masked row
			x[min(4, rows-1)*d+j] = float32(math.Inf(-1))
		}
		x[min(6, rows-1)*d] = float32(math.NaN())
		for _, log := range []bool{false, true} {
			got, want := make([]float32, len(x)), make([]float32, len(x))
			softmaxFast32(got, x, 0, rows, d, log)
			for r := range rows {
				// One row a call: one expN call of d elements, as before
				// rows were grouped.
				y, xr := want[r*d:r*d+d], x[r*d:r*d+d]
				m := rowMax(xr)
				if math.IsInf(float64(m), 0) {
					softmaxT(y, xr, 1, d, 1, log)
					continue
				}
				b := make([]float64, d)
				for j, v := range xr {
					b[j] = float64(v) - float64(m)
				}
				expN(b, b)
				var s float64
				for _, e := range b {
					s += e
				}
				for j, v := range xr {
					if log {
						y[j] = float32(float64(v) - float64(m) - math.Log(s))
					} else {
						y[j] = float32(b[j]) * float32(1/s)
					}
				}
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("d=%d log=%t: element %d = %v, want %v (same bits)", d, log, i, got[i], want[i])
				}
			}
		}
	}
}
