package verify_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/onnxpe/onnxpe/verify"
)

// BenchmarkVerifyCorpus is a default verify (the whole sweep, both models
// loaded from their files) of each corpus model against ONNX Runtime's
// extended-level save of it. Goal: under 2 s per model.
func BenchmarkVerifyCorpus(b *testing.B) {
	for _, e := range corpus(b) {
		pa := e.ModelPath()
		pb := filepath.Join(filepath.Dir(pa), "ort_extended.onnx")
		b.Run(e.Name, func(b *testing.B) {
			for b.Loop() {
				r, err := verify.Compare(context.Background(), loadModel(b, pa), loadModel(b, pb), verify.Options{Seed: 1})
				if err != nil || !r.Equal {
					b.Fatalf("%v %v", err, r)
				}
			}
		})
	}
}

// BenchmarkVerifyGPT2Small is a default verify of a GPT-2-small-shaped
// model (12 blocks, hidden 768, 12 heads; no stored table, so the long
// set is 128 tokens) against a second copy of it. Goal: under 30 s.
func BenchmarkVerifyGPT2Small(b *testing.B) {
	cfg := testmodels.GPT2Small
	cfg.Layers = 12
	a, c := testmodels.GPT2Block(cfg), testmodels.GPT2Block(cfg)
	for b.Loop() {
		r, err := verify.Compare(context.Background(), a, c, verify.Options{Seed: 1})
		if err != nil || !r.Equal {
			b.Fatalf("%v %v", err, r)
		}
		if r.Analysis.MaxLength != 128 {
			b.Fatalf("long sequence %d, want 128", r.Analysis.MaxLength)
		}
	}
}
