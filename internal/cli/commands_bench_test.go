package cli

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkRewriteCommand is onnxpe rewrite of the corpus Llama (the audit,
// the rewrite, verify's sweep of both models, the write).
func BenchmarkRewriteCommand(b *testing.B) {
	model := filepath.Join("..", "..", "testmodels", "models", "rope_llama", "model.onnx")
	out := filepath.Join(b.TempDir(), "r.onnx")
	b.ReportAllocs()
	for b.Loop() {
		if code := Run(&IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}, []string{"rewrite", model, "-o", out}); code != 0 {
			b.Fatalf("exit %d", code)
		}
	}
}

// BenchmarkExtendCommand is make demo's extension: the corpus Llama from 256
// to 1024 positions with YaRN, every check.
func BenchmarkExtendCommand(b *testing.B) {
	model := filepath.Join("..", "..", "testmodels", "models", "rope_llama", "model.onnx")
	out := filepath.Join(b.TempDir(), "x.onnx")
	b.ReportAllocs()
	for b.Loop() {
		if code := Run(&IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}, []string{"extend", model, "-o", out, "--to", "1024", "--method", "yarn", "--original-max-positions", "256"}); code != 0 {
			b.Fatalf("exit %d", code)
		}
	}
}
