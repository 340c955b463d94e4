package unknown_test

import (
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/scheme/unknown"
)

// TestParamsPrintTheReason: the reason and the node, null when there is
// none (the blocks' own reason, or no block).
func TestParamsPrintTheReason(t *testing.T) {
	m := (&unknown.Params{Reason: unknown.UnexplainedInput, At: "/embed/Add"}).Map()
	if m["reason"] != "unexplained_input" || m["at"] != "/embed/Add" {
		t.Errorf("params %v", m)
	}
	if m := (&unknown.Params{Reason: unknown.NoAttention}).Map(); m["at"] != nil {
		t.Errorf("at %v, want null", m["at"])
	}
}

// TestExtendRefuses: extend cannot change what the audit cannot read; it
// says which layers and why (the finding's first note).
func TestExtendRefuses(t *testing.T) {
	f := &passes.Finding{Scheme: unknown.Name, Layers: []int{2, 3}, Params: &unknown.Params{Reason: unknown.UnexplainedScores},
		Notes: []string{"the block's scores change with the keys' positions"}}
	it, err := unknown.Scheme.Extend.Plan(nil, f)
	if it != nil || err == nil || !strings.Contains(err.Error(), "[2 3]") || !strings.Contains(err.Error(), "keys' positions") {
		t.Errorf("plan %v, error %v", it, err)
	}
}
