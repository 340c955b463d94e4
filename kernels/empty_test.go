package kernels

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/conformance"
)

// Tensors with a dimension of 0: every kernel must run them (a first
// decoding step has a past of length 0; a batch may be empty) and give
// the shape and values ONNX defines, never an internal error.

// TestReduceEmpty reduces tensors with an empty reduced axis (the result
// is the reduction's identity) and with an empty kept axis (the result is
// empty), as ONNX's test_reduce_*_empty_set cases and ONNX Runtime do.
func TestReduceEmpty(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		op       string
		identity float64 // of an empty reduced axis (ReduceMean: ONNX Runtime's 0)
	}{
		{"ReduceSum", 0}, {"ReduceMean", 0}, {"ReduceMax", -inf}, {"ReduceMin", inf},
		{"ReduceProd", 1}, {"ReduceLogSumExp", -inf}, {"ReduceSumSquare", 0}, {"ReduceL1", 0},
		{"ReduceL2", 0}, {"ReduceLogSum", -inf},
	} {
		for _, c := range []struct {
			shape []int
			axes  []int64
			keep  int64
			want  []int
		}{
			{[]int{0, 3}, []int64{1}, 1, []int{0, 1}}, // kept axis empty
			{[]int{0, 3}, []int64{1}, 0, []int{0}},
			{[]int{2, 0, 3}, []int64{2}, 1, []int{2, 0, 1}},
			{[]int{2, 0}, []int64{1}, 1, []int{2, 1}}, // reduced axis empty
			{[]int{2, 0}, []int64{0}, 0, []int{0}},
			{[]int{2, 0, 3}, []int64{1}, 0, []int{2, 3}},
			{[]int{0, 3}, nil, 0, []int{}}, // all axes, none kept
		} {
			name := fmt.Sprintf("%s/%v/axes%v/keep%d", tc.op, c.shape, c.axes, c.keep)
			t.Run(name, func(t *testing.T) {
				x := New(graph.Float, c.shape...)
				ins := []*Tensor{x}
				if c.axes != nil {
					ins = append(ins, FromSlice([]int{len(c.axes)}, c.axes))
				}
				got, err := runOp(t, "", tc.op, 18, 1, []*graph.Attr{graph.IntAttr("keepdims", c.keep)}, ins...)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got[0].Shape, c.want) {
					t.Fatalf("shape %v, want %v", got[0].Shape, c.want)
				}
				for i, v := range got[0].Float64s() {
					if v != tc.identity && !(math.IsNaN(v) && math.IsNaN(tc.identity)) {
						t.Fatalf("element %d is %v, want %v", i, v, tc.identity)
					}
				}
			})
		}
	}
}

// TestMatMulEmptyInner: a product over an inner dimension of 0 is a matrix
// of zeros ([2,0]x[0,3] = zeros [2,3]), also when the output buffer comes
// from the session's pool holding values of an earlier run; Gemm adds
// beta*C to it.
func TestMatMulEmptyInner(t *testing.T) {
	for _, dt := range []graph.DataType{graph.Float, graph.Double, graph.Int64} {
		t.Run(dt.String(), func(t *testing.T) {
			// Y = Neg(MatMul(A, B)): MatMul's output is an intermediate,
			// recycled by the pool for the next run.
			m := graph.NewModel(9, "empty", graph.Opset{Version: 17})
			g := m.Graph
			a := g.AddInput("a", graph.TensorType(dt, nil))
			b := g.AddInput("b", graph.TensorType(dt, nil))
			g.AddOutput(g.Op("Neg", []*graph.Value{g.Op("MatMul", []*graph.Value{a, b}, 1)[0]}, 1)[0])
			s, err := NewSession(m, Options{})
			if err != nil {
				t.Fatal(err)
			}
			ones := func(shape ...int) *Tensor {
				x := New(graph.Double, shape...)
				for i := range Data[float64](x) {
					Data[float64](x)[i] = 1
				}
				return castTensor(x, dt)
			}
			for run, k := range []int{4, 0, 0} {
				out, err := s.Run(map[string]*Tensor{"a": ones(2, k), "b": ones(k, 3)})
				if err != nil {
					t.Fatalf("run %d (k=%d): %v", run, k, err)
				}
				y := out[m.Graph.Outputs[0].Name]
				if !slices.Equal(y.Shape, []int{2, 3}) {
					t.Fatalf("run %d: shape %v", run, y.Shape)
				}
				for _, v := range y.Float64s() {
					if v != -float64(k) {
						t.Fatalf("run %d (k=%d): %v, want all %d", run, k, y.Float64s(), -k)
					}
				}
			}
			// Batched, with broadcasting: [2,1,3,0] x [4,0,5] = zeros [2,4,3,5].
			y, err := runOp(t, "", "MatMul", 17, 1, nil, ones(2, 1, 3, 0), ones(4, 0, 5))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(y[0].Shape, []int{2, 4, 3, 5}) || slices.ContainsFunc(y[0].Float64s(), func(v float64) bool { return v != 0 }) {
				t.Errorf("batched: %v %v, want zeros [2 4 3 5]", y[0].Shape, y[0].Float64s())
			}
		})
	}
	// Gemm: alpha*A*B + beta*C with A [2,0], B [0,3] is beta*C broadcast.
	c := FromSlice([]int{3}, []float32{1, 2, 3})
	for _, trans := range []int64{0, 1} {
		a, b := New(graph.Float, 2, 0), New(graph.Float, 0, 3)
		if trans == 1 {
			a, b = New(graph.Float, 0, 2), New(graph.Float, 3, 0)
		}
		y, err := runOp(t, "", "Gemm", 13, 1, []*graph.Attr{graph.FloatAttr("beta", 2), graph.IntAttr("transA", trans), graph.IntAttr("transB", trans)}, a, b, c)
		if err != nil {
			t.Fatalf("Gemm trans=%d: %v", trans, err)
		}
		if want := []float64{2, 4, 6, 2, 4, 6}; !slices.Equal(y[0].Shape, []int{2, 3}) || !slices.Equal(y[0].Float64s(), want) {
			t.Errorf("Gemm trans=%d: %v %v, want [2 3] %v", trans, y[0].Shape, y[0].Float64s(), want)
		}
	}
}

// TestScan8ZeroLength: a Scan (opset 8) over sequences of length 0 runs no
// iteration, so its final state is its initial state and its scan output
// is empty (ONNX's test_scan_sum with the sequence cut to 0).
func TestScan8ZeroLength(t *testing.T) {
	dir := filepath.Join(conformance.Require(t), "onnx-node", "test_scan_sum")
	m, err := graph.Load(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(m, Options{IgnoreDeclaredShapes: true})
	if err != nil {
		t.Fatal(err)
	}
	initial := FromSlice([]int{1, 2}, []float32{3, -4})
	out, err := s.Run(map[string]*Tensor{"initial": initial, "x": New(graph.Float, 1, 0, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if y := out["y"]; !slices.Equal(y.Shape, []int{1, 2}) || !slices.Equal(y.Float64s(), []float64{3, -4}) {
		t.Errorf("final state %v %v, want the initial [1 2] [3 -4]", y, y.Float64s())
	}
	if z := out["z"]; !slices.Equal(z.Shape, []int{1, 0, 2}) {
		t.Errorf("scan output %v, want float32[1,0,2]", z)
	}
}
