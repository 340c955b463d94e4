package kernels

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
)

// Regression tests of defects found in review: each failed (or crashed
// the process) before its fix.

func f16s(v ...float32) *Tensor {
	d := make([]float16.Float16, len(v))
	for i, x := range v {
		d[i] = float16.Fromfloat32(x)
	}
	return FromSlice([]int{len(v)}, d)
}

// TestOpErrors: inputs and attributes a model can get wrong fail the
// node with an error naming it, instead of panicking or allocating
// without bound.
func TestOpErrors(t *testing.T) {
	i64 := func(shape []int, v ...int64) *Tensor { return FromSlice(shape, v) }
	f32 := func(shape []int, v ...float32) *Tensor { return FromSlice(shape, v) }
	x4 := f32([]int{1, 1, 2, 2}, 1, 2, 3, 4)
	w1 := f32([]int{1, 1, 1, 1}, 1)
	for _, tc := range []struct {
		name  string
		op    string
		opset int64
		attrs []*graph.Attr
		ins   []*Tensor
		want  string // in the error
		is    error  // wrapped by the error, when set
	}{
		{"Range delta 0 int", "Range", 11, nil, []*Tensor{Scalar(int64(0)), Scalar(int64(5)), Scalar(int64(0))}, "delta is 0", nil},
		{"Range delta 0 float", "Range", 11, nil, []*Tensor{Scalar(float32(0)), Scalar(float32(5)), Scalar(float32(0))}, "delta is 0", nil},
		{"Range too long", "Range", 11, nil, []*Tensor{Scalar(int64(0)), Scalar(int64(1 << 62)), Scalar(int64(1))}, "", ErrTooLarge},
		{"Range NaN", "Range", 11, nil, []*Tensor{Scalar(float32(0)), Scalar(float32(math.NaN())), Scalar(float32(1))}, "", ErrTooLarge},
		{"Div int64 by 0", "Div", 14, nil, []*Tensor{i64([]int{2}, 1, 2), i64([]int{2}, 1, 0)}, "division by zero", nil},
		{"Div int32 by 0", "Div", 14, nil, []*Tensor{FromSlice([]int{1}, []int32{1}), FromSlice([]int{1}, []int32{0})}, "division by zero", nil},
		{"Mod uint8 by 0", "Mod", 13, nil, []*Tensor{FromSlice([]int{1}, []uint8{1}), FromSlice([]int{1}, []uint8{0})}, "division by zero", nil},
		{"fmod int8 by 0", "Mod", 13, []*graph.Attr{graph.IntAttr("fmod", 1)}, []*Tensor{FromSlice([]int{1}, []int8{1}), FromSlice([]int{1}, []int8{0})}, "division by zero", nil},
		{"Clip empty min", "Clip", 13, nil, []*Tensor{f32([]int{2}, 1, 2), f32([]int{0})}, "min must be", nil},
		{"Clip empty max", "Clip", 13, nil, []*Tensor{f32([]int{2}, 1, 2), nil, f32([]int{0})}, "max must be", nil},
		{"Conv strides 0", "Conv", 11, []*graph.Attr{graph.IntsAttr("strides", 0, 1)}, []*Tensor{x4, w1}, "strides", nil},
		{"Conv dilations 0", "Conv", 11, []*graph.Attr{graph.IntsAttr("dilations", 1, 0)}, []*Tensor{x4, w1}, "dilations", nil},
		{"Conv negative pads", "Conv", 11, []*graph.Attr{graph.IntsAttr("pads", 0, -1, 0, 0)}, []*Tensor{x4, w1}, "pads", nil},
		{"Conv short strides", "Conv", 11, []*graph.Attr{graph.IntsAttr("strides", 1)}, []*Tensor{x4, w1}, "strides", nil},
		{"Conv short pads", "Conv", 11, []*graph.Attr{graph.IntsAttr("pads", 0, 0)}, []*Tensor{x4, w1}, "pads", nil},
		{"Tile 2^40", "Tile", 13, nil, []*Tensor{f32([]int{2}, 1, 2), i64([]int{1}, 1<<40)}, "", ErrTooLarge},
		{"Tile overflow", "Tile", 13, nil, []*Tensor{f32([]int{2, 2}, 1, 2, 3, 4), i64([]int{2}, 1<<40, 1<<40)}, "", ErrTooLarge},
		{"Expand 2^40", "Expand", 13, nil, []*Tensor{f32([]int{1}, 1), i64([]int{2}, 1<<20, 1<<20)}, "", ErrTooLarge},
		{"Expand negative", "Expand", 13, nil, []*Tensor{f32([]int{1}, 1), i64([]int{1}, -2)}, "negative", nil},
		{"ConstantOfShape 2^40", "ConstantOfShape", 20, nil, []*Tensor{i64([]int{2}, 1<<20, 1<<20)}, "", ErrTooLarge},
		{"Pad 2^40", "Pad", 13, nil, []*Tensor{f32([]int{1}, 1), i64([]int{2}, 1<<40, 0)}, "", ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runOp(t, "", tc.op, tc.opset, 1, tc.attrs, tc.ins...)
			if err == nil {
				t.Fatal("no error")
			}
			var ne *NodeError
			if !errors.As(err, &ne) || ne.Op != tc.op {
				t.Errorf("error %v does not name the node and op %s", err, tc.op)
			}
			if !strings.Contains(err.Error(), tc.want) || tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q: want %q (wrapping %v)", err, tc.want, tc.is)
			}
			if errors.Is(err, ErrInternal) {
				t.Errorf("error %v is a kernel panic, want a checked error", err)
			}
		})
	}
}

