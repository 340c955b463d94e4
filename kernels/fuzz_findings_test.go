package kernels

import (
	"errors"
	"testing"
	"time"

	"github.com/onnxpe/onnxpe/graph"
)

// TestFuzzFindings replays defects FuzzRun found (besides the crashers
// kept in testdata/fuzz/FuzzRun): each node is malformed in a way a model
// can be, and used to panic in its kernel (an internal error) or to
// allocate without bound; each must now fail with an error of the node.
func TestFuzzFindings(t *testing.T) {
	f32 := func(shape ...int) *Tensor { return New(graph.Float, shape...) }
	i64 := func(shape []int, v ...int64) *Tensor { return FromSlice(shape, v) }
	for _, tc := range []struct {
		name  string
		op    string
		opset int64
		nout  int
		attrs []*graph.Attr
		ins   []*Tensor
		is    error // wrapped by the error, when set
	}{
		{"Conv bias of the wrong size", "Conv", 11, 1, nil, []*Tensor{f32(2, 3, 6, 6), f32(4, 3, 3, 3), f32(1)}, nil},
		{"Conv weights of another type", "Conv", 11, 1, nil, []*Tensor{f32(1, 1, 3, 3), New(graph.Double, 1, 1, 1, 1)}, nil},
		{"Conv kernel larger than the input", "Conv", 11, 1, []*graph.Attr{graph.IntsAttr("strides", 2, 2)}, []*Tensor{f32(1, 1, 2, 2), f32(1, 1, 3, 3)}, nil},
		{"CumSum empty axis", "CumSum", 14, 1, nil, []*Tensor{New(graph.Double, 5), New(graph.Int32, 1, 0, 1, 4)}, nil},
		{"TopK empty K", "TopK", 11, 2, []*graph.Attr{graph.IntAttr("axis", 1)}, []*Tensor{f32(3, 0), New(graph.Int64, 0)}, nil},
		{"Trilu empty k", "Trilu", 14, 1, nil, []*Tensor{New(graph.Int64, 3, 0, 5), New(graph.Int64, 0, 0)}, nil},
		{"Dropout float training_mode", "Dropout", 13, 1, nil, []*Tensor{f32(1, 4, 5), Scalar(float32(0)), Scalar(float32(1))}, nil},
		{"Dropout empty ratio", "Dropout", 13, 1, nil, []*Tensor{f32(2), f32(0), Scalar(true)}, nil},
		{"LayerNormalization over no elements", "LayerNormalization", 17, 1, []*graph.Attr{graph.IntAttr("axis", 0)}, []*Tensor{f32(0, 4), f32(0, 4), f32(0, 4)}, nil},
		{"RotaryEmbedding scalar cos cache", "RotaryEmbedding", 23, 1, []*graph.Attr{graph.IntAttr("num_heads", 3)}, []*Tensor{f32(2, 0, 24), Scalar(float32(1)), New(graph.Int64, 0, 2), New(graph.Int64, 2, 5)}, nil},
		{"GatherND batch dims of 0 against 1", "GatherND", 13, 1, []*graph.Attr{graph.IntAttr("batch_dims", 1)}, []*Tensor{New(graph.Int32, 0, 2, 2), New(graph.Int64, 1, 2)}, nil},
		{"GatherND negative batch_dims", "GatherND", 13, 1, []*graph.Attr{graph.IntAttr("batch_dims", -1)}, []*Tensor{New(graph.Int32, 3), New(graph.Int64, 2, 1)}, nil},
		{"Gemm C that does not broadcast", "Gemm", 13, 1, nil, []*Tensor{f32(1, 2), f32(2, 4), f32(0, 4)}, nil},
		{"Gemm A and B of two types", "Gemm", 14, 1, nil, []*Tensor{New(graph.BFloat16, 7, 2), f32(2, 1), f32(0)}, nil},
		{"Split negative size", "Split", 17, 2, nil, []*Tensor{New(graph.Double, 0, 7), i64([]int{2}, 21, -21)}, nil},
		{"Split num_outputs 2^40", "Split", 18, 1, []*graph.Attr{graph.IntAttr("axis", -1), graph.IntAttr("num_outputs", 1<<40)}, []*Tensor{f32(2, 3)}, nil},
		{"SkipLayerNormalization of scalars", "com.microsoft.SkipLayerNormalization", 1, 1, nil, []*Tensor{Scalar(float32(1)), Scalar(float32(1)), f32(1)}, nil},
		{"MultiHeadAttention int64 query", "com.microsoft.MultiHeadAttention", 1, 1, []*graph.Attr{graph.IntAttr("num_heads", 2)}, []*Tensor{New(graph.Int64, 1), f32(2, 5, 16), f32(1, 5, 16)}, ErrUnsupportedType},
		{"RelativePositionBias empty lengths", "com.microsoft.RelativePositionBias", 1, 1, nil, []*Tensor{f32(32, 4), New(graph.Int64, 0), Scalar(int64(2))}, nil},
		{"ALiBiBias empty query length", "ai.onnxpe.ALiBiBias", 1, 1, nil, []*Tensor{f32(4), New(graph.Int64, 0, 7), Scalar(int64(2))}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			domain, op := "", tc.op
			for _, d := range []string{DomainMicrosoft, DomainOnnxpe} {
				if len(op) > len(d) && op[:len(d)+1] == d+"." {
					domain, op = d, op[len(d)+1:]
				}
			}
			start := time.Now()
			_, err := runOp(t, domain, op, tc.opset, tc.nout, tc.attrs, tc.ins...)
			if err == nil || errors.Is(err, ErrInternal) {
				t.Fatalf("error %v, want an error of the node", err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v, want one wrapping %v", err, tc.is)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestSequenceAtTensorInput: a sequence reaching an input that takes a
// tensor (Flatten of a SequenceConstruct) is an error of the node; Flatten
// used to view the sequence as a tensor without elements.
func TestSequenceAtTensorInput(t *testing.T) {
	m := graph.NewModel(9, "seq", graph.Opset{Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Int64, nil))
	s := g.Op("SequenceConstruct", []*graph.Value{x, x}, 1)[0]
	g.AddOutput(g.Op("Flatten", []*graph.Value{s}, 1, graph.IntAttr("axis", 0))[0])
	sess, err := NewSession(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sess.Run(map[string]*Tensor{"x": FromSlice([]int{1}, []int64{3})})
	var ne *NodeError
	if !errors.As(err, &ne) || ne.Op != "Flatten" || errors.Is(err, ErrInternal) {
		t.Fatalf("error %v, want an error of the Flatten node", err)
	}
}
