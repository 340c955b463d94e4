package testmodels_test

import (
	"path/filepath"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
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
			for _, opts := range []graph.SaveOptions{{}, {External: graph.ExternalizeLarge, Threshold: 256}} {
				p := filepath.Join(dir, "m.onnx")
				if err := m.Save(p, opts); err != nil {
					t.Fatal(err)
				}
				back, err := graph.Load(p)
				if err != nil {
					t.Fatal(err)
				}
				if back.Graph.Len() != m.Graph.Len() {
					t.Fatalf("%d nodes after reload, %d before", back.Graph.Len(), m.Graph.Len())
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
