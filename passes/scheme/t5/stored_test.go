package t5_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	st "github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/scheme/t5"
)

// pinned fixes the inputs of m to one sequence of n tokens, as an export
// for a fixed-size accelerator has them: every shape is known, so the
// bucket computation and its gather fold into one stored [1, heads, n, n]
// table (what ONNX Runtime's constant folding stores too).
func pinned(m *graph.Model, n int64) *graph.Model {
	for _, v := range m.Graph.Inputs {
		v.Type = graph.TensorType(v.Type.ElemType(), graph.Dims(1, n))
	}
	return m
}

// storedT5 is the bias [1, heads, n, n] of Hugging Face's bucket function
// over a random [buckets, heads] table, with the keys after each query
// set to float32's lowest when causalMask (the decoder's mask stored in
// the same table).
func storedT5(e *st.Env, n, buckets, maxd int, bidir, causalMask bool) *graph.Value {
	rng := rand.New(rand.NewPCG(3, 9))
	table := make([]float32, buckets*e.Heads)
	for i := range table {
		table[i] = float32(rng.NormFloat64())
	}
	vals := make([]float32, e.Heads*n*n)
	for h := 0; h < e.Heads; h++ {
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				b := kernels.T5Bucket(int64(j-i), int64(buckets), int64(maxd), bidir)
				x := table[int(b)*e.Heads+h]
				if causalMask && j > i {
					x = -math.MaxFloat32
				}
				vals[(h*n+i)*n+j] = x
			}
		}
	}
	return e.Floats([]int64{1, int64(e.Heads), int64(n), int64(n)}, vals)
}

// TestStoredForms: T5's bias stored as a [1, heads, L, L] table (a
// fixed-size export, or the computed form with its shapes pinned, which
// normalisation folds). The table holds the distances below L only: the
// params are those every setting reproducing its partition shares, the
// others null with the candidates (derived by hand from Hugging Face's
// _relative_position_bucket in each case's comment).
func TestStoredForms(t *testing.T) {
	cases := []struct {
		name  string
		seq   int64
		heads int
		bias  func(e *st.Env, scores *graph.Value) *graph.Value
		want  map[string]any
		notes []string
	}{{
		// A decoder's 32 buckets back to 128 at 24 tokens: distances 0..15
		// exact, 16-18, 19-20 and 21-23 share buckets. Only 16 exact
		// buckets give that: 32 buckets with max_distance 111..141, or 33
		// with 126..161.
		name: "causal_32_128_at_24", seq: 24, heads: 4,
		bias: func(e *st.Env, scores *graph.Value) *graph.Value {
			return st.CausalWhere(e, st.T5Bias(e, scores, 32, 128, false))
		},
		want:  map[string]any{"bidirectional": false, "num_buckets": nil, "max_distance": nil, "num_heads": 4, "shared_across_layers": false},
		notes: []string{"relative positions up to 23, which 32-33 partition", "values from 111 to 161"},
	}, {
		// An encoder's 32 buckets at 9 tokens: every distance -8..8 has
		// its own value, which any 9 or more buckets per direction give.
		name: "bidirectional_32_128_at_9", seq: 9, heads: 4,
		bias:  func(e *st.Env, scores *graph.Value) *graph.Value { return st.T5Bias(e, scores, 32, 128, true) },
		want:  map[string]any{"bidirectional": true, "num_buckets": nil, "max_distance": nil, "num_heads": 4},
		notes: []string{"up to 8, which every even count from 18 on partition", "any value"},
	}, {
		// 8 buckets both ways, max_distance 16, at 32 tokens: per side 0,
		// 1, 2-5 and 6 on. Four groups need four buckets per side; with
		// exact buckets 0 and 1, distance 5 below the first log step and
		// 6 at the last bucket: 13 <= max_distance <= 18.
		name: "bidirectional_8_16_at_32", seq: 32, heads: 2,
		bias:  func(e *st.Env, scores *graph.Value) *graph.Value { return st.T5Bias(e, scores, 8, 16, true) },
		want:  map[string]any{"bidirectional": true, "num_buckets": 8, "max_distance": nil, "num_heads": 2},
		notes: []string{"max_distance: the stored bias holds relative positions up to 31, which 13-18 partition"},
	}, {
		// A decoder's bias stored with its causal mask (float32's lowest
		// after each query): the keys that tell the directions apart are
		// masked, and 6 distinct distances fit 6 or more causal buckets or
		// 12 or more both ways.
		name: "stored_with_causal_mask_at_6", seq: 6, heads: 4,
		bias: func(e *st.Env, scores *graph.Value) *graph.Value {
			return e.Op("Add", nil, scores, storedT5(e, 6, 32, 128, false, true))
		},
		want:  map[string]any{"bidirectional": nil, "num_buckets": nil, "max_distance": nil, "num_heads": 4},
		notes: []string{"bidirectional: the stored bias masks every key after its query", "every count from 6 on (causal) or every even count from 12 on (bidirectional)"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := pinned(st.BuildExporterForm(st.ExporterForm{Name: c.name, Heads: c.heads, HD: 8, Bias: c.bias}), c.seq)
			st.Executes(t, m, int(c.seq))
			fs, trace := st.Detect(t, m, t5.Detect)
			f := st.Only(t, fs, trace)
			st.WantParams(t, f, c.want)
			notes := strings.Join(f.Notes, "\n")
			for _, n := range c.notes {
				if !strings.Contains(notes, n) {
					t.Errorf("notes %q, want one containing %q", f.Notes, n)
				}
			}
			if ev, _ := f.Evidence.(*t5.Evidence); ev == nil || ev.Stored == "" {
				t.Errorf("evidence %+v, want the stored table named", f.Evidence)
			}
		})
	}
}

