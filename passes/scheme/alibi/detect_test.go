package alibi_test

import (
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/audit"
	st "github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/scheme/alibi"
)

// TestCorpus audits the corpus models whose golden reports have ALiBi
// findings: each finding as the golden report has it.
func TestCorpus(t *testing.T) { st.CheckCorpus(t, alibi.Name, audit.AuditModel) }

// distance is j - i as float [S, S].
func distance(e *st.Env) *graph.Value {
	r := e.ToFloat(e.RangeS())
	return e.Op("Sub", nil, e.Op("Unsqueeze", nil, r, e.Ints(0)), e.Op("Unsqueeze", nil, r, e.Ints(1)))
}

// TestForms: ALiBi written in forms and with slopes the corpus does not
// have, each with the params the math gives.
func TestForms(t *testing.T) {
	// MPT's rule for 6 heads (alibi_bias_max 8): the odd slopes of 8
	// heads first, then the even ones.
	mpt6 := []float32{0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125}
	cases := []struct {
		name  string
		heads int
		// batch pins the inputs' batch to a size (0: left open).
		batch int64
		bias  func(e *st.Env, scores *graph.Value) *graph.Value
		want  map[string]any
	}{{
		// Six heads, the key's offset from the last key (j - (S-1), MPT's
		// form) times stored slopes, under a causal Where.
		name: "mpt_6_heads_offset_from_end", heads: 6,
		bias: func(e *st.Env, scores *graph.Value) *graph.Value {
			off := e.ToFloat(e.Op("Sub", nil, e.RangeS(), e.Op("Sub", nil, e.Seq, e.Int0(1))))
			b := e.Op("Mul", nil, e.Floats([]int64{6, 1, 1}, mpt6), off)
			return st.CausalWhere(e, e.Op("Add", nil, scores, b))
		},
		want: map[string]any{"num_heads": 6, "slopes": []float64{0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125}, "symmetric": false,
			"positions": "key_offset_from_end", "alibi_bias_max": 8.0, "max_positions": nil},
	}, {
		// Three heads, symmetric: -slope·|j - i| with the Abs on the
		// float distance and the slopes divided in (Div by 1/slope).
		name: "symmetric_3_heads_div", heads: 3,
		bias: func(e *st.Env, scores *graph.Value) *graph.Value {
			b := e.Op("Div", nil, e.Op("Neg", nil, e.Op("Abs", nil, distance(e))), e.Floats([]int64{3, 1, 1}, []float32{2, 4, 8}))
			return e.Op("Add", nil, b, scores)
		},
		want: map[string]any{"num_heads": 3, "slopes": []float64{0.5, 0.25, 0.125}, "symmetric": true, "positions": "relative"},
	}, {
		// BLOOM's layout with the batch pinned to 3 (a static export):
		// the bias [batch·heads, 1, S] of the mask's cumulative sum added
		// to the scores viewed as [batch·heads, S, S], viewed back as
		// [batch, heads, S, S] for the Softmax. Its 12 rows are 3 copies
		// of 4 heads' slopes.
		name: "bloom_batch_heads_rows_batch_3", heads: 4, batch: 3,
		bias: func(e *st.Env, scores *graph.Value) *graph.Value {
			cum := e.Op("CumSum", nil, e.Mask, e.Int0(1))
			pos := e.ToFloat(e.Op("Mul", nil, e.Op("Sub", nil, cum, e.Int0(1)), e.Mask))
			b := e.Op("Mul", nil, e.Floats([]int64{4, 1}, []float32{0.25, 0.0625, 0.015625, 0.00390625}), e.Op("Unsqueeze", nil, pos, e.Ints(1)))
			seq := e.Op("Unsqueeze", nil, e.Seq, e.Ints(0))
			b = e.Op("Reshape", nil, b, e.Op("Concat", e.Axis(0), e.Ints(-1, 1), seq))
			s3 := e.Op("Reshape", nil, scores, e.Op("Concat", e.Axis(0), e.Ints(-1), seq, seq))
			s3 = e.Op("Add", nil, s3, b)
			return e.Op("Reshape", nil, s3, e.Op("Concat", e.Axis(0), e.Ints(-1, 4), seq, seq))
		},
		want: map[string]any{"num_heads": 4, "slopes": []float64{0.25, 0.0625, 0.015625, 0.00390625}, "symmetric": false,
			"positions": "attention_mask_cumsum", "alibi_bias_max": 8.0},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := st.BuildExporterForm(st.ExporterForm{Name: c.name, Heads: c.heads, HD: 8, Bias: c.bias})
			if c.batch > 0 {
				for _, v := range m.Graph.Inputs {
					v.Type = graph.TensorType(v.Type.ElemType(), []graph.Dim{{Value: c.batch, Known: true}, {Param: "seq"}})
				}
			}
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, alibi.Detect)
			f := st.Only(t, fs, trace)
			if f.Fused {
				t.Error("fused, want not")
			}
			st.WantParams(t, f, c.want)
		})
	}
}

// TestNearMisses: score biases that are not ALiBi give no finding, and
// the trace says why.
func TestNearMisses(t *testing.T) {
	cases := []struct {
		name   string
		bias   func(e *st.Env, scores *graph.Value) *graph.Value
		reason string
	}{{
		// slope·j·(i + 1): linear in the key position, but with a slope
		// per query, not per head.
		name: "slope_grows_with_the_query",
		bias: func(e *st.Env, scores *graph.Value) *graph.Value {
			r := e.ToFloat(e.RangeS())
			jq := e.Op("Mul", nil, e.Op("Unsqueeze", nil, r, e.Ints(0)), e.Op("Unsqueeze", nil, e.Op("Add", nil, r, e.F0(1)), e.Ints(1)))
			return e.Op("Add", nil, scores, e.Op("Mul", nil, e.Floats([]int64{2, 1, 1}, []float32{0.5, 0.25}), jq))
		},
		reason: "the bias is neither linear in the key position (ALiBi) nor a function of key - query",
	}, {
		// A causal mask alone (0 or -inf): nothing but masking.
		name: "mask_only",
		bias: func(e *st.Env, scores *graph.Value) *graph.Value {
			keep := e.Op("LessOrEqual", nil, e.Op("Unsqueeze", nil, e.RangeS(), e.Ints(0)), e.Op("Unsqueeze", nil, e.RangeS(), e.Ints(1)))
			return e.Op("Add", nil, scores, e.Op("Where", nil, keep, e.F0(0), e.F0(-1e30)))
		},
		reason: "the bias only masks",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := st.BuildExporterForm(st.ExporterForm{Name: c.name, Heads: 2, HD: 8, Bias: c.bias})
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, alibi.Detect)
			st.WantMiss(t, fs, trace, "score_bias", c.reason)
		})
	}
}
