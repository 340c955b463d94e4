// Package conformance locates the conformance data (ONNX's backend tests
// and ONNX Runtime's RotaryEmbedding vectors) for tests. The data is
// vendored in the repository under testdata/conformance (see its README);
// ONNXPE_CONFORMANCE overrides the location.
package conformance

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir returns the conformance folder, or "" when it cannot be found.
func Dir() string {
	if d := os.Getenv("ONNXPE_CONFORMANCE"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	d := filepath.Join(filepath.Dir(file), "..", "..", "testdata", "conformance")
	if fi, err := os.Stat(d); err == nil && fi.IsDir() {
		return d
	}
	return ""
}

// Require returns the conformance folder or fails the test: the data is
// part of the test suite, so its absence is an error, not a skip.
func Require(t testing.TB) string {
	t.Helper()
	d := Dir()
	if d == "" {
		t.Fatal("conformance data not found: testdata/conformance is missing from the repository (or set ONNXPE_CONFORMANCE)")
	}
	return d
}

// Case returns the folder of one case, e.g. Case(t, "onnx-node", "test_gather_0").
func Case(t testing.TB, suite, name string) string {
	return filepath.Join(Require(t), suite, name)
}

// Models lists the model.onnx of every case directly under a suite folder
// (onnx-node, onnx-simple, ort-rotary).
func Models(t testing.TB) []string {
	m, err := filepath.Glob(filepath.Join(Require(t), "*", "*", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// BackendModels lists the model.onnx of every case of the onnx-backend
// sets (node, simple, pytorch-converted, pytorch-operator: the backend
// tests of the onnx repository at 1.23.0-dev).
func BackendModels(t testing.TB) []string {
	m, err := filepath.Glob(filepath.Join(Require(t), "onnx-backend", "*", "*", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) == 0 {
		t.Fatal("no onnx-backend models in the conformance data")
	}
	return m
}