// TestStoredNearMisses: stored relative biases that are not T5's give no
// finding, and the trace says why.
func TestStoredNearMisses(t *testing.T) {
	cases := []struct {
		name   string
		bias   func(e *st.Env, scores *graph.Value) *graph.Value
		reason string
	}{{
		// -slope·log(1 + |j - i|): the same value both sides of the
		// query, as no T5 direction gives.
		name: "symmetric_log_distance",
		bias: func(e *st.Env, scores *graph.Value) *graph.Value {
			d := e.Op("Log", nil, e.Op("Add", nil, e.Op("Abs", nil, e.ToFloat(rel(e))), e.F0(1)))
			return e.Op("Add", nil, scores, e.Op("Mul", nil, e.Floats([]int64{2, 1, 1}, []float32{-0.5, -0.25}), d))
		},
		reason: "keys after the query share values with keys up to it",
	}, {
		// A causal table read at (distance back) mod 3: keys after the
		// query read the query's own row, but the distances back repeat,
		// which no bucket function does.
		name: "causal_periodic",
		bias: func(e *st.Env, scores *graph.Value) *graph.Value {
			back := e.Op("Relu", nil, e.Op("Neg", nil, rel(e)))
			return gathered(e, scores, e.Op("Mod", nil, back, e.Int0(3)), 3)
		},
		reason: "no num_buckets and max_distance of T5's bucket function partition its distances",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := pinned(st.BuildExporterForm(st.ExporterForm{Name: c.name, Heads: 2, HD: 8, Bias: c.bias}), 12)
			st.Executes(t, m, 12)
			fs, trace := st.Detect(t, m, t5.Detect)
			st.WantMiss(t, fs, trace, "t5", c.reason)
		})
	}
}

// TestStoredLinearIsALiBi: a stored bias linear in the distance with a
// slope per head, causal with its mask stored in it, is ALiBi's: every
// distance has its own value, which T5's buckets could also give, but
// the score_bias pass reads the slopes first and T5 does not claim it.
func TestStoredLinearIsALiBi(t *testing.T) {
	const n = 10
	slopes := []float32{0.5, 0.25}
	bias := func(e *st.Env, scores *graph.Value) *graph.Value {
		vals := make([]float32, len(slopes)*n*n)
		for h, m := range slopes {
			for i := 0; i < n; i++ {
				for j := 0; j < n; j++ {
					x := -m * float32(i-j)
					if j > i {
						x = -math.MaxFloat32
					}
					vals[(h*n+i)*n+j] = x
				}
			}
		}
		return e.Op("Add", nil, scores, e.Floats([]int64{1, int64(len(slopes)), n, n}, vals))
	}
	m := pinned(st.BuildExporterForm(st.ExporterForm{Name: "stored_causal_alibi", Heads: 2, HD: 8, Bias: bias}), n)
	st.Executes(t, m, n)
	if fs, trace := st.Detect(t, m, t5.Detect); len(fs) > 0 {
		t.Errorf("t5 findings %s, want none\n%s", st.Describe(fs), st.TraceString(trace))
	}
	r, _, err := audit.AuditModel(m, "stored_causal_alibi", passes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Schemes, []string{"alibi"}) {
		t.Errorf("schemes %v, want [alibi]", r.Schemes)
	}
}
