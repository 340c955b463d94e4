package audit_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestAbsentExternalData audits a model whose weights and cos/sin tables
// are in a side file that is missing: the rotation is still found (its
// pairs are structure), what the file held is null with a note, and what
// the model file itself says (the table's rows) is reported.
func TestAbsentExternalData(t *testing.T) {
	cfg := testmodels.DefaultLlama
	cfg.RoPE = testmodels.RopeCacheTable
	m := testmodels.Llama(cfg)
	dir := t.TempDir()
	path := filepath.Join(dir, "model.onnx")
	if err := m.Save(path, graph.SaveOptions{External: graph.ExternalizeLarge, Threshold: 256}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path + ".data"); err != nil {
		t.Fatal(err)
	}
	got, err := graph.LoadWith(path, graph.LoadOptions{AllowMissingExternal: true})
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := audit.AuditModel(got, "absent", passes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Schemes) != 1 || r.Schemes[0] != "rope" {
		t.Fatalf("schemes %v", r.Schemes)
	}
	f := r.Findings[0]
	p := schemetest.JSONParams(f)
	for k, want := range map[string]any{"layout": "half_split", "rotary_dim": 16.0, "head_dim": 16.0, "max_positions": 128.0, "base": nil, "scaling": nil, "factor": nil} {
		if !schemetest.Agree(want, p[k]) && !(want == nil && p[k] == nil) {
			t.Errorf("%s = %v, want %v", k, p[k], want)
		}
	}
	if !slices.ContainsFunc(f.Notes, func(n string) bool { return strings.Contains(n, "base") && strings.Contains(n, "absent") }) {
		t.Errorf("no note for the null base: %q", f.Notes)
	}
}
