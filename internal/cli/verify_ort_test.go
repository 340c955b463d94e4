//go:build ort

package cli

import (
	"encoding/json"
	"testing"

	"github.com/onnxpe/onnxpe/verify"
)

// TestVerifyRuntimeBothORT runs the command with ONNX Runtime beside the
// Go kernels: four pairings per input set, all equal.
func TestVerifyRuntimeBothORT(t *testing.T) {
	a, b := corpusFile("rope_gptj", "model.onnx"), corpusFile("rope_gptj", "ort_basic.onnx")
	code, js, errOut := runCLI(t, "verify", a, b, "--runtime", "both", "--json", "--threads", "1")
	var r verify.Report
	if code != 0 || json.Unmarshal([]byte(js), &r) != nil {
		t.Fatalf("exit %d %s", code, errOut)
	}
	pairings := map[string]bool{}
	for _, s := range r.Sets {
		pairings[s.Pairing] = true
	}
	if len(pairings) != 4 || !r.Equal {
		t.Fatalf("%s, pairings %v", r.Summary, pairings)
	}
}
