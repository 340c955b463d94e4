//go:build ort

package verify_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/onnxpe/onnxpe/internal/ortpeer"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/onnxpe/onnxpe/verify"
)

// TestRuntimeBothORT runs corpus models against their ONNX Runtime saves
// in both runtimes: the four pairings (A and B in onnxpe's kernels, in
// ONNX Runtime, and each model across the two) must all be equal. The
// float16 model exercises ONNX Runtime's half outputs.
func TestRuntimeBothORT(t *testing.T) {
	if err := ortpeer.Init(""); err != nil {
		t.Fatal(err) // the tag asks for ONNX Runtime: a missing library fails
	}
	for _, name := range []string{"rope_llama_fp16", "rope_kvcache", "alibi_mpt", "learned_vit"} {
		e := entry(t, name)
		pa := e.ModelPath()
		pb := filepath.Join(filepath.Dir(pa), "ort_extended.onnx")
		r, err := verify.Compare(context.Background(), loadModel(t, pa), loadModel(t, pb),
			verify.Options{Seed: 1, Runtime: verify.RuntimeBoth, PathA: pa, PathB: pb, Threads: 1})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pairings := map[string]int{}
		for _, s := range r.Sets {
			pairings[s.Pairing]++
		}
		if !r.Equal || len(pairings) != 4 {
			t.Errorf("%s: %s (pairings %v)", name, r.Summary, pairings)
		}
	}
}

// TestRuntimeORTWithoutPaths runs models held only in memory in ONNX
// Runtime (they are saved to a temporary folder first) and catches a
// perturbation there too.
func TestRuntimeORTWithoutPaths(t *testing.T) {
	if err := ortpeer.Init(""); err != nil {
		t.Fatal(err)
	}
	a, b := fusedLlamaPair(t)
	r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1, Runtime: verify.RuntimeORT})
	if err != nil {
		t.Fatal(err)
	}
	if r.Equal {
		t.Fatalf("interleaved vs half-split reported equal in ONNX Runtime: %s", r.Summary)
	}
}

// TestDeployFormsORT verifies each deployment-form model against itself
// in both runtimes: the sweep's inputs (the static cache's write indices
// and valid-key counts among them) run in ONNX Runtime too, and the four
// pairings agree.
func TestDeployFormsORT(t *testing.T) {
	if err := ortpeer.Init(""); err != nil {
		t.Fatal(err)
	}
	for _, f := range testmodels.DeployForms {
		a, b := testmodels.BuildDeploy(f, testmodels.DefaultDeploy), testmodels.BuildDeploy(f, testmodels.DefaultDeploy)
		r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1, Runtime: verify.RuntimeBoth, Threads: 1})
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		pairings := map[string]int{}
		for _, s := range r.Sets {
			pairings[s.Pairing]++
		}
		if !r.Equal || len(pairings) != 4 {
			t.Errorf("%s: %s (pairings %v)", f, r.Summary, pairings)
		}
		for _, s := range r.Skipped {
			t.Logf("%s: skipped %s: %s", f, s.Name, s.Reason)
		}
	}
}
