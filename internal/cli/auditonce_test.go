package cli

import (
	"path/filepath"
	"testing"

	"github.com/onnxpe/onnxpe/passes/audit"
)

// TestRewriteAndExtendAuditOnce: onnxpe rewrite audits the model once
// (the rewrite passes run in the audit's context and verify's hints come
// from it), and onnxpe extend audits the original once and the extended
// model once (its audit check).
func TestRewriteAndExtendAuditOnce(t *testing.T) {
	model := filepath.Join("..", "..", "testmodels", "models", "rope_llama", "model.onnx")
	dir := t.TempDir()
	before := audit.Runs()
	if code, _, stderr := runCLI(t, "rewrite", model, "-o", filepath.Join(dir, "r.onnx")); code != 0 {
		t.Fatalf("rewrite: exit %d: %s", code, stderr)
	}
	if n := audit.Runs() - before; n != 1 {
		t.Errorf("rewrite audited the model %d times, want 1", n)
	}
	before = audit.Runs()
	if code, _, stderr := runCLI(t, "extend", model, "-o", filepath.Join(dir, "x.onnx"), "--to", "512", "--method", "linear", "--original-max-positions", "256"); code != 0 {
		t.Fatalf("extend: exit %d: %s", code, stderr)
	}
	if n := audit.Runs() - before; n != 2 {
		t.Errorf("extend ran %d audits, want 2 (the original, and the extended model for its audit check)", n)
	}
}
