//go:build !ort

package cli

import (
	"strings"
	"testing"
)

// TestVerifyRuntimeORTInPureGoBuild: the pure-Go build says how to get
// ONNX Runtime, in one line, exit 2.
func TestVerifyRuntimeORTInPureGoBuild(t *testing.T) {
	a := corpusFile("rope_llama", "model.onnx")
	for _, rt := range []string{"ort", "both"} {
		code, out, errOut := runCLI(t, "verify", a, a, "--runtime", rt)
		if code != 2 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 ||
			!strings.Contains(errOut, "-tags ort") || !strings.Contains(errOut, "ONNXPE_ORT_LIB") {
			t.Errorf("--runtime %s: exit %d %q", rt, code, errOut)
		}
	}
}
