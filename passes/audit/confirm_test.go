package audit_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	st "github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/scheme/nope"
	"github.com/onnxpe/onnxpe/passes/scheme/t5"
)

// TestStructureWithoutEvidenceIsNotReported: T5's bias added to the
// scores and subtracted again before the Softmax (a bias a model computes
// and then cancels). The T5 detector reads the structure of the first
// term; the scores do not change with the positions: no T5 finding (the
// trace says why), and the blocks are nope, with their measurement.
func TestStructureWithoutEvidenceIsNotReported(t *testing.T) {
	bias := func(e *st.Env, scores *graph.Value) *graph.Value {
		r := e.RangeS()
		rel := e.Op("Sub", nil, e.Op("Unsqueeze", nil, r, e.Ints(0)), e.Op("Unsqueeze", nil, r, e.Ints(1)))
		bk := st.T5Bucket(e, rel, 16, 64, true)
		emb := e.Op("Gather", nil, e.Weight(16, e.Heads), bk)
		b := e.Op("Unsqueeze", nil, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 2, 0, 1)}, emb), e.Ints(0))
		return e.Op("Sub", nil, e.Op("Add", nil, scores, b), b)
	}
	m := st.BuildExporterForm(st.ExporterForm{Name: "t5_flat_table", Heads: 2, HD: 8, Bias: bias})
	st.Executes(t, m, 6)
	r, ctx, err := audit.AuditModel(m, "t5_flat_table", passes.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Findings {
		if f.Scheme == t5.Name {
			t.Errorf("a T5 finding whose blocks' scores do not change with the positions: %+v", f)
		}
		if f.Measured == nil {
			t.Errorf("%s finding without evidence", f.Scheme)
		}
	}
	if !slices.Equal(r.Schemes, []string{nope.Name}) {
		t.Errorf("schemes %v, want [nope]", r.Schemes)
	}
	said := false
	for _, mi := range ctx.Trace() {
		said = said || mi.Rule == "evidence" && strings.Contains(mi.Reason, "do not change with the positions") ||
			mi.Rule == t5.Name && mi.Reason != ""
	}
	if !said {
		t.Errorf("the trace does not say why T5 was not reported: %v", ctx.Trace())
	}
}
