package graph_test

import (
	"os"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
)

// FuzzLoad feeds the loader arbitrary bytes: it must return a model or an
// error, never panic; a model it returns must encode again.
func FuzzLoad(f *testing.F) {
	files := corpus(f)
	for i, p := range files {
		if i%8 != 0 { // a spread of ops, without reading all 900 files
			continue
		}
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := graph.Decode(data, "")
		if err != nil {
			return
		}
		if _, err := m.Marshal(); err != nil {
			t.Fatalf("a loaded model does not encode: %v", err)
		}
		m.Graph.TopoSort()
		m.Graph.EliminateDeadCode()
	})
}
