package kernels

import (
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
)

// TestOptionsOutputsReturnsIntermediates asks a session for an
// intermediate value, an input and an initializer instead of the graph's
// output, and checks their values (the intermediate is read after later
// steps ran, so it must not have been freed or recycled).
func TestOptionsOutputsReturnsIntermediates(t *testing.T) {
	m := graph.NewModel(9, "t", graph.Opset{Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, graph.Dims(3)))
	kT, _ := graph.NewTensor("k", graph.Float, []int64{3}, []float32{10, 20, 30})
	k := g.AddInitializer(kT)
	sum := g.Op("Add", []*graph.Value{x, k}, 1)[0]
	prod := g.Op("Mul", []*graph.Value{sum, sum}, 1)[0]
	out := g.Op("Neg", []*graph.Value{prod}, 1)[0]
	g.AddOutput(out)
	in := map[string]*Tensor{"x": FromSlice([]int{3}, []float32{1, 2, 3})}

	s, err := NewSession(m, Options{Outputs: []string{sum.Name, "x", "k"}})
	if err != nil {
		t.Fatal(err)
	}
	for run := 0; run < 2; run++ {
		got, err := s.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[out.Name] != nil {
			t.Fatalf("run %d: got outputs %v", run, got)
		}
		for name, want := range map[string][]float32{sum.Name: {11, 22, 33}, "x": {1, 2, 3}, "k": {10, 20, 30}} {
			v := Data[float32](got[name])
			for i := range want {
				if v[i] != want[i] {
					t.Fatalf("run %d: %s = %v, want %v", run, name, v, want)
				}
			}
		}
	}
	// Without the option the graph's output comes back.
	s, err = NewSession(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	if v := Data[float32](got[out.Name]); v[2] != -33*33 {
		t.Fatalf("output %v", v)
	}
	if _, err := NewSession(m, Options{Outputs: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown output name: err %v", err)
	}
}