func TestMaxTensorBytesOption(t *testing.T) {
	c := &Call{opts: &Options{MaxTensorBytes: 1000}}
	if err := c.checkSize(graph.Float, []int64{250}); err != nil {
		t.Errorf("250 floats: %v", err)
	}
	if err := c.checkSize(graph.Float, []int64{251}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("251 floats: %v", err)
	}
	if err := c.checkSize(graph.Float, []int64{1 << 62, 1 << 62, 0}); err != nil {
		t.Errorf("empty: %v", err)
	}
	if err := (*Call)(nil).checkSize(graph.Double, []int64{2<<30 + 1}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("default limit: %v", err)
	}
}

func TestEmptyShapes(t *testing.T) {
	empty := FromSlice([]int{0, 3, 4}, []float32{})
	for _, tc := range []struct {
		name  string
		op    string
		opset int64
		attrs []*graph.Attr
		ins   []*Tensor
		want  []int
	}{
		{"Flatten axis 1", "Flatten", 13, []*graph.Attr{graph.IntAttr("axis", 1)}, []*Tensor{empty}, []int{0, 12}},
		{"Flatten axis 2", "Flatten", 13, []*graph.Attr{graph.IntAttr("axis", 2)}, []*Tensor{empty}, []int{0, 4}},
		{"Flatten axis 0", "Flatten", 13, []*graph.Attr{graph.IntAttr("axis", 0)}, []*Tensor{empty}, []int{1, 0}},
		{"Slice negative step of an empty axis", "Slice", 13, nil, []*Tensor{empty,
			FromSlice([]int{1}, []int64{-1}), FromSlice([]int{1}, []int64{math.MinInt64}),
			FromSlice([]int{1}, []int64{0}), FromSlice([]int{1}, []int64{-1})}, []int{0, 3, 4}},
		{"Slice huge step", "Slice", 13, nil, []*Tensor{FromSlice([]int{3}, []float32{1, 2, 3}),
			FromSlice([]int{1}, []int64{0}), FromSlice([]int{1}, []int64{3}),
			FromSlice([]int{1}, []int64{0}), FromSlice([]int{1}, []int64{math.MaxInt64})}, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := mustOp(t, "", tc.op, tc.opset, tc.attrs, tc.ins...)
			if !equalShape(o.Shape, tc.want) {
				t.Errorf("got shape %v, want %v", o.Shape, tc.want)
			}
		})
	}
}

