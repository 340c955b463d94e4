package kernels_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestEvalComputesOnlyWhatIsAsked checks Session.Eval: the values it
// returns are those a session with Options.Outputs computes; it runs only
// the steps they need (a failing branch it does not need does not fail
// it, while Run does); a value inside a fused attention step is
// ErrNotComputed.
func TestEvalComputesOnlyWhatIsAsked(t *testing.T) {
	m := graph.NewModel(8, "eval", graph.Opset{Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, graph.Dims(2, 3)))
	bad, _ := graph.NewTensor("bad_shape", graph.Int64, []int64{1}, []int64{7})
	neg := g.Op("Neg", []*graph.Value{x}, 1)[0]
	g.AddOutput(g.Op("Reshape", []*graph.Value{neg, g.AddInitializer(bad)}, 1)[0]) // fails: 6 elements to [7]
	abs := g.Op("Abs", []*graph.Value{x}, 1)[0]
	g.AddOutput(g.Op("Exp", []*graph.Value{abs}, 1)[0])
	s, err := kernels.NewSession(m, kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*kernels.Tensor{"x": kernels.FromSlice([]int{2, 3}, []float32{1, -2, 3, -4, 5, -6})}
	if _, err := s.Run(in); err == nil {
		t.Fatal("Run of the failing branch succeeded")
	}
	out, err := s.Eval(in, []string{abs.Name, "x", "bad_shape"})
	if err != nil {
		t.Fatalf("Eval of a branch that does not fail: %v", err)
	}
	if got := kernels.Data[float32](out[abs.Name]); !slices.Equal(got, []float32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("Abs: %v", got)
	}
	if got := kernels.Data[int64](out["bad_shape"]); !slices.Equal(got, []int64{7}) {
		t.Errorf("initializer: %v", got)
	}

	// Intermediates of a Llama, against a session that returns them.
	llama := testmodels.Llama(testmodels.DefaultLlama)
	var names []string
	var inScores string
	for n := range llama.Graph.All() {
		switch n.OpType {
		case "Gather", "Concat", "Mul", "Sigmoid":
			names = append(names, n.Output(0).Name)
		case "Softmax":
			inScores = n.Output(0).Name
		}
	}
	ids := kernels.FromSlice([]int{1, 5}, []int64{3, 1, 4, 1, 5})
	pos := kernels.FromSlice([]int{1, 5}, []int64{0, 1, 2, 3, 4})
	lin := map[string]*kernels.Tensor{"input_ids": ids, "position_ids": pos}
	ls, err := kernels.NewSession(llama, kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ls.Eval(lin, names)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := kernels.NewSession(llama, kernels.Options{Outputs: names})
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Run(lin)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if !slices.Equal(got[name].Float64s(), want[name].Float64s()) || !slices.Equal(got[name].Shape, want[name].Shape) {
			t.Errorf("%s: Eval %v, Outputs %v", name, got[name], want[name])
		}
	}
	if ls.FusedAttention() == 0 {
		t.Fatal("the Llama's attention was not fused")
	}
	if _, err := ls.Eval(lin, []string{inScores}); !errors.Is(err, kernels.ErrNotComputed) {
		t.Errorf("Eval of the softmax inside a fused step: %v, want ErrNotComputed", err)
	}
}
