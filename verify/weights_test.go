package verify_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/onnxpe/onnxpe/verify"
)

// TestCompareSharesEqualWeights verifies a Llama against a copy of it in
// another folder (a model and its rewrite keep every weight outside the
// encoding) and checks, by the executor's accounting of packed weights
// (kernels.Weights), that the comparison packed the weights once: B's
// session took over A's.
func TestCompareSharesEqualWeights(t *testing.T) {
	cfg := testmodels.DefaultLlama
	cfg.Hidden, cfg.FFN, cfg.Seed = 128, 256, 91
	load := func() (*graph.Model, string) {
		path := filepath.Join(t.TempDir(), "model.onnx")
		if err := testmodels.Llama(cfg).Save(path, graph.SaveOptions{External: graph.ExternalizeLarge, Threshold: 256}); err != nil {
			t.Fatal(err)
		}
		m, err := graph.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return m, path
	}
	a, pa := load()
	b, pb := load()
	kernels.ReleaseUnusedWeights()
	kernels.ResetWeightPeak()
	s, err := kernels.NewSession(a, kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	one := kernels.Weights().Made
	s.Close()
	kernels.ReleaseUnusedWeights()
	if one <= 0 {
		t.Fatalf("a session holds %d B of packed weights", one)
	}
	kernels.ResetWeightPeak()
	r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1, PathA: pa, PathB: pb})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal {
		t.Fatalf("not equal: %s", r.Summary)
	}
	if made := kernels.Weights().Made; made != one {
		t.Errorf("the comparison packed %d B of weights; one model's are %d B", made, one)
	}
	kernels.ReleaseUnusedWeights()
}