// TestHalfOutputType: the executor rounds a non-Native kernel's float32
// outputs to the half type of the op's T, not to that of any input.
func TestHalfOutputType(t *testing.T) {
	x32 := FromSlice([]int{2}, []float32{2, 3})
	cond := FromSlice([]int{2}, []bool{true, false})
	outs, err := runOp(t, "", "Pow", 15, 1, nil, x32, f16s(2, 2))
	if err != nil {
		t.Fatal(err)
	}
	if o := outs[0]; o.DType != graph.Float || o.Float64s()[1] != 9 {
		t.Errorf("Pow(float32, float16) = %v %v, want float32 [4 9]", o, o.Float64s())
	}
	outs, err = runOp(t, "", "Pow", 15, 1, nil, f16s(2, 3), x32)
	if err != nil {
		t.Fatal(err)
	}
	if o := outs[0]; o.DType != graph.Float16 {
		t.Errorf("Pow(float16, float32) = %v, want float16", o)
	}
	outs, err = runOp(t, "", "Where", 16, 1, nil, cond, f16s(1, 2), f16s(3, 4))
	if err != nil {
		t.Fatal(err)
	}
	if o := outs[0]; o.DType != graph.Float16 || o.Float64s()[1] != 4 {
		t.Errorf("Where(bool, float16, float16) = %v, want float16 [1 4]", o)
	}
	// LayerNormalization of float16: Y float16, Mean and InvStdDev U =
	// float32 (stash_type 1); of float64: Y float64, Mean float32.
	for _, x := range []*Tensor{FromSlice([]int{1, 2}, []float16.Float16{float16.Fromfloat32(1), float16.Fromfloat32(3)}),
		FromSlice([]int{1, 2}, []float64{1, 3})} {
		outs, err = runOp(t, "", "LayerNormalization", 17, 3, nil, x, castTensor(FromSlice([]int{2}, []float32{1, 1}), x.DType))
		if err != nil {
			t.Fatal(err)
		}
		if outs[0].DType != x.DType || outs[1].DType != graph.Float || outs[2].DType != graph.Float {
			t.Errorf("LayerNormalization(%v) = %v, %v, %v; want %v, float32, float32", x, outs[0], outs[1], outs[2], x.DType)
		}
		if m := outs[1].Float64s(); len(m) != 1 || m[0] != 2 {
			t.Errorf("mean %v, want [2]", m)
		}
	}
}

// TestFloat64KernelRoundsOnceToHalf: a kernel computing in float64 whose
// float32 output the executor rounds to float16 rounds once.
func TestFloat64KernelRoundsOnceToHalf(t *testing.T) {
	v := 1 + 0x1p-11 + 0x1p-40 // just above a float16 tie
	k := floatUnary(func(float64) float64 { return v })
	for _, tc := range []struct {
		half graph.DataType
		want float64
	}{{graph.Float16, 1 + 0x1p-10}, {graph.BFloat16, 1}} {
		c := &Call{half: tc.half}
		outs, err := k(c, []*Tensor{FromSlice([]int{1}, []float32{0})})
		if err != nil {
			t.Fatal(err)
		}
		if got := castTensor(outs[0], tc.half).Float64s()[0]; got != tc.want {
			t.Errorf("%v: got %v, want %v", tc.half, got, tc.want)
		}
	}
}

