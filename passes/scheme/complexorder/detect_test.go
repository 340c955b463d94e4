package complexorder_test

import (
	"math/rand/v2"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/audit"
	st "github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/scheme/complexorder"
)

// TestCorpus audits the corpus models whose golden reports have
// complex_order findings: each finding as the golden report has it.
func TestCorpus(t *testing.T) { st.CheckCorpus(t, complexorder.Name, audit.AuditModel) }

const (
	heads = 2
	vocab = 40
)

// coSpec is a model embedding the tokens as r(w)·exp(i(ω(w)·pos + θ(w)))
// (real and imaginary parts added) before two attention blocks.
type coSpec struct {
	dim   int
	pos   func(e *st.Env) *graph.Value // positions [S] (float)
	phase bool                         // an initial phase per word
	noCos bool                         // the imaginary part alone
}

func coModel(s coSpec) *graph.Model {
	m := graph.NewModel(8, "onnxpe-complex-order-test", graph.Opset{Domain: "", Version: 17})
	hd := s.dim / heads
	e := &st.Env{Builder: &st.Builder{G: m.Graph, Rng: rand.New(rand.NewPCG(17, 19))}, Opset: 17, Heads: heads, HD: hd, D: s.dim}
	bs := []graph.Dim{{Param: "batch"}, {Param: "seq"}}
	e.IDs = e.G.AddInput("input_ids", graph.TensorType(graph.Int64, bs))
	e.Seq = e.Op("Gather", e.Axis(0), e.Op("Shape", nil, e.IDs), e.Int0(1))
	D := s.dim
	amp := e.Op("Gather", nil, e.Weight(vocab, D), e.IDs)
	omega := e.Op("Gather", nil, e.Weight(vocab, D), e.IDs)
	pos := e.Op("Reshape", nil, s.pos(e), e.Ints(1, -1, 1))
	ph := e.Op("Mul", nil, omega, pos)
	if s.phase {
		ph = e.Op("Add", nil, ph, e.Op("Gather", nil, e.Weight(vocab, D), e.IDs))
	}
	x := e.Op("Mul", nil, amp, e.Op("Sin", nil, ph))
	if !s.noCos {
		x = e.Op("Add", nil, e.Op("Mul", nil, e.Op("Cos", nil, ph), amp), x)
	}
	heads4 := func(p *graph.Value) *graph.Value {
		return e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, e.Op("Reshape", nil, p, e.Ints(0, 0, heads, int64(hd))))
	}
	for l := 0; l < 2; l++ {
		q, k, v := heads4(e.Op("MatMul", nil, x, e.Weight(D, D))), heads4(e.Op("MatMul", nil, x, e.Weight(D, D))), heads4(e.Op("MatMul", nil, x, e.Weight(D, D)))
		sc := e.Op("MatMul", nil, q, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 1, 3, 2)}, k))
		a := e.Op("MatMul", nil, e.Op("Softmax", e.Axis(-1), sc), v)
		o := e.Op("Reshape", nil, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, a), e.Ints(0, 0, int64(D)))
		x = e.Op("Add", nil, x, e.Op("MatMul", nil, o, e.Weight(D, D)))
	}
	out := e.Op("MatMul", nil, x, e.Weight(D, vocab))
	out.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: vocab, Known: true}})
	e.G.AddOutput(out)
	return m
}

func ascending(e *st.Env) *graph.Value { return e.ToFloat(e.RangeS()) }

// TestForms: complex-order embeddings with dims, orders and phases the
// corpus does not have, each with the params the math gives.
func TestForms(t *testing.T) {
	cases := []struct {
		name string
		spec coSpec
		want map[string]any
	}{{
		// Positions 0, 1, ..., a learned phase per word, dim 32 (the
		// corpus counts down and has no phase).
		name: "ascending_learned_phase",
		spec: coSpec{dim: 32, pos: ascending, phase: true},
		want: map[string]any{"dim": 32, "learned_frequency": true, "learned_phase": true, "position_order": "ascending"},
	}, {
		// The last token at 0, counted as (S - 1) - i, dim 16.
		name: "descending_by_sub_dim_16",
		spec: coSpec{dim: 16, pos: func(e *st.Env) *graph.Value {
			return e.ToFloat(e.Op("Sub", nil, e.Op("Sub", nil, e.Seq, e.Int0(1)), e.RangeS()))
		}},
		want: map[string]any{"dim": 16, "learned_frequency": true, "learned_phase": false, "position_order": "descending"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := coModel(c.spec)
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, complexorder.Detect)
			f := st.Only(t, fs, trace)
			if len(f.Layers) != 2 {
				t.Errorf("layers %v, want [0 1]", f.Layers)
			}
			st.WantParams(t, f, c.want)
		})
	}
}

// TestNearMisses: token-dependent phases that are not complex-order
// embeddings give no finding, and the trace says why.
func TestNearMisses(t *testing.T) {
	cases := []struct {
		name   string
		spec   coSpec
		reason string
	}{{
		// The imaginary part alone: a Sin of the phase, no Cos.
		name:   "sin_without_cos",
		spec:   coSpec{dim: 16, pos: ascending, noCos: true},
		reason: "the angle has a Sin but no Cos",
	}, {
		// Positions 0, 2, 4, ...: the phase turns, but not one position
		// per token.
		name: "positions_step_by_two",
		spec: coSpec{dim: 16, pos: func(e *st.Env) *graph.Value {
			return e.Op("Mul", nil, ascending(e), e.F0(2))
		}},
		reason: "do not step by one",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := coModel(c.spec)
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, complexorder.Detect)
			st.WantMiss(t, fs, trace, "complex_order", c.reason)
		})
	}
}
