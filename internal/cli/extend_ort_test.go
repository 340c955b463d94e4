//go:build ort

package cli

import (
	"testing"
)

func requireORT(t *testing.T) {
	t.Helper()
	if !ortRuns() {
		t.Fatal("the ort build needs ONNXPE_ORT_LIB (make test-ort sets it)")
	}
}

// TestExtendRoPEORT: every RoPE model of the corpus extended 4x with every
// method: its audit reports the rule with its exact parameters, it equals
// the reference built from the same weights with the rule (verify's sweep
// up to N), and it runs N positions in onnxpe's executor and in ONNX
// Runtime, which agree.
func TestExtendRoPEORT(t *testing.T) {
	requireORT(t)
	if n := ropeMatrix(t, nil); n != len(ropeCorpus)*5 {
		t.Fatalf("%d cases", n)
	}
}

// TestExtendGoBuiltRoPEORT: the Go-built forms the exporter does not make
// (opset 18, stored tables shared by the layers, rotate_half in a
// model-local function, fused RotaryEmbedding of both domains, and the
// deployment form with GroupQueryAttention's do_rotary) with every rule
// (dynamic NTK computes the caches for every call; it is refused for
// GroupQueryAttention, whose caches would follow its total_sequence_length,
// which the audit cannot read back). (The RotaryEmbedding +
// MultiHeadAttention form is left out: verify's decode set gives
// MultiHeadAttention a [batch, 1] mask onnxpe's kernel refuses, for the
// original model as for the extended one.)
func TestExtendGoBuiltRoPEORT(t *testing.T) {
	requireORT(t)
	dir := t.TempDir()
	forms := []struct {
		model string
		orig  int
		flags []string
		table bool
	}{
		{model: "llama_opset18", orig: 32, flags: []string{"--original-max-positions", "32"}},
		{model: "llama_local_function", orig: 32, flags: []string{"--original-max-positions", "32"}},
		{model: "llama_cache_shared", orig: 128, table: true},
		{model: "llama_fused_ms", orig: 128, table: true},
		{model: "llama_fused_onnx", orig: 128, table: true},
		{model: "genai_gqa_rotary", orig: 64, table: true},
	}
	for _, f := range forms {
		for _, method := range []string{"linear", "ntk", "yarn", "llama3", "dynamic-ntk"} {
			c := extendCase{model: f.model, to: 4 * f.orig, args: append([]string{"--method", method}, f.flags...)}
			t.Run(f.model+"/"+method, func(t *testing.T) {
				if f.model == "genai_gqa_rotary" && method == "dynamic-ntk" {
					extendRefused(t, dir, c, "dynamic-ntk does not fit")
					return
				}
				_, out := extendOK(t, dir, c)
				checkAudit(t, c, out, method, f.orig, 10000, f.table && method != "dynamic-ntk")
			})
		}
	}
}

// TestExtendLearnedORT: learned_gpt2 and learned_bert extended to 4x their
// table, and the tables stored transposed: the first n rows bit for bit,
// outputs at lengths up to n exactly equal, 4n positions run in both
// runtimes.
func TestExtendLearnedORT(t *testing.T) {
	requireORT(t)
	dir := t.TempDir()
	for _, m := range []string{"learned_gpt2", "learned_bert"} {
		t.Run(m, func(t *testing.T) { learnedCase(t, dir, m, 64, 0, 0) })
	}
	for _, c := range transposedTables {
		t.Run(c.model, func(t *testing.T) {
			saveTransposed(t, dir, c)
			learnedCase(t, dir, c.model, c.n, 1, c.offset)
		})
	}
}

// TestExtendTablesORT: the sinusoidal, ALiBi and T5 models extended 4x
// equal the originals up to their maximum and run 4x in both runtimes.
func TestExtendTablesORT(t *testing.T) {
	requireORT(t)
	if n := tableMatrix(t, nil); n != len(tableCases) {
		t.Fatalf("%d cases", n)
	}
}
