package testmodels_test

import (
	"math"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestLlamaVariantsAgree runs every Go-built Llama (computed RoPE, stored
// tables, the two fused RotaryEmbedding ops, rotate_half as a local
// function, opsets 17 to 23) on the same inputs: they share weights and
// differ only in how the rotation is written, so their logits must agree.
func TestLlamaVariantsAgree(t *testing.T) {
	ids := kernels.FromSlice([]int{2, 6}, []int64{1, 5, 9, 13, 17, 21, 2, 4, 8, 16, 32, 64})
	pos := kernels.FromSlice([]int{2, 6}, []int64{0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12})
	var ref *kernels.Tensor
	refName := ""
	n := 0
	for _, s := range testmodels.Synthetics() {
		if !strings.HasPrefix(s.Name, "llama_") {
			continue
		}
		n++
		m := s.Build()
		sess, err := kernels.NewSession(m, kernels.Options{})
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		out, err := sess.Run(map[string]*kernels.Tensor{"input_ids": ids, "position_ids": pos})
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		got := out[m.Graph.Outputs[0].Name]
		if ref == nil {
			ref, refName = got, s.Name
			continue
		}
		a, b := ref.Float64s(), got.Float64s()
		worst := 0.0
		for i := range a {
			worst = math.Max(worst, math.Abs(a[i]-b[i]))
		}
		if worst > 1e-5 {
			t.Errorf("%s differs from %s by %.3g", s.Name, refName, worst)
		}
	}
	if n < 5 {
		t.Fatalf("only %d Llama variants", n)
	}
}
