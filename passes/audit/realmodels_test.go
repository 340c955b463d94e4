package audit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/testmodels"
)

// realTruth is a testdata/realmodels/<name>/truth.json.
type realTruth struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Truth  struct {
		Schemes   []string                  `json:"schemes"`
		Fused     bool                      `json:"fused"`
		Params    map[string]map[string]any `json:"params"`
		Uncertain []string                  `json:"uncertain_params"`
	} `json:"truth"`
}

// realAliases map a truth's keys onto the report's vocabulary.
var realAliases = map[string]string{"hidden_size": "dim", "offset": "position_offset"}

// realInformational are truth keys that describe the model without being a
// parameter of the report, with the reason.
var realInformational = map[string]string{
	"position_ids":                "a description of where positions come from",
	"learned_absolute/num_heads":  "learned_absolute has no head count in the vocabulary",
	"token_type_vocab":            "token types are not a positional encoding",
	"alibi/head_dim":              "alibi has no head dimension in the vocabulary",
	"bias":                        "a description of the bias",
	"positions":                   "a description of the positions (the report names the kind)",
	"rope/long_factor_first4":     "compared with long_factor[:4]",
	"rope/short_factor_first4":    "compared with short_factor[:4]",
	"alibi/slope":                 "compared with every entry of slopes",
	"learned_absolute/max_tokens": "",
}

// realNotHeld are certain params of a truth that the file does not hold
// by the rules of the audit, with the reason: the audit must report them
// null with a note naming them (a disagreement with the truth, printed).
// (testdata/realmodels/README.md gives the reasoning.)
var realNotHeld = map[string]string{
	"onnx_rotary_embedding_3d_input/rope/scaling": "the cos/sin caches are graph inputs (random in the generator): " +
		"no scaling rule is in the file",
}

// TestRealModels audits the real models of testdata/realmodels (files other
// tools wrote) and compares with their truth: schemes, the certain params,
// and null with a note for the params the file does not hold.
func TestRealModels(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(testmodels.RealModelsDir(), "*", "truth.json"))
	if len(dirs) < 10 {
		t.Fatalf("only %d real models", len(dirs))
	}
	s := schema(t)
	for _, tp := range dirs {
		dir := filepath.Dir(tp)
		var tr realTruth
		b, err := os.ReadFile(tp)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &tr); err != nil {
			t.Fatal(err)
		}
		t.Run(tr.Name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != tr.SHA256 {
				t.Fatal("model.onnx is not the file truth.json describes")
			}
			m, err := graph.LoadWith(filepath.Join(dir, "model.onnx"), graph.LoadOptions{AllowMissingExternal: true})
			if err != nil {
				t.Fatal(err)
			}
			r, _, err := audit.AuditModel(m, tr.Name, passes.Options{})
			if err != nil {
				t.Fatal(err)
			}
			validate(t, s, r)
			if fmt.Sprint(r.Schemes) != fmt.Sprint(tr.Truth.Schemes) {
				t.Fatalf("schemes %v, want %v", r.Schemes, tr.Truth.Schemes)
			}
			for scheme, params := range tr.Truth.Params {
				var fs []*passes.Finding
				for _, f := range r.Findings {
					if f.Scheme == scheme {
						fs = append(fs, f)
					}
				}
				if len(fs) == 0 {
					t.Errorf("no %s finding", scheme)
				}
				for _, f := range fs {
					if f.Fused != tr.Truth.Fused {
						t.Errorf("%s: fused %v, want %v", scheme, f.Fused, tr.Truth.Fused)
					}
					held := map[string]any{}
					for k, v := range params {
						if why, ok := realNotHeld[tr.Name+"/"+scheme+"/"+k]; ok {
							checkUncertain(t, scheme, []string{k}, f)
							t.Logf("%s: %s: truth %v, audit null: %s", scheme, k, v, why)
							continue
						}
						held[k] = v
					}
					checkRealParams(t, scheme, held, f)
					checkUncertain(t, scheme, tr.Truth.Uncertain, f)
				}
			}
		})
	}
}

func checkRealParams(t *testing.T, scheme string, want map[string]any, f *passes.Finding) {
	t.Helper()
	got := schemetest.JSONParams(f)
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w := want[k]
		switch k {
		case "long_factor_first4", "short_factor_first4":
			list, _ := got[strings.TrimSuffix(k, "_first4")].([]any)
			if len(list) < 4 || !schemetest.Agree(w, list[:4]) {
				t.Errorf("%s: %s: %v, want first four %v", scheme, k, list, w)
			}
			continue
		case "slope":
			list, _ := got["slopes"].([]any)
			for _, x := range list {
				if !schemetest.Agree(w, x) {
					t.Errorf("%s: slopes %v, want every one %v", scheme, list, w)
					break
				}
			}
			continue
		}
		if _, info := realInformational[k]; info {
			continue
		}
		if _, info := realInformational[scheme+"/"+k]; info {
			continue
		}
		key := k
		if a, ok := realAliases[k]; ok {
			key = a
		}
		g, ok := got[key]
		if !ok {
			t.Errorf("%s: param %s missing (want %v)", scheme, key, w)
			continue
		}
		if !schemetest.Agree(w, g) {
			t.Errorf("%s: param %s = %v, want %v", scheme, key, g, w)
		}
	}
}

// checkUncertain: a param the file does not hold is null, with a note
// naming it.
func checkUncertain(t *testing.T, scheme string, uncertain []string, f *passes.Finding) {
	t.Helper()
	got := schemetest.JSONParams(f)
	for _, k := range uncertain {
		g, inVocab := got[k]
		if !inVocab {
			continue // not a param of the report (scheme_label)
		}
		if g != nil {
			t.Errorf("%s: %s = %v, but the file does not hold it (want null)", scheme, k, g)
		}
		if !slices.ContainsFunc(f.Notes, func(n string) bool { return strings.Contains(n, k) }) {
			t.Errorf("%s: %s is null without a note (notes %q)", scheme, k, f.Notes)
		}
	}
}
