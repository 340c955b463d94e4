package graph_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
)

// conformanceModels lists every model.onnx of the shared conformance data
// and of testmodels/.
func corpus(t testing.TB) []string {
	t.Helper()
	var files []string
	for _, pat := range []string{
		"../../shared/conformance/*/*/model.onnx",
		"../testmodels/models/*/*.onnx",
	} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}

func TestRoundTripIsByteIdentical(t *testing.T) {
	files := corpus(t)
	if len(files) < 900 {
		t.Fatalf("found %d models; the conformance data (../shared/conformance) must be beside the repository", len(files))
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
