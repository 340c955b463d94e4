package nope_test

import (
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	st "github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/scheme/nope"
)

// TestCorpus audits the corpus models whose golden reports have nope
// findings: each finding as the golden report has it.
func TestCorpus(t *testing.T) { st.CheckCorpus(t, nope.Name, audit.AuditModel) }

// scaleQ multiplies q by a scale of the positions (the block's q side is
// that one node) and leaves k alone.
func scaleQ(op string, scale func(e *st.Env) *graph.Value) func(e *st.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
	return func(e *st.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
		return e.Op(op, nil, q, scale(e)), k
	}
}

// llama4 is log(floor((pos + 1) / fs) + 1)·as + 1 of positions pos
// (float), Llama 4's temperature.
func llama4(e *st.Env, pos *graph.Value, fs, as float32) *graph.Value {
	f := e.Op("Floor", nil, e.Op("Div", nil, e.Op("Add", nil, pos, e.F0(1)), e.F0(fs)))
	return e.Op("Add", nil, e.Op("Mul", nil, e.Op("Log", nil, e.Op("Add", nil, f, e.F0(1))), e.F0(as)), e.F0(1))
}

// rangeCol is Range(0, S) as float [S, 1].
func rangeCol(e *st.Env) *graph.Value {
	return e.Op("Unsqueeze", nil, e.ToFloat(e.RangeS()), e.Ints(-1))
}

// audited audits m and returns its one finding (nope, the test wants).
func audited(t *testing.T, m *graph.Model) (*passes.Finding, []passes.Miss) {
	t.Helper()
	r, ctx, err := audit.AuditModel(m, "m", passes.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	f := st.Only(t, r.Findings, ctx.Trace())
	if f.Scheme != nope.Name || len(f.Layers) != 1 || f.Layers[0] != 0 {
		t.Fatalf("finding %s %v, want nope [0]", f.Scheme, f.Layers)
	}
	return f, ctx.Trace()
}

// TestForms: blocks that receive no position information get nope; one
// whose queries Llama 4's temperature scales gets it in its params.
func TestForms(t *testing.T) {
	cases := []struct {
		name string
		rope func(e *st.Env, q, k *graph.Value) (*graph.Value, *graph.Value)
		want any
	}{{
		// Softmax attention over projections of the tokens, nothing else.
		name: "nothing",
		want: nil,
	}, {
		// q divided by 1/temperature of the position_ids input, floor
		// scale 16 and attention scale 0.25 (the corpus has 8 and 0.1 on
		// a Range and a Mul).
		name: "temperature_divided_position_ids",
		rope: scaleQ("Div", func(e *st.Env) *graph.Value {
			pin := e.G.AddInput("position_ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
			s := llama4(e, e.ToFloat(pin), 16, 0.25)
			return e.Op("Unsqueeze", nil, e.Op("Reciprocal", nil, s), e.Ints(1, 3))
		}),
		want: map[string]any{"floor_scale": 16.0, "attn_scale": 0.25},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := st.BuildExporterForm(st.ExporterForm{Name: c.name, Heads: 2, HD: 8, Rope: c.rope})
			st.Executes(t, m, 6)
			f, _ := audited(t, m)
			st.WantParams(t, f, map[string]any{"temperature_tuning": c.want})
		})
	}
}

// TestNearMisses: query scales of the position that are not Llama 4's
// temperature leave nope without one, and the trace says why.
func TestNearMisses(t *testing.T) {
	cases := []struct {
		name   string
		scale  func(e *st.Env) *graph.Value
		reason string
	}{{
		// 1 + pos/100: 1 at position 0 and growing, but linearly.
		name: "linear_in_the_position",
		scale: func(e *st.Env) *graph.Value {
			return e.Op("Add", nil, e.Op("Mul", nil, rangeCol(e), e.F0(0.01)), e.F0(1))
		},
		reason: "does not follow log(floor((pos+1)/floor_scale)+1)·attn_scale+1",
	}, {
		// Llama 4's rule times 2: 2 at position 0.
		name: "not_one_at_position_0",
		scale: func(e *st.Env) *graph.Value {
			return e.Op("Mul", nil, llama4(e, rangeCol(e), 8, 0.1), e.F0(2))
		},
		reason: "the scale of q is not 1 at position 0",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := st.BuildExporterForm(st.ExporterForm{Name: c.name, Heads: 2, HD: 8, Rope: scaleQ("Mul", c.scale)})
			st.Executes(t, m, 6)
			ctx, err := passes.Run(m, passes.Options{Trace: true}, nope.Temperatures)
			if err != nil {
				t.Fatal(err)
			}
			if temps := passes.Result(ctx, nope.Temperatures); len(temps) != 0 {
				t.Errorf("temperatures %v, want none", temps)
			}
			st.WantMiss(t, nil, ctx.Trace(), "temperature", c.reason)
			f, _ := audited(t, m)
			st.WantParams(t, f, map[string]any{"temperature_tuning": nil})
		})
	}
}
