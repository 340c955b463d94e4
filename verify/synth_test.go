package verify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/onnxpe/onnxpe/verify"
)

// TestGoBuiltLlamaVariantsAreEqual compares the Go-built Llamas, which
// share weights and differ only in how the rotation is written (computed,
// stored tables, both fused RotaryEmbedding ops, a local function): with
// the stored-table variant as A (its 128-row cache bounds the sweep's
// positions), every other variant is equal. With a computed variant as A
// the sweep feeds positions up to 4095, which the 128-row cache of B
// cannot hold: that set is an error of B and the pair is not equal.
func TestGoBuiltLlamaVariantsAreEqual(t *testing.T) {
	var a *graph.Model
	others := map[string]*graph.Model{}
	for _, s := range testmodels.Synthetics() {
		if !strings.HasPrefix(s.Name, "llama_") {
			continue
		}
		if s.Name == "llama_cache_shared" {
			a = s.Build()
		} else {
			others[s.Name] = s.Build()
		}
	}
	if a == nil || len(others) < 4 {
		t.Fatalf("variants: %d", len(others))
	}
	for name, b := range others {
		r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !r.Equal {
			t.Errorf("%s: %s", name, r.Summary)
		}
		if r.Analysis.MaxPosition != 127 || r.Analysis.MaxLength != 128 {
			t.Errorf("%s: largest position %d, longest sequence %d; the cache has 128 rows", name, r.Analysis.MaxPosition, r.Analysis.MaxLength)
		}
	}
	r, err := verify.Compare(context.Background(), others["llama_opset18"], a, verify.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	far := false
	for _, s := range r.Sets {
		if s.Name == "far" && !s.Equal && strings.Contains(s.Error, "out of range") {
			far = true
		}
	}
	if r.Equal || !far {
		t.Errorf("computed A vs 128-row cache B: %s", r.Summary)
	}
}

// TestGoBuiltSinusoidalSubgraphs verifies the sinusoidal models whose
// table comes from an If or a Loop against themselves.
func TestGoBuiltSinusoidalSubgraphs(t *testing.T) {
	for _, s := range testmodels.Synthetics() {
		if !strings.HasPrefix(s.Name, "sinusoidal_") {
			continue
		}
		r, err := verify.Compare(context.Background(), s.Build(), s.Build(), verify.Options{Seed: 1})
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if !r.Equal || len(r.Sets) < 3 {
			t.Errorf("%s: %s", s.Name, r.Summary)
		}
		t.Logf("%s: longest %d (%s)", s.Name, r.Analysis.MaxLength, r.Analysis.MaxLengthFrom)
	}
}

// TestTableInsideAnIfIsReadToItsLastRow: sinusoidal_if reads a 64-row
// table (inside an If) up to 64 tokens and computes its rows beyond. The
// sweep runs a 64-token set for the table, which is the only one to see a
// change of its last row.
func TestTableInsideAnIfIsReadToItsLastRow(t *testing.T) {
	var build func() *graph.Model
	for _, s := range testmodels.Synthetics() {
		if s.Name == "sinusoidal_if" {
			build = s.Build
		}
	}
	a, b := build(), build()
	editConst(t, b, func(n string, d []int64, _ []float32) bool { return n == "pe_table" && dimsAre(d, 64, 16) },
		func(v []float32) { alternate(v[63*16 : 64*16]) })
	r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	set, out := firstDifference(t, r)
	if set.Name != "table64" || out.Worst.Position == nil || *out.Worst.Position != 63 {
		t.Fatalf("%s", r.Summary)
	}
	for _, s := range r.Sets {
		if s.Name != "table64" && !s.Equal {
			t.Errorf("set %s differs: only 64 tokens read the table's last row", s.Name)
		}
	}
}

// TestOutputsMatchedByPositionWhenNamesDiffer renames B's output: the
// outputs are compared by position, with a warning, and the report names
// both.
func TestOutputsMatchedByPositionWhenNamesDiffer(t *testing.T) {
	e := entry(t, "rope_kvcache")
	a := loadModel(t, e.ModelPath())
	b := loadModel(t, e.ModelPath())
	for i, v := range b.Graph.Outputs {
		v.Name = fmt.Sprintf("out%d", i)
	}
	data, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if b, err = graph.Decode(data, ""); err != nil {
		t.Fatal(err)
	}
	r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal || len(r.Warnings) == 0 || !strings.Contains(r.Warnings[0], "compared by position") {
		t.Fatalf("%s; warnings %q", r.Summary, r.Warnings)
	}
	o := r.Sets[0].Outputs
	if len(o) != 5 || o[0].Name != "logits" || o[0].NameB != "out0" || o[4].NameB != "out4" {
		t.Fatalf("outputs %+v", o)
	}
}

// TestDeployFormsAgainstThemselves verifies each deployment-form model
// (testmodels.BuildDeploy: GenAI's GroupQueryAttention, RotaryEmbedding +
// MultiHeadAttention with a key padding mask, EmbedLayerNormalization +
// Attention, the opset-24 static cache through TensorScatter) against a
// second copy: the sweep's inputs must be ones the model accepts (the
// analysis reads the masks, caches and write indices these ops take by
// their contracts), so none is skipped.
func TestDeployFormsAgainstThemselves(t *testing.T) {
	skipped := 0
	for _, f := range testmodels.DeployForms {
		a, b := testmodels.BuildDeploy(f, testmodels.DefaultDeploy), testmodels.BuildDeploy(f, testmodels.DefaultDeploy)
		r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1})
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if !r.Equal {
			t.Errorf("%s: %s", f, r.Summary)
		}
		for _, s := range r.Skipped {
			skipped++
			t.Errorf("%s: skipped %s: %s", f, s.Name, s.Reason)
		}
		// GroupQueryAttention runs several tokens after a cache for one
		// sequence only (as ONNX Runtime does): the chunk is one row.
		if f == testmodels.FormGenAIGQA {
			chunk := false
			for _, s := range r.Sets {
				chunk = chunk || s.Name == "chunk" && s.Spec != nil && s.Spec.Batch == 1 && s.Spec.Seq == 4 && s.Spec.Past == 5
			}
			if !chunk || r.Analysis.OneRowChunks == "" {
				t.Errorf("%s: no chunk of 4 tokens after 5 for one sequence (%q)", f, r.Analysis.OneRowChunks)
			}
		}
	}
	t.Logf("%d deployment forms, %d sets skipped", len(testmodels.DeployForms), skipped)
}
