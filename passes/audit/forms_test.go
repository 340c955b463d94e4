package audit_test

import (
	"testing"

	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/internal/schemetest"
)

func TestDetectorsOnGoBuiltForms(t *testing.T) {
	rope := func(name, positions, form, rotate, scores string, partial int) schemetest.Form {
		return schemetest.Form{Name: name, Heads: 2, HD: 16, Positions: positions, Rope: form, Rotate: rotate, Scores: scores, Partial: partial, Base: 10000}
	}
	cases := []struct {
		spec schemetest.Form
		want map[string]any // rope or alibi params that must match
	}{
		{rope("split_range_fused", "range", "computed", "split", "fusedmatmul", 0), map[string]any{"layout": "half_split", "base": 10000.0, "rotary_dim": 16, "head_dim": 16, "scaling": "none", "num_heads": 2}},
		{rope("split_partial_einsum", "range", "computed", "split", "einsum", 8), map[string]any{"layout": "half_split", "base": 10000.0, "rotary_dim": 8, "head_dim": 16}},
		{rope("pairs_by_gather_nonzero", "nonzero", "computed", "gather_pairs", "matmul", 0), map[string]any{"layout": "interleaved", "base": 10000.0, "rotary_dim": 16}},
		{rope("slice_cumsum_table", "cumsum", "cache_table", "slice", "matmul", 0), map[string]any{"layout": "half_split", "base": 10000.0, "max_positions": 64}},
		{rope("caches_as_inputs", "input", "cache_input", "slice", "matmul", 0), map[string]any{"layout": "half_split", "base": nil, "scaling": nil, "max_positions": 64}},
		{func() schemetest.Form {
			s := rope("linear_base_5e5", "input", "computed", "slice", "einsum", 0)
			s.Base, s.Linear = 500000, 4
			return s
		}(), map[string]any{"base": 500000.0, "scaling": "linear", "factor": 4.0}},
		{schemetest.Form{Name: "alibi_cumsum", Heads: 4, HD: 8, Positions: "cumsum", Scores: "matmul", Alibi: true}, map[string]any{"num_heads": 4, "slopes": []any{0.25, 0.0625, 0.015625, 0.00390625}, "symmetric": false, "positions": "attention_mask_cumsum"}},
		{schemetest.Form{Name: "alibi_symmetric_einsum", Heads: 4, HD: 8, Positions: "range", Scores: "einsum", Alibi: true, Symmetric: true}, map[string]any{"num_heads": 4, "symmetric": true, "positions": "relative"}},
		{schemetest.Form{Name: "nope_fusedmatmul", Heads: 2, HD: 8, Positions: "range", Scores: "fusedmatmul"}, nil},
	}
	s := schema(t)
	for _, c := range cases {
		t.Run(c.spec.Name, func(t *testing.T) {
			m := schemetest.BuildForm(c.spec)
			r, ctx, err := audit.AuditModel(m, c.spec.Name, passes.Options{Trace: true})
			if err != nil {
				t.Fatal(err)
			}
			validate(t, s, r)
			want := "nope"
			switch {
			case c.spec.Rope != "":
				want = "rope"
			case c.spec.Alibi:
				want = "alibi"
			}
			if len(r.Schemes) != 1 || r.Schemes[0] != want || len(r.Layers) != 1 {
				t.Fatalf("schemes %v, layers %v; want one %s layer (trace %v)", r.Schemes, r.Layers, want, ctx.Trace())
			}
			got := schemetest.JSONParams(r.Findings[0])
			for k, w := range c.want {
				if !schemetest.Agree(w, got[k]) && !(w == nil && got[k] == nil) {
					t.Errorf("%s = %v, want %v (params %v)", k, got[k], w, got)
				}
			}
		})
	}
}
