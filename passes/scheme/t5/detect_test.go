package t5_test

import (
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/audit"
	st "github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/scheme/t5"
)

// TestCorpus audits the corpus models whose golden reports have T5
// findings: each finding as the golden report has it.
func TestCorpus(t *testing.T) { st.CheckCorpus(t, t5.Name, audit.AuditModel) }

// rel is j - i as int64 [S, S].
func rel(e *st.Env) *graph.Value {
	r := e.RangeS()
	return e.Op("Sub", nil, e.Op("Unsqueeze", nil, r, e.Ints(0)), e.Op("Unsqueeze", nil, r, e.Ints(1)))
}

// gathered adds a [rows, heads] table gathered at idx [S, S] to scores,
// the heads moved to the front (bias [1, heads, S, S]).
func gathered(e *st.Env, scores, idx *graph.Value, rows int) *graph.Value {
	emb := e.Op("Gather", nil, e.Weight(rows, e.Heads), idx)
	bias := e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 2, 0, 1)}, emb)
	return e.Op("Add", nil, scores, e.Op("Unsqueeze", nil, bias, e.Ints(0)))
}

// TestForms: T5's bucket bias with bucket counts and distances the corpus
// does not have, each with the params the math gives.
func TestForms(t *testing.T) {
	cases := []struct {
		name  string
		heads int
		bias  func(e *st.Env, scores *graph.Value) *graph.Value
		want  map[string]any
	}{{
		// 16 buckets both ways, max_distance 64, the bucket function in
		// another order than Hugging Face's (Where, Min, Log of a Div).
		name: "bidirectional_16_buckets_64", heads: 4,
		bias: func(e *st.Env, scores *graph.Value) *graph.Value {
			return gathered(e, scores, st.T5Bucket(e, rel(e), 16, 64, true), 16)
		},
		want: map[string]any{"num_buckets": 16, "max_distance": 64, "bidirectional": true, "num_heads": 4, "shared_across_layers": false},
	}, {
		// A decoder's 24 buckets looking back only, max_distance 100, two
		// heads, under a causal Where.
		name: "causal_24_buckets_100", heads: 2,
		bias: func(e *st.Env, scores *graph.Value) *graph.Value {
			return st.CausalWhere(e, gathered(e, scores, st.T5Bucket(e, rel(e), 24, 100, false), 24))
		},
		want: map[string]any{"num_buckets": 24, "max_distance": 100, "bidirectional": false, "num_heads": 2},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := st.BuildExporterForm(st.ExporterForm{Name: c.name, Heads: c.heads, HD: 8, Bias: c.bias})
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, t5.Detect)
			f := st.Only(t, fs, trace)
			if f.Fused {
				t.Error("fused, want not")
			}
			st.WantParams(t, f, c.want)
		})
	}
}

// TestNearMisses: relative biases that are not T5's give no finding, and
// the trace says why.
func TestNearMisses(t *testing.T) {
	cases := []struct {
		name   string
		bias   func(e *st.Env, scores *graph.Value) *graph.Value
		reason string
	}{{
		// A table gathered by |j - i| mod 4: a function of key - query,
		// but periodic, which no bucket function of T5 is.
		name: "periodic_buckets",
		bias: func(e *st.Env, scores *graph.Value) *graph.Value {
			return gathered(e, scores, e.Op("Mod", nil, e.Op("Abs", nil, rel(e)), e.Int0(4)), 4)
		},
		reason: "the bucket map is not T5's",
	}, {
		// slope·log(1 + |j - i|) per head: relative, not linear, but
		// computed, with no table of buckets.
		name: "log_distance_computed",
		bias: func(e *st.Env, scores *graph.Value) *graph.Value {
			d := e.Op("Log", nil, e.Op("Add", nil, e.Op("Abs", nil, e.ToFloat(rel(e))), e.F0(1)))
			return e.Op("Add", nil, scores, e.Op("Mul", nil, e.Floats([]int64{2, 1, 1}, []float32{-0.5, -0.25}), d))
		},
		reason: "the relative bias neither gathers a [buckets, heads] table by an index nor adds a stored [heads, queries, keys] table",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := st.BuildExporterForm(st.ExporterForm{Name: c.name, Heads: 2, HD: 8, Bias: c.bias})
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, t5.Detect)
			st.WantMiss(t, fs, trace, "t5", c.reason)
		})
	}
}
