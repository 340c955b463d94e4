package verify_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/onnxpe/onnxpe/verify"
)

// TestAuditAgreesWithTheAnalysis compares the input roles the audit
// suggests with verify's own reading of the graph, on every corpus model
// (and its ONNX Runtime saves), the Go-built models, the vendored real
// models and the Hugging Face exports: where both have a role they must agree, and verify, given the
// audit's hints, must note no disagreement. The one note it may give is
// the warning about a model's own shapes that no hint changes: position
// ids [1, 1024] beside float data [2, 1024, 16] in
// ee_llama_dynamo_torchlib_functions hold one row for a batch of two,
// whose rows then cannot sit at different positions (rowNotes: each
// must appear). The real models too large to
// run in a unit test are compared on the audit's side only where verify's
// static reading has a role; they are counted.
func TestAuditAgreesWithTheAnalysis(t *testing.T) {
	type model struct {
		name string
		m    *graph.Model
	}
	var ms []model
	load := func(name, path string) {
		m, err := graph.LoadWith(path, graph.LoadOptions{AllowMissingExternal: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ms = append(ms, model{name, m})
	}
	for _, e := range corpus(t) {
		dir := filepath.Dir(e.ModelPath())
		load(e.Name, e.ModelPath())
		load(e.Name+".ort_basic", filepath.Join(dir, "ort_basic.onnx"))
		load(e.Name+".ort_extended", filepath.Join(dir, "ort_extended.onnx"))
	}
	for _, s := range testmodels.Synthetics() {
		ms = append(ms, model{s.Name, s.Build()})
	}
	for _, f := range testmodels.DeployForms {
		ms = append(ms, model{string(f), testmodels.BuildDeploy(f, testmodels.DefaultDeploy)})
	}
	real, _ := filepath.Glob(filepath.Join("..", "passes", "testdata", "realmodels", "*", "model.onnx"))
	if len(real) < 10 {
		t.Fatalf("only %d real models", len(real))
	}
	for _, p := range real {
		load(filepath.Base(filepath.Dir(p)), p)
	}
	// The Hugging Face exports (transformers' own modeling code): verify
	// read their attention_mask as positions until 3f26967, and their
	// decoders' token ids (a table shared with the encoder) too.
	hf, _ := filepath.Glob(filepath.Join(testmodels.HFModelsDir(), "hf-*", "model.onnx"))
	if len(hf) != 40 {
		t.Fatalf("%d Hugging Face exports, want 40", len(hf))
	}
	for _, p := range hf {
		load(filepath.Base(filepath.Dir(p)), p)
	}
	rowNotes := map[string]string{
		"ee_llama_dynamo_torchlib_functions": `position input "primals_7" has no batch axis: every row of a batch has the same positions`,
	}
	compared, unrun := 0, 0
	for _, x := range ms {
		h, err := verify.AuditHints(x.m)
		if err != nil {
			t.Errorf("%s: audit: %v", x.name, err)
			continue
		}
		a, err := verify.Analyze(x.m, verify.Hints{}, 0)
		if err != nil {
			// Models the executor cannot run (BeamSearch, absent weights,
			// ops it does not have) or too heavy: verify's probes fail.
			unrun++
			t.Logf("%s: verify cannot analyse it: %v", x.name, err)
			continue
		}
		for _, in := range a.Inputs {
			r, ok := h.Suggested[in.Name]
			if !ok || in.Role == verify.RoleUnknown {
				continue
			}
			compared++
			if r != in.Role {
				t.Errorf("%s: %s: the audit says %s, verify %s (%s)", x.name, in.Name, r, in.Role, in.Evidence)
			}
		}
		a, err = verify.Analyze(x.m, h, 0)
		if err != nil {
			t.Errorf("%s: with the audit's hints: %v", x.name, err)
			continue
		}
		for _, n := range a.Notes {
			if want, ok := rowNotes[x.name]; ok && strings.HasPrefix(n, want) {
				t.Logf("%s: the expected note: %s", x.name, n)
				delete(rowNotes, x.name)
				continue
			}
			t.Errorf("%s: %s", x.name, n)
		}
	}
	for name, n := range rowNotes {
		t.Errorf("%s: no note %q", name, n)
	}
	t.Logf("%d models, %d roles compared, %d models verify cannot analyse", len(ms), compared, unrun)
	if compared < 150 {
		t.Errorf("only %d roles compared", compared)
	}
}