// TestALiBiBiasRoundsOnce: bfloat16 slopes; slope*(j-(k-1)) is computed
// in float64 and rounded once (through float32 it would round to a tie
// first and then to even).
func TestALiBiBiasRoundsOnce(t *testing.T) {
	// slope 1 + 2^-7 at distance 2^17+... : search a small case whose
	// double rounding differs, so the test is about what it says.
	slope := graph.BF16FromFloat32(1 + 0x1p-7)
	var k int64
	for d := int64(1 << 16); d < 1<<20 && k == 0; d++ {
		exact := float64(slope.Float32()) * float64(-d)
		if graph.BF16FromFloat32(float32(exact)) != graph.BF16FromFloat32(roundTo32For16(exact)) {
			k = d + 1
		}
	}
	if k == 0 {
		t.Fatal("no double-rounding case found")
	}
	outs, err := runOp(t, DomainOnnxpe, "ALiBiBias", 17, 1, nil,
		FromSlice([]int{1}, []graph.BF16{slope}), Scalar(int64(1)), Scalar(int64(k)))
	if err != nil {
		t.Fatal(err)
	}
	o := outs[0]
	if !equalShape(o.Shape, []int{1, 1, 1, int(k)}) {
		t.Fatalf("shape %v", o.Shape)
	}
	exact := float64(slope.Float32()) * float64(-(k - 1))
	want := graph.BF16FromFloat32(roundTo32For16(exact))
	if got := Data[graph.BF16](o)[0]; got != want {
		t.Errorf("bias[0] = %v, want %v (exact %v)", got.Float32(), want.Float32(), exact)
	}
}

func TestRelativePositionBiasBucketChecks(t *testing.T) {
	table := func(nb int) *Tensor { return New(graph.Float, nb, 2) }
	for _, tc := range []struct {
		nb      int
		maxDist int64
		bi      int64
		ok      bool
	}{
		{1, 128, 0, false}, {2, 128, 0, true}, {3, 128, 1, false}, {4, 128, 1, true},
		{32, 16, 0, false}, {32, 17, 0, true}, {32, 8, 1, false}, {32, 9, 1, true}, {32, 0, 0, false},
	} {
		attrs := []*graph.Attr{graph.IntAttr("max_distance", tc.maxDist), graph.IntAttr("is_bidirectional", tc.bi)}
		outs, err := runOp(t, DomainMicrosoft, "RelativePositionBias", 1, 1, attrs, table(tc.nb), Scalar(int64(5)), Scalar(int64(40)))
		if tc.ok != (err == nil) {
			t.Errorf("num_buckets %d max_distance %d bidirectional %d: error %v, want ok=%v", tc.nb, tc.maxDist, tc.bi, err, tc.ok)
		}
		if err == nil && !equalShape(outs[0].Shape, []int{1, 2, 5, 40}) {
			t.Errorf("shape %v", outs[0].Shape)
		}
		if errors.Is(err, ErrInternal) {
			t.Errorf("kernel panic: %v", err)
		}
	}
}

func TestReduceEmptyInts(t *testing.T) {
	x := FromSlice([]int{2, 0}, []int64{})
	axes := FromSlice([]int{1}, []int64{1})
	for _, tc := range []struct {
		op   string
		want int64
	}{{"ReduceMax", math.MinInt64}, {"ReduceMin", math.MaxInt64}} {
		o := mustOp(t, "", tc.op, 18, nil, x, axes)
		if d := Data[int64](o); len(d) != 2 || d[0] != tc.want || d[1] != tc.want {
			t.Errorf("%s of nothing: %v, want %d", tc.op, d, tc.want)
		}
	}
	o := mustOp(t, "", "ReduceMax", 18, nil, FromSlice([]int{1, 0}, []uint8{}), axes)
	if d := Data[uint8](o); len(d) != 1 || d[0] != 0 {
		t.Errorf("uint8 ReduceMax of nothing: %v", d)
	}
	o = mustOp(t, "", "ReduceMin", 18, nil, FromSlice([]int{1, 0}, []int8{}), axes)
	if d := Data[int8](o); len(d) != 1 || d[0] != math.MaxInt8 {
		t.Errorf("int8 ReduceMin of nothing: %v", d)
	}
}

