package audit_test

import (
	"testing"

	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
	"github.com/onnxpe/onnxpe/passes/schemes"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestPositionsOfTheCorpus checks where the detectors say each encoding
// reads its positions: an input, a Range offset by the KV-cache length,
// the start of a slice of a stored table, the rows 0..S-1 of a computed
// table.
func TestPositionsOfTheCorpus(t *testing.T) {
	want := map[string]string{
		"rope_llama":                      "position_ids",
		"rope_llama_fp16":                 "position_ids",
		"rope_gptj":                       "position_ids",
		"rope_linear":                     "position_ids",
		"rope_kvcache":                    "/Range_output_0 (/Cast_output_0../Cast_1_output_0)",
		"rope_neox":                       "0 + 0..S-1",
		"rope_ntk":                        "unknown",
		"llama4_nope":                     "position_ids",
		"sinusoidal_concat":               "0 + 0..S-1",
		"sinusoidal_interleaved_computed": "/pos/Range_output_0 (0../pos/Cast_output_0)",
		"sinusoidal_fairseq":              "/embed_positions/CumSum_output_0",
		"sinusoidal_marian":               "/embed_positions/Range_output_0 (0../embed_positions/Cast_output_0)",
		"learned_gpt2":                    "/Range_output_0 (0../Cast_output_0)",
		"learned_bert":                    "/embeddings/Slice_output_0 (0../embeddings/Unsqueeze_output_0)",
		"learned_vit":                     "unknown",
	}
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range listed(t, man.Models, entryName, want) {
		w := want[e.Name]
		t.Run(e.Name, func(t *testing.T) {
			m := loadCorpus(t, e)
			_, c, err := audit.AuditModel(m, e.Name, passes.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range schemes.Detectors() {
				for _, f := range passes.Result(c, p) {
					switch ev := f.Evidence.(type) {
					case *rope.Evidence:
						got = append(got, ev.Positions.String())
					case *absolute.TableEvidence:
						got = append(got, ev.Positions.String())
					}
				}
			}
			if len(got) != 1 || got[0] != w {
				t.Errorf("positions %q, want %q", got, w)
			}
		})
	}
}
