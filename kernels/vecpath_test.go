package kernels

import (
	"os"
	"testing"
)

func pureGoEnv() bool { return os.Getenv("ONNXPE_PUREGO") == "1" }

// requireVector logs how much work a vector path did (ran of total) and
// fails when the AVX-512 loops should have run but did none of it: a
// test of them that always took the scalar path could not fail.
func requireVector(t *testing.T, what string, ran, total int) {
	t.Helper()
	t.Logf("%s: vector path took %d of %d", what, ran, total)
	if vectorExpected() && ran == 0 {
		t.Errorf("%s: the CPU has AVX-512 but the vector path never ran", what)
	}
}