// TestReduceBool: ReduceMax and ReduceMin take bool from opset 20 (any and
// all); an empty reduction gives the type's bounds, false and true.
func TestReduceBool(t *testing.T) {
	x := FromSlice([]int{3, 2}, []bool{true, false, false, false, true, true})
	axes := FromSlice([]int{1}, []int64{1})
	for _, tc := range []struct {
		op   string
		want []bool
	}{{"ReduceMax", []bool{true, false, true}}, {"ReduceMin", []bool{false, false, true}}} {
		o := mustOp(t, "", tc.op, 20, nil, x, axes)
		if !equalShape(o.Shape, []int{3, 1}) || !slices.Equal(Data[bool](o), tc.want) {
			t.Errorf("%s: %v %v, want [3 1] %v", tc.op, o.Shape, Data[bool](o), tc.want)
		}
		e := mustOp(t, "", tc.op, 20, []*graph.Attr{graph.IntAttr("keepdims", 0)}, FromSlice([]int{2, 0}, []bool{}), axes)
		if d := Data[bool](e); !equalShape(e.Shape, []int{2}) || d[0] != (tc.op == "ReduceMin") || d[1] != d[0] {
			t.Errorf("%s of nothing: %v %v", tc.op, e.Shape, d)
		}
	}
	if _, err := runOp(t, "", "ReduceSum", 20, 1, nil, x, axes); !errors.Is(err, ErrUnsupportedType) {
		t.Errorf("ReduceSum of bool: %v, want an unsupported type", err)
	}
}

// TestLegacyBroadcast: before opset 7, Add and the other binary ops
// broadcast only with broadcast=1, lining B up with A from axis on (A's
// last dimensions by default); before opset 8, Max/Min/Sum/Mean take equal
// shapes.
func TestLegacyBroadcast(t *testing.T) {
	twos := make([]float32, 24)
	for i := range twos {
		twos[i] = 2
	}
	a := FromSlice([]int{2, 3, 4}, twos)
	b := FromSlice([]int{3}, []float32{1, 2, 3})
	bc := []*graph.Attr{graph.IntAttr("broadcast", 1), graph.IntAttr("axis", 1)}
	for _, op := range []string{"Add", "Mul", "Pow"} {
		o := mustOp(t, "", op, 6, bc, a, b)
		d := Data[float32](o)
		for i, v := range d {
			y := float32(1 + (i/4)%3) // B's element for A's axis-1 index
			want := 2 + y
			switch op {
			case "Mul":
				want = 2 * y
			case "Pow":
				want = float32(math.Pow(2, float64(y)))
			}
			if v != want {
				t.Fatalf("%s opset 6, axis 1: element %d is %v, want %v", op, i, v, want)
			}
		}
	}
	if o := mustOp(t, "", "Sub", 6, []*graph.Attr{graph.IntAttr("broadcast", 1)}, a, FromSlice([]int{4}, []float32{1, 2, 3, 4})); Data[float32](o)[5] != 0 {
		t.Errorf("Sub opset 6, default axis: %v", Data[float32](o))
	}
	for _, tc := range []struct {
		op    string
		opset int64
		attrs []*graph.Attr
		b     *Tensor
	}{
		{"Add", 6, nil, FromSlice([]int{4}, make([]float32, 4))},                                // broadcast 0: equal shapes only
		{"Add", 6, []*graph.Attr{graph.IntAttr("broadcast", 1)}, b},                             // [3] against the last dimension, 4
		{"Equal", 1, []*graph.Attr{graph.IntAttr("broadcast", 1), graph.IntAttr("axis", 2)}, b}, // [3] at axis 2 runs past A
		{"Max", 6, nil, FromSlice([]int{4}, make([]float32, 4))},
	} {
		if _, err := runOp(t, "", tc.op, tc.opset, 1, tc.attrs, a, tc.b); err == nil {
			t.Errorf("%s opset %d %v onto %v: no error", tc.op, tc.opset, tc.b.Shape, a.Shape)
		}
	}
	// From opset 7 (Max: 8) numpy broadcasting applies and the attributes are gone.
	if _, err := runOp(t, "", "Add", 7, 1, nil, a, FromSlice([]int{4}, make([]float32, 4))); err != nil {
		t.Errorf("Add opset 7: %v", err)
	}
}

