package verify_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/onnxpe/onnxpe/verify"
)

func loadModel(t testing.TB, path string) *graph.Model {
	t.Helper()
	m, err := graph.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func corpus(t testing.TB) []testmodels.Entry {
	t.Helper()
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Models) < 27 {
		t.Fatalf("only %d corpus models", len(man.Models))
	}
	return man.Models
}

func entry(t testing.TB, name string) testmodels.Entry {
	t.Helper()
	for _, e := range corpus(t) {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no corpus model %s", name)
	return testmodels.Entry{}
}

// roleOf maps the manifest's input roles to verify's.
var roleOf = map[string]verify.Role{
	"input_ids": verify.RoleTokenIDs, "attention_mask": verify.RoleAttentionMask, "position_ids": verify.RolePositionIDs,
	"token_type_ids": verify.RoleTableIndex, "pixel_values": verify.RoleFeatures, "past_key": verify.RolePastKV, "past_value": verify.RolePastKV,
}

// TestCorpusEqualToItsCopies compares every corpus model with itself,
// with ONNX Runtime's two optimised saves of it and with a copy of it
// whose weights are external data: all must be equal under the default
// sweep. The analysis behind the sweep is checked against the manifest:
// every input's role, the vocabulary, and that the sweep reaches the
// largest position the model's stored table allows.
func TestCorpusEqualToItsCopies(t *testing.T) {
	ctx := context.Background()
	for _, e := range corpus(t) {
		t.Run(e.Name, func(t *testing.T) {
			dir := filepath.Dir(e.ModelPath())
			a := loadModel(t, e.ModelPath())
			ext := filepath.Join(t.TempDir(), "model.onnx")
			if err := loadModel(t, e.ModelPath()).Save(ext, graph.SaveOptions{External: graph.ExternalizeLarge, Threshold: 256}); err != nil {
				t.Fatal(err)
			}
			extModel := loadModel(t, ext)
			external := 0
			for _, v := range extModel.Graph.Initializers {
				if v.Const.IsExternal() {
					external++
				}
			}
			if external == 0 {
				t.Fatalf("the external-data copy has no external tensor")
			}
			for _, b := range []struct{ name, path string }{
				{"itself", e.ModelPath()}, {"ort_basic", filepath.Join(dir, "ort_basic.onnx")},
				{"ort_extended", filepath.Join(dir, "ort_extended.onnx")}, {"external data", ext},
			} {
				made := verify.SessionsMade()
				r, err := verify.Compare(ctx, a, loadModel(t, b.path), verify.Options{Seed: 1, PathA: e.ModelPath(), PathB: b.path})
				if err != nil {
					t.Fatalf("against %s: %v", b.name, err)
				}
				// One session per model: the analysis' probes evaluate
				// their tables with A's session.
				if n := verify.SessionsMade() - made; n != 2 {
					t.Errorf("against %s: %d sessions made, want 2 (one per model)", b.name, n)
				}
				if !r.Equal {
					t.Errorf("against %s: %s", b.name, r.Summary)
				}
				if len(r.Sets) < 2 {
					t.Errorf("against %s: only %d input sets", b.name, len(r.Sets))
				}
				if b.name != "itself" {
					continue
				}
				checkAnalysis(t, &e, r)
			}
			// With the audit's findings as hints (what the command does).
			h, err := verify.AuditHints(a)
			if err != nil {
				t.Fatalf("audit: %v", err)
			}
			for name, role := range h.Suggested {
				for _, in := range e.Inputs {
					if in.Name == name && roleOf[in.Role] != role {
						t.Logf("the audit suggests %s is %s, the manifest says %s", name, role, in.Role)
					}
				}
			}
			pb := filepath.Join(dir, "ort_extended.onnx")
			r, err := verify.Compare(ctx, a, loadModel(t, pb), verify.Options{Seed: 1, Hints: h})
			if err != nil {
				t.Fatalf("with the audit's hints: %v", err)
			}
			if !r.Equal {
				t.Errorf("with the audit's hints: %s", r.Summary)
			}
			checkAnalysis(t, &e, r)
		})
	}
}

func checkAnalysis(t *testing.T, e *testmodels.Entry, r *verify.Report) {
	t.Helper()
	an := r.Analysis
	for _, in := range e.Inputs {
		var got *verify.InputInfo
		for i := range an.Inputs {
			if an.Inputs[i].Name == in.Name {
				got = &an.Inputs[i]
			}
		}
		if got == nil {
			t.Errorf("input %s not analysed", in.Name)
			continue
		}
		if want := roleOf[in.Role]; got.Role != want {
			t.Errorf("input %s: role %s (%s), want %s", in.Name, got.Role, got.Evidence, want)
		}
		if in.Role == "input_ids" && got.Rows != in.VocabSize {
			t.Errorf("input %s: %d rows, want the vocabulary %d", in.Name, got.Rows, in.VocabSize)
		}
	}
	// The largest position fed to the model.
	reached := -1
	for _, s := range r.Sets {
		if s.Spec != nil {
			reached = max(reached, s.Spec.Offset+s.Spec.Past+s.Spec.Seq-1)
		}
	}
	for _, f := range e.Findings {
		mp, ok := f.Params["max_positions"].(float64)
		if !ok || e.Name == "learned_vit" { // ViT adds its whole table: no sequence axis
			continue
		}
		off, _ := f.Params["position_offset"].(float64)
		if want := int(mp) - 1 - int(off); reached < want {
			t.Errorf("the sweep reaches position %d; the stored table allows %d (%v rows, offset %v)", reached, want, mp, off)
		}
	}
	if len(r.Skipped) > 0 {
		for _, s := range r.Skipped {
			t.Logf("skipped %s: %s", s.Name, s.Reason)
		}
	}
}

// TestCompareReferenceReproducesPyTorch compares every corpus model's
// outputs with PyTorch's, stored beside it, under the default tolerance.
func TestCompareReferenceReproducesPyTorch(t *testing.T) {
	for _, e := range corpus(t) {
		t.Run(e.Name, func(t *testing.T) {
			m := loadModel(t, e.ModelPath())
			sets, err := verify.ReadSets(e.TestDataDir(), m, true)
			if err != nil {
				t.Fatal(err)
			}
			r, err := verify.CompareReference(context.Background(), m, e.TestDataDir(), verify.Options{Inputs: sets})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Equal || len(r.Sets) != 1 || len(r.Sets[0].Outputs) != len(e.Outputs) {
				t.Fatalf("%s (%d sets)", r.Summary, len(r.Sets))
			}
		})
	}
}
