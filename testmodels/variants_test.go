package testmodels_test

import (
	"math"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
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
		if got.String() != ref.String() {
			t.Fatalf("%s gives %v, %s %v", s.Name, got, refName, ref)
		}
		a, b := ref.Float64s(), got.Float64s()
		worst := 0.0
		for i := range a {
			worst = math.Max(worst, math.Abs(a[i]-b[i]))
		}
		if !(worst <= 1e-5) { // a NaN fails too
			t.Errorf("%s differs from %s by %.3g", s.Name, refName, worst)
		}
	}
	if n < 5 {
		t.Fatalf("only %d Llama variants", n)
	}
}

// TestExternalDataModelRuns loads the external-data Llama (weights read
// lazily from the side file) and checks it computes what the inline one does.
func TestExternalDataModelRuns(t *testing.T) {
	p, err := testmodels.ExternalDataModel(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := graph.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	ext := 0
	for _, v := range m.Graph.Initializers {
		if v.Const.IsExternal() {
			ext++
		}
	}
	if ext < 10 {
		t.Fatalf("only %d external initializers", ext)
	}
	ids := kernels.FromSlice([]int{1, 4}, []int64{3, 1, 4, 1})
	pos := kernels.FromSlice([]int{1, 4}, []int64{0, 1, 2, 3})
	run := func(m *graph.Model) *kernels.Tensor {
		s, err := kernels.NewSession(m, kernels.Options{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Run(map[string]*kernels.Tensor{"input_ids": ids, "position_ids": pos})
		if err != nil {
			t.Fatal(err)
		}
		return out[m.Graph.Outputs[0].Name]
	}
	ta, tb := run(m), run(testmodels.Llama(testmodels.DefaultLlama))
	if ta.String() != tb.String() || ta.Len() == 0 {
		t.Fatalf("logits %v from external data, %v inline", ta, tb)
	}
	a, b := ta.Float64s(), tb.Float64s()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("logit %d: %v from external data, %v inline", i, a[i], b[i])
		}
	}
}