// TestRecursiveFunction: a model-local function calling itself (directly
// or through another) is refused when the session is made.
func TestRecursiveFunction(t *testing.T) {
	for _, mutual := range []bool{false, true} {
		m := graph.NewModel(9, "t", graph.Opset{Version: 17}, graph.Opset{Domain: "local", Version: 1})
		f := m.AddFunction("local", "F")
		x := f.Body.AddInput("x", nil)
		callee := "F"
		if mutual {
			callee = "G"
			h := m.AddFunction("local", "G")
			hx := h.Body.AddInput("x", nil)
			n := h.Body.NewNode("F", "local", []*graph.Value{hx}, 1)
			h.Body.Append(n)
			h.Body.AddOutput(n.Output(0))
		}
		n := f.Body.NewNode(callee, "local", []*graph.Value{x}, 1)
		f.Body.Append(n)
		f.Body.AddOutput(n.Output(0))
		in := m.Graph.AddInput("in", graph.TensorType(graph.Float, nil))
		call := m.Graph.NewNode("F", "local", []*graph.Value{in}, 1)
		m.Graph.Append(call)
		m.Graph.AddOutput(call.Output(0))
		if _, err := NewSession(m, Options{}); err == nil || !strings.Contains(err.Error(), "calls itself") {
			t.Errorf("mutual=%v: error %v, want a recursion error", mutual, err)
		}
	}
}

func init() {
	// Kernels that panic, on the calling goroutine and on a worker of
	// parallelFor, for the tests of ErrInternal.
	Register("test.onnxpe", "Panic", 1, 0, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		var s []int
		_ = s[len(in)+3] // index out of range
		return nil, nil
	}, 0)
	Register("test.onnxpe", "WorkerPanic", 1, 0, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		parallelFor(&Call{opts: &Options{Threads: 4}}, 4, parallelMin*4, func(lo, hi int) {
			if lo > 0 {
				panic("worker\nfailed")
			}
		})
		return nil, nil
	}, 0)
}

