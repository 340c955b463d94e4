package graph_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/conformance"
)

// conformanceModels lists every model.onnx of the shared conformance data
// and of testmodels/.
func corpus(t testing.TB) []string {
	t.Helper()
	files := conformance.Models(t)
	m, err := filepath.Glob("../testmodels/models/*/*.onnx")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, m...)
}

func TestRoundTripIsByteIdentical(t *testing.T) {
	files := corpus(t)
	if len(files) < 900 {
		t.Fatalf("found %d models, want the 969 conformance models and the corpus", len(files))
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := graph.Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		got, err := m.Marshal()
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: saved %d bytes differ from the %d loaded", f, len(got), len(want))
		}
	}
	t.Logf("%d models round-tripped", len(files))
}
