package testmodels_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestSyntheticsSaveAndLoad builds every Go model, saves it (once inline,
// once with external data) and loads it back unchanged.
func TestSyntheticsSaveAndLoad(t *testing.T) {
	for _, s := range testmodels.Synthetics() {
		t.Run(s.Name, func(t *testing.T) {
			m := s.Build()
			if err := m.Graph.CheckAcyclic(); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			want, err := m.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			for k, opts := range []graph.SaveOptions{{}, {External: graph.ExternalizeLarge, Threshold: 256}} {
				p := filepath.Join(dir, fmt.Sprintf("m%d.onnx", k))
				if err := m.Save(p, opts); err != nil {
					t.Fatal(err)
				}
				back, err := graph.Load(p)
				if err != nil {
					t.Fatal(err)
				}
				// Unchanged: saved inline again, the reloaded model has
				// the bytes of the original.
				inl := filepath.Join(dir, fmt.Sprintf("inline%d.onnx", k))
				if err := back.Save(inl, graph.SaveOptions{External: graph.InlineAll}); err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(inl)
				if err != nil {
					t.Fatal(err)
				}
				if len(want) == 0 || !bytes.Equal(got, want) {
					t.Fatalf("save %+v, reload, save inline: %d bytes, the original %d", opts, len(got), len(want))
				}
			}
			if len(s.Truth.Findings) == 0 || s.Note == "" {
				t.Fatal("a synthetic model needs its ground truth and a note")
			}
		})
	}
}

func TestManifestLoads(t *testing.T) {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Models) == 0 {
		t.Fatal("empty manifest")
	}
	for _, e := range man.Models {
		if _, err := graph.Load(e.ModelPath()); err != nil {
			t.Errorf("%s: %v", e.Name, err)
		}
		if len(e.Schemes) == 0 || len(e.Layers) == 0 {
			t.Errorf("%s: no ground truth", e.Name)
		}
	}
}

// TestSinusoidalIfBothBranches runs sinusoidal_if on both sides of its
// threshold (64 rows): at 5 and 64 tokens its If takes rows of the stored
// table, at 65 and 80 it computes them; either way row p of the table it
// feeds the encoder is [sin(p w_i) | cos(p w_i)] with w_i = 10000^(-2i/16)
// (float32 frequencies and angles, as the model computes them), within the
// float32 rounding of sin and cos.
func TestSinusoidalIfBothBranches(t *testing.T) {
	m := testmodels.SinusoidalIf()
	var pe string
	for _, n := range m.Graph.Nodes() {
		if n.OpType == "If" {
			pe = n.Output(0).Name
		}
	}
	s, err := kernels.NewSession(m, kernels.Options{Outputs: []string{pe}})
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []int{5, 64, 65, 80} {
		ids := make([]int64, seq)
		out, err := s.Run(map[string]*kernels.Tensor{"input_ids": kernels.FromSlice([]int{1, seq}, ids)})
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		got := out[pe]
		if got.String() != fmt.Sprintf("float32[%d,16]", seq) {
			t.Fatalf("seq %d: table %v", seq, got)
		}
		d := got.Float64s()
		for p := range seq {
			for i := range 8 {
				w := float32(1 / math.Pow(10000, float64(2*i)/16))
				a := float64(float32(p) * w)
				if e := math.Abs(d[p*16+i] - math.Sin(a)); !(e <= 1e-6) {
					t.Fatalf("seq %d: sin of row %d, column %d: %v, want %v", seq, p, i, d[p*16+i], math.Sin(a))
				}
				if e := math.Abs(d[p*16+8+i] - math.Cos(a)); !(e <= 1e-6) {
					t.Fatalf("seq %d: cos of row %d, column %d: %v, want %v", seq, p, i, d[p*16+8+i], math.Cos(a))
				}
			}
		}
	}
}
