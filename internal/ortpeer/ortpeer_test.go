//go:build ort

package ortpeer_test

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/conformance"
	"github.com/onnxpe/onnxpe/internal/ortpeer"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// requireORT loads the library or fails (under CI, or when the tag was
// asked for, a missing library is a failure, not a skip).
func requireORT(t *testing.T) {
	t.Helper()
	if err := ortpeer.Init(""); err != nil {
		t.Fatalf("%v", err)
	}
}

func TestConformanceCaseThroughORT(t *testing.T) {
	requireORT(t)
	dir := conformance.Case(t, "onnx-node", "test_gather_0")
	m, err := graph.Load(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ortpeer.NewSession(filepath.Join(dir, "model.onnx"), m, ortpeer.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in := map[string]*kernels.Tensor{}
	for i, v := range m.Graph.Inputs {
		tt, err := kernels.ReadTensorFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("input_%d.pb", i)))
		if err != nil {
			t.Fatal(err)
		}
		in[v.Name] = tt
	}
	out, err := s.Run(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := kernels.ReadTensorFile(filepath.Join(dir, "test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	got := out[m.Graph.Outputs[0].Name].Float64s()
	for i, w := range want.Float64s() {
		if got[i] != w {
			t.Fatalf("element %d: %v, want %v", i, got[i], w)
		}
	}
}

// TestSyntheticModelsRunInORT checks that every Go-built model is a model
// ONNX Runtime accepts and runs, and computes what onnxpe's executor does.
func TestSyntheticModelsRunInORT(t *testing.T) {
	requireORT(t)
	for _, syn := range testmodels.Synthetics() {
		t.Run(syn.Name, func(t *testing.T) {
			m := syn.Build()
			p := filepath.Join(t.TempDir(), "m.onnx")
			if err := m.Save(p, graph.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			s, err := ortpeer.NewSession(p, m, ortpeer.Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			in := map[string]*kernels.Tensor{}
			for _, v := range m.Graph.Inputs {
				ids := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
				in[v.Name] = kernels.FromSlice([]int{2, 5}, ids)
			}
			if d := againstORT(t, s, m, in); d > 1e-5 {
				t.Errorf("ONNX Runtime and onnxpe differ by %.3g", d)
			}
		})
	}
}

// TestGeluAgainstORT checks Gelu (opset 20), the one listed op that ONNX's
// backend tests of the shared data (opsets up to 17) do not cover, against
// ONNX Runtime in both of its forms.
func TestGeluAgainstORT(t *testing.T) {
	requireORT(t)
	for _, approx := range []string{"none", "tanh"} {
		m := graph.NewModel(9, "t", graph.Opset{Version: 20})
		x := m.Graph.AddInput("x", graph.TensorType(graph.Float, graph.Dims(4, 256)))
		y := m.Graph.Op("Gelu", []*graph.Value{x}, 1, graph.StringAttr("approximate", approx))[0]
		y.Type = graph.TensorType(graph.Float, graph.Dims(4, 256))
		m.Graph.AddOutput(y)
		p := filepath.Join(t.TempDir(), "gelu.onnx")
		if err := m.Save(p, graph.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		v := make([]float32, 4*256)
		for i := range v {
			v[i] = float32(i-512) / 64 // -8 .. 8
		}
		in := map[string]*kernels.Tensor{"x": kernels.FromSlice([]int{4, 256}, v)}
		s, err := ortpeer.NewSession(p, m, ortpeer.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		d := againstORT(t, s, m, in)
		s.Close()
		if d > 1e-5 {
			t.Errorf("approximate=%s: ONNX Runtime and onnxpe differ by %.3g", approx, d)
		}
	}
}

// TestExternalDataModelInORT runs the external-data Llama in ONNX Runtime,
// which reads the side file we wrote.
func TestExternalDataModelInORT(t *testing.T) {
	requireORT(t)
	p, err := testmodels.ExternalDataModel(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := graph.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*kernels.Tensor{
		"input_ids":    kernels.FromSlice([]int{1, 4}, []int64{3, 1, 4, 1}),
		"position_ids": kernels.FromSlice([]int{1, 4}, []int64{0, 1, 2, 3}),
	}
	s, err := ortpeer.NewSession(p, m, ortpeer.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if d := againstORT(t, s, m, in); d > 1e-5 {
		t.Errorf("ONNX Runtime and onnxpe differ by %.3g", d)
	}
}

// againstORT runs m in onnxpe's executor and in the ONNX Runtime session s
// on in, and returns the largest absolute difference over all outputs.
func againstORT(t *testing.T, s *ortpeer.Session, m *graph.Model, in map[string]*kernels.Tensor) float64 {
	t.Helper()
	ours, err := kernels.NewSession(m, kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := ours.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Run(in, want)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for _, v := range m.Graph.Outputs {
		a, b := got[v.Name].Float64s(), want[v.Name].Float64s()
		if len(a) != len(b) {
			t.Fatalf("output %s: %d elements from ONNX Runtime, %d from onnxpe", v.Name, len(a), len(b))
		}
		for i := range a {
			switch d := math.Abs(a[i] - b[i]); {
			case a[i] == b[i], math.IsNaN(a[i]) && math.IsNaN(b[i]): // equal, equal infinities, or both NaN
			case math.IsNaN(d) || math.IsInf(d, 0):
				return math.Inf(1) // a NaN or an infinity on one side only
			default:
				worst = math.Max(worst, d)
			}
		}
	}
	return worst
}

// TestPreparedValues: running on values built once (what bench/vsort
// times) gives what Run gives, run after run.
func TestPreparedValues(t *testing.T) {
	requireORT(t)
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range man.Models[:3] {
		m, err := graph.Load(e.ModelPath())
		if err != nil {
			t.Fatal(err)
		}
		in, err := kernels.ReadInputs(e.TestDataDir(), m)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ortpeer.NewSession(e.ModelPath(), m, ortpeer.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.Run(in, nil)
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.PrepareValues(in, want)
		if err != nil {
			t.Fatal(err)
		}
		for run := range 2 {
			if err := s.RunValues(v); err != nil {
				t.Fatal(err)
			}
			for i, o := range m.Graph.Outputs {
				got, err := v.Output(i)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got.Shape) != fmt.Sprint(want[o.Name].Shape) || fmt.Sprint(got.Float64s()) != fmt.Sprint(want[o.Name].Float64s()) {
					t.Fatalf("%s run %d: output %s differs from Run's", e.Name, run, o.Name)
				}
			}
		}
		v.Close()
		s.Close()
	}
}
