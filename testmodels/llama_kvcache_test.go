package testmodels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestLlamaKVCacheContinuesThePrompt: a Llama built with a KV cache gives
// a prompt's last logits the same whole (empty caches) as in two calls,
// the second after the presents of the first.
func TestLlamaKVCacheContinuesThePrompt(t *testing.T) {
	cfg := testmodels.DefaultLlama
	cfg.KVCache = true
	m := testmodels.Llama(cfg)
	s, err := kernels.NewSession(m, kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	full := testmodels.LlamaInputs(cfg, 1, 7, 0, 3)
	want, err := s.Run(full)
	if err != nil {
		t.Fatal(err)
	}
	ids := full["input_ids"].Int64s()
	first := testmodels.LlamaInputs(cfg, 1, 5, 0, 3)
	first["input_ids"] = kernels.FromSlice([]int{1, 5}, append([]int64(nil), ids[:5]...))
	got1, err := s.Run(first)
	if err != nil {
		t.Fatal(err)
	}
	step := testmodels.LlamaInputs(cfg, 1, 2, 5, 4)
	step["input_ids"] = kernels.FromSlice([]int{1, 2}, append([]int64(nil), ids[5:]...))
	for l := 0; l < cfg.Layers; l++ {
		for _, kind := range []string{"key", "value"} {
			step[fmt.Sprintf("past_key_values.%d.%s", l, kind)] = got1[fmt.Sprintf("present.%d.%s", l, kind)]
		}
	}
	got, err := s.Run(step)
	if err != nil {
		t.Fatal(err)
	}
	out := m.Graph.Outputs[0].Name
	w, g := want[out].Float64s(), got[out].Float64s()
	V := cfg.Vocab
	for s := 0; s < 2; s++ {
		for i := 0; i < V; i++ {
			a, b := w[(5+s)*V+i], g[s*V+i]
			if math.Abs(a-b) > 1e-4*math.Max(1, math.Abs(a)) {
				t.Fatalf("token %d logit %d: %g whole, %g after the cache", 5+s, i, a, b)
			}
		}
	}
	if n := len(got["present.1.key"].Shape); n != 4 || got["present.1.key"].Shape[2] != 7 {
		t.Fatalf("present.1.key %v", got["present.1.key"].Shape)
	}
}
