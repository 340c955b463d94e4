package audit_test

import (
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/pattern"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
	"github.com/onnxpe/onnxpe/passes/scheme/t5"
	"github.com/onnxpe/onnxpe/passes/work"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestRotationForms checks that the sub-patterns name the form each corpus
// model writes its rotation in, and that a pattern fails with a reason.
func TestRotationForms(t *testing.T) {
	want := map[string]string{"rope_llama": "rotate_half", "rope_neox": "rotate_half", "rope_gptj": "rotate_every_two", "llama4_nope": "complex_pairs", "rope_qwen2": "rotate_half"}
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range listed(t, man.Models, entryName, want) {
		w := want[e.Name]
		m, err := graph.Load(e.ModelPath())
		if err != nil {
			t.Fatal(err)
		}
		r, _, err := audit.AuditModel(m, e.Name, passes.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ev := r.Findings[0].Evidence.(*rope.Evidence)
		for _, b := range ev.Blocks {
			if b.Q.Form != w || len(b.Q.RotateNodes) == 0 {
				t.Errorf("%s layer %d: form %q with %d nodes, want %s", e.Name, b.Layer, b.Q.Form, len(b.Q.RotateNodes), w)
			}
		}
	}
	// The T5 buckets are computed from a distance matrix.
	for _, name := range []string{"t5_encoder", "t5_decoder"} {
		m, err := graph.Load(testmodels.Dir() + "/models/" + name + "/model.onnx")
		if err != nil {
			t.Fatal(err)
		}
		r, _, err := audit.AuditModel(m, name, passes.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if ev := r.Findings[0].Evidence.(*t5.Evidence); ev.Distance == "" {
			t.Errorf("%s: no distance matrix found", name)
		}
	}
	// Split halves: the Go-built form.
	s := schemetest.Form{Name: "split", Heads: 2, HD: 16, Positions: "range", Rope: "computed", Rotate: "split", Scores: "matmul", Base: 10000}
	r, _, err := audit.AuditModel(schemetest.BuildForm(s), "split", passes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f := r.Findings[0].Evidence.(*rope.Evidence).Blocks[0].Q.Form; f != "rotate_half" {
		t.Errorf("Split halves: form %q", f)
	}
	// A reason when a pattern fails.
	w, err := work.NewWork(testmodels.Llama(testmodels.DefaultLlama))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range w.M.Graph.Nodes() {
		if n.OpType == "MatMul" {
			m, miss := pattern.MatchValue(w, rope.RotateHalf, n.Output(0))
			if m != nil || miss == nil || miss.Reason == "" {
				t.Fatalf("rotate_half matched a MatMul (%v) or gave no reason", m)
			}
			// The failure names where it failed: the MatMul itself, which
			// is not the Concat rotate_half starts with.
			if miss.Node != n || !strings.Contains(miss.Reason, "MatMul") {
				t.Errorf("rotate_half failed at %v (%q), want the MatMul", miss.Node, miss.Reason)
			}
			break
		}
	}
}
