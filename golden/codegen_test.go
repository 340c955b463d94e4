package golden_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/codegen"
	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/testmodels"
)

// codegenModels are the models whose generated code is kept under
// codegen/<model>/<lang>/ (each file with a .golden suffix, so the go tool
// does not build it): one or more per scheme and form — computed RoPE,
// stored interleaved partial RoPE, float16 RoPE, dynamic NTK, computed and
// stored sinusoids, a learned table, ALiBi, T5 buckets, Shaw tables, a
// clamped relative sinusoid (Transformer-XL), DeBERTa's log buckets,
// M-RoPE's sections, axial 2-D RoPE's rows and columns, complex-order
// embeddings, FLOATER's states (unrolled and in a Loop). A
// change of the generator shows in their diffs; the generated code is
// checked against the models by codegen's own acceptance test.
var codegenModels = []string{"rope_llama", "rope_gptj", "rope_llama_fp16", "rope_ntk", "sinusoidal_concat", "sinusoidal_fairseq",
	"learned_gpt2", "alibi_mpt", "t5_encoder", "relative_shaw", "relative_transfo_xl", "disentangled_deberta",
	"rope_mrope", "rope_axial_vit", "complex_order", "floater_unrolled", "floater_loop"}

func TestGoldenCodegen(t *testing.T) {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, name := range codegenModels {
		i := slices.IndexFunc(man.Models, func(e testmodels.Entry) bool { return e.Name == name })
		if i < 0 {
			t.Fatalf("no corpus model %s", name)
		}
		path := man.Models[i].ModelPath()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := graph.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		rep, ctx, err := audit.AuditModel(m, name, passes.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, lang := range emit.Languages {
			res, err := codegen.Generate(rep, ctx, emit.Options{Lang: lang, Package: strings.ReplaceAll(name, "_", ""),
				Model: name + ".onnx", SHA256: fmt.Sprintf("%x", sha256.Sum256(data))})
			if err != nil {
				t.Fatalf("%s, %s: %v", name, lang, err)
			}
			dir := filepath.Join("codegen", name, lang)
			for _, f := range res.Files {
				path := filepath.Join(dir, f.Name+".golden")
				want[path] = true
				if *update {
					if err := os.MkdirAll(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, f.Data, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				b, err := os.ReadFile(path)
				if err != nil {
					t.Errorf("%v (run go test ./golden -update)", err)
					continue
				}
				if !bytes.Equal(b, f.Data) {
					t.Errorf("%s: the generated code differs from the golden file (go test ./golden -update after checking why):\n%s", path, firstDiff(b, f.Data))
				}
			}
		}
	}
	// No stale files.
	err = filepath.WalkDir("codegen", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || want[path] {
			return err
		}
		if *update {
			return os.Remove(path)
		}
		t.Errorf("%s: not generated any more (go test ./golden -update removes it)", path)
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}
