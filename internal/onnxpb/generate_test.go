package onnxpb_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates the bindings from onnx.proto with
// the pinned protoc-gen-go and compares them with the committed file.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("protoc is not installed (apt-get install protobuf-compiler); CI must check the generated code")
		}
		t.Skip("SKIP: protoc not installed; the staleness check of onnx.pb.go did not run")
	}
	plugin, err := exec.Command("go", "tool", "-n", "protoc-gen-go").Output()
	if err != nil {
		t.Fatalf("building the pinned protoc-gen-go: %v", err)
	}
	out := t.TempDir()
	root, _ := filepath.Abs("../..")
	cmd := exec.Command(protoc, "--plugin=protoc-gen-go="+strings.TrimSpace(string(plugin)),
		"--go_out="+out, "--go_opt=paths=source_relative", "internal/onnxpb/onnx.proto")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, msg)
	}
	got, err := os.ReadFile(filepath.Join(out, "internal/onnxpb/onnx.pb.go"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("onnx.pb.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("internal/onnxpb/onnx.pb.go is stale: run `make proto` and commit the result")
	}
}
