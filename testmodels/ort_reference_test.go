//go:build ort

package testmodels_test

import (
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/ortpeer"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestORTReproducesPyTorch runs every exported model in ONNX Runtime on
// the stored inputs: the corpus is valid for the most used runtime.
func TestORTReproducesPyTorch(t *testing.T) {
	if err := ortpeer.Init(""); err != nil {
		t.Fatal(err)
	}
	checkReference(t, func(e *testmodels.Entry, m *graph.Model, in map[string]*kernels.Tensor) (map[string]*kernels.Tensor, error) {
		s, err := ortpeer.NewSession(e.ModelPath(), m, ortpeer.Options{Threads: 1})
		if err != nil {
			return nil, err
		}
		defer s.Close()
		want, err := kernels.ReadOutputs(e.TestDataDir(), m)
		if err != nil {
			return nil, err
		}
		return s.Run(in, want)
	})
}