// TestKernelPanicIsInternalError: a kernel panic, on the session's
// goroutine or on a worker, is a one-line error wrapping ErrInternal that
// names the node, op and input shapes (and does not end the process).
func TestKernelPanicIsInternalError(t *testing.T) {
	for _, op := range []string{"Panic", "WorkerPanic"} {
		_, err := runOp(t, "test.onnxpe", op, 17, 1, nil, f16s(1, 2))
		if !errors.Is(err, ErrInternal) {
			t.Fatalf("%s: error %v, want ErrInternal", op, err)
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || strings.Contains(msg, "goroutine") {
			t.Errorf("%s: error is not one line: %q", op, msg)
		}
		var ne *NodeError
		if !errors.As(err, &ne) || ne.Op != "test.onnxpe."+op || len(ne.Inputs) != 1 {
			t.Errorf("%s: error %v does not name the node", op, err)
		}
		// C16: the inputs as the model has them, not widened to float32.
		if ne != nil && len(ne.Inputs) == 1 && ne.Inputs[0] != "float16[2]" {
			t.Errorf("%s: inputs %v, want [float16[2]]", op, ne.Inputs)
		}
	}
}

func TestLoopIterationLimit(t *testing.T) {
	m := graph.NewModel(9, "t", graph.Opset{Version: 17})
	g := m.Graph
	trip := g.AddInitializer(mustTensor(graph.NewTensor("trip", graph.Int64, nil, []int64{math.MaxInt64})))
	cond := g.AddInitializer(mustTensor(graph.NewTensor("cond", graph.Bool, nil, []bool{true})))
	x := g.AddInput("x", graph.TensorType(graph.Int64, nil))
	body := g.NewSubgraph("body")
	body.AddInput("i", graph.TensorType(graph.Int64, nil))
	cv := body.AddInput("c", graph.TensorType(graph.Bool, nil))
	av := body.AddInput("a", graph.TensorType(graph.Int64, nil))
	body.AddOutput(body.Op("Identity", []*graph.Value{cv}, 1)[0])
	body.AddOutput(body.Op("Identity", []*graph.Value{av}, 1)[0])
	loop := g.NewNode("Loop", "", []*graph.Value{trip, cond, x}, 1, graph.GraphAttr("body", body))
	g.Append(loop)
	g.AddOutput(loop.Output(0))
	s, err := NewSession(m, Options{MaxLoopIterations: 1000})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Run(map[string]*Tensor{"x": Scalar(int64(1))})
	if err == nil || !strings.Contains(err.Error(), "more than 1000 iterations") {
		t.Errorf("error %v, want the iteration limit", err)
	}
}

func TestScanOfNothing(t *testing.T) {
	for _, axis := range []int64{0, 1} {
		m := graph.NewModel(9, "t", graph.Opset{Version: 17})
		g := m.Graph
		init := g.AddInput("init", graph.TensorType(graph.Float, nil))
		xs := g.AddInput("xs", graph.TensorType(graph.Float, nil))
		body := g.NewSubgraph("body")
		three := []graph.Dim{{Known: true, Value: 3}}
		acc := body.AddInput("acc", graph.TensorType(graph.Float, three))
		x := body.AddInput("x", graph.TensorType(graph.Float, three))
		body.AddOutput(body.Op("Add", []*graph.Value{acc, x}, 1)[0])
		y := body.Op("Mul", []*graph.Value{x, x}, 1)[0]
		y.Type = graph.TensorType(graph.Float, three)
		body.AddOutput(y)
		scan := g.NewNode("Scan", "", []*graph.Value{init, xs}, 2, graph.GraphAttr("body", body),
			graph.IntAttr("num_scan_inputs", 1), graph.IntsAttr("scan_output_axes", axis))
		g.Append(scan)
		g.AddOutput(scan.Output(0))
		g.AddOutput(scan.Output(1))
		s, err := NewSession(m, Options{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Run(map[string]*Tensor{"init": FromSlice([]int{3}, []float32{1, 2, 3}), "xs": New(graph.Float, 0, 3)})
		if err != nil {
			t.Fatal(err)
		}
		want := []int{0, 3}
		if axis == 1 {
			want = []int{3, 0}
		}
		if o := out[scan.Output(1).Name]; o == nil || o.DType != graph.Float || !equalShape(o.Shape, want) {
			t.Errorf("axis %d: scan output %v, want float32%v", axis, o, want)
		}
		if o := out[scan.Output(0).Name]; o == nil || o.Float64s()[2] != 3 {
			t.Errorf("axis %d: state %v", axis, o)
		}
	}
}

// TestCachedOutputsAreCopies: outputs that are session constants or
// cached values are copies: changing them does not change later runs.
func TestCachedOutputsAreCopies(t *testing.T) {
	m := graph.NewModel(9, "t", graph.Opset{Version: 17})
	g := m.Graph
	k := g.AddInitializer(mustTensor(graph.NewTensor("k", graph.Float, []int64{2}, []float32{1, 2})))
	id := g.Op("Identity", []*graph.Value{k}, 1)[0]
	g.AddOutput(id)
	g.AddOutput(k)
	s, err := NewSession(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		out, err := s.Run(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{id.Name, k.Name} {
			d := Data[float32](out[name])
			if len(d) != 2 || d[0] != 1 || d[1] != 2 {
				t.Fatalf("run %d: %s = %v, want [1 2]", run, name, d)
			}
			d[0] = 99 // the caller's copy
		}
	}
}

// TestLargeIdentityKeepsConstantFrozen: a pure step over constants whose
// output is too large to cache must not unfreeze a constant it returns.
func TestLargeIdentityKeepsConstantFrozen(t *testing.T) {
	m := graph.NewModel(9, "t", graph.Opset{Version: 17})
	g := m.Graph
	n := memoMaxElems + 1
	k := g.AddInitializer(mustTensor(graph.NewTensor("k", graph.Float, []int64{int64(n)}, make([]float32, n))))
	id := g.Op("Identity", []*graph.Value{k}, 1)[0]
	g.AddOutput(g.Op("Neg", []*graph.Value{id}, 1)[0])
	s, err := NewSession(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Run(nil); err != nil {
			t.Fatal(err)
		}
	}
	for v, c := range s.main.consts {
		if !c.frozen {
			t.Errorf("constant %s was unfrozen", v.Name)
		}
	}
}

// TestMatrixProductsUseSessionThreads: matrix products take the
// session's thread limit per call (no process-wide setting that another
// session's run could change).
func TestMatrixProductsUseSessionThreads(t *testing.T) {
	c := &Call{opts: &Options{Threads: 1}}
	if e := c.mm(); e.Threads != 1 {
		t.Errorf("Threads 1: gemm runs on %d", e.Threads)
	}
	if e := (*Call)(nil).mm(); e.Threads < 1 {
		t.Errorf("no session: gemm runs on %d", e.Threads)
	}
}

// Loop with a negative trip count runs no iteration, as ONNX Runtime does
// (loop.cc: while iter < M && cond), not without bound (B10).
func TestLoopNegativeTripCountRunsNothing(t *testing.T) {
	m := graph.NewModel(9, "t", graph.Opset{Version: 17})
	g := m.Graph
	trip := g.AddInput("trip", graph.TensorType(graph.Int64, nil))
	x := g.AddInput("x", graph.TensorType(graph.Int64, nil))
	body := g.NewSubgraph("body")
	iv := body.AddInput("i", graph.TensorType(graph.Int64, nil))
	cv := body.AddInput("c", graph.TensorType(graph.Bool, nil))
	av := body.AddInput("a", graph.TensorType(graph.Int64, nil))
	body.AddOutput(body.Op("Identity", []*graph.Value{cv}, 1)[0])
	body.AddOutput(body.Op("Add", []*graph.Value{av, iv}, 1)[0])
	sq := body.Op("Mul", []*graph.Value{iv, iv}, 1)[0]
	sq.Type = graph.TensorType(graph.Int64, nil)
	body.AddOutput(sq)
	loop := g.NewNode("Loop", "", []*graph.Value{trip, nil, x}, 2, graph.GraphAttr("body", body))
	g.Append(loop)
	g.AddOutput(loop.Output(0))
	g.AddOutput(loop.Output(1))
	s, err := NewSession(m, Options{MaxLoopIterations: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		trip  int64
		acc   int64
		scans string
	}{{-5, 7, "[0] []"}, {math.MinInt64, 7, "[0] []"}, {0, 7, "[0] []"}, {3, 10, "[3] [0 1 4]"}} {
		out, err := s.Run(map[string]*Tensor{"trip": Scalar(tc.trip), "x": Scalar(int64(7))})
		if err != nil {
			t.Fatalf("M = %d: %v", tc.trip, err)
		}
		scan := out[loop.Output(1).Name]
		if got := Data[int64](out[loop.Output(0).Name])[0]; got != tc.acc || fmt.Sprint(scan.Shape, Data[int64](scan)) != tc.scans {
			t.Errorf("M = %d: acc %d, scan %v %v; want %d, %s", tc.trip, got, scan.Shape, Data[int64](scan), tc.acc, tc.scans)
		}
	}
}

// NonZero of a scalar gives ONNX Runtime's shape: [1, 1] (holding 0) for a
// nonzero value, [1, 0] for zero.
func TestNonZeroOfAScalar(t *testing.T) {
	for _, tc := range []struct {
		x    float32
		want string
	}{{3, "[1 1] [0]"}, {0, "[1 0] []"}} {
		y := mustOp(t, "", "NonZero", 13, nil, Scalar(tc.x))
		if got := fmt.Sprint(y.Shape, Data[int64](y)); got != tc.want {
			t.Errorf("NonZero(%v) = %s, want %s", tc.x, got, tc.want)
		}
	}
	y := mustOp(t, "", "NonZero", 13, nil, FromSlice([]int{2, 2}, []float32{0, 1, 2, 0}))
	if got := fmt.Sprint(y.Shape, Data[int64](y)); got != "[2 2] [0 1 1 0]" {
		t.Errorf("NonZero of a matrix: %s", got)
	}
}
