package floater_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/audit"
	st "github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/scheme/floater"
)

// TestCorpus audits the corpus models whose golden reports have floater
// findings: each finding as the golden report has it.
func TestCorpus(t *testing.T) { st.CheckCorpus(t, floater.Name, audit.AuditModel) }

const (
	heads  = 2
	hd     = 16
	dim    = heads * hd
	vocab  = 40
	layers = 2
)

// flSpec is a two-layer model whose q, k and v add per-position biases
// read from a table of states [N, 3, layers, dim]: p(0) a learned state,
// p(t+h) one solver step from p(t) of the dynamics f(p) = tanh(p·W1 +
// b1)·W2 + b2 (the corpus's dynamics read the time and use ReLU).
type flSpec struct {
	n      int     // positions integrated
	h      float64 // step
	solver string  // euler | heun | damped (0.5·p + h·f(p): no solver)
	loop   bool    // a Loop whose body is one step, the states its scan output
	// readers are the layers whose q, k and v read the states (nil: all).
	readers []int
}

type flBuilder struct {
	*st.Builder
	w1, b1, w2, b2 *graph.Value
}

// f is the dynamics at p [3, layers, dim].
func (b *flBuilder) f(p *graph.Value) *graph.Value {
	h := b.Op("Tanh", nil, b.Op("Add", nil, b.Op("MatMul", nil, p, b.w1), b.b1))
	return b.Op("Add", nil, b.Op("MatMul", nil, h, b.w2), b.b2)
}

// step is one step of the solver from p.
func (b *flBuilder) step(s flSpec, p *graph.Value) *graph.Value {
	h := float32(s.h)
	scal := func(v float32) *graph.Value { return b.Floats(nil, []float32{v}) }
	switch s.solver {
	case "heun":
		k1 := b.f(p)
		k2 := b.f(b.Op("Add", nil, p, b.Op("Mul", nil, k1, scal(h))))
		return b.Op("Add", nil, p, b.Op("Mul", nil, b.Op("Add", nil, k1, k2), scal(h/2)))
	case "damped":
		return b.Op("Add", nil, b.Op("Mul", nil, p, scal(0.5)), b.Op("Mul", nil, b.f(p), scal(h)))
	}
	return b.Op("Add", nil, p, b.Op("Mul", nil, b.f(p), scal(h)))
}

func flModel(s flSpec) *graph.Model {
	m := graph.NewModel(8, "onnxpe-floater-test", graph.Opset{Domain: "", Version: 17})
	e := &st.Env{Builder: &st.Builder{G: m.Graph, Rng: rand.New(rand.NewPCG(23, 29))}, Opset: 17, Heads: heads, HD: hd, D: dim}
	bs := []graph.Dim{{Param: "batch"}, {Param: "seq"}}
	e.IDs = e.G.AddInput("input_ids", graph.TensorType(graph.Int64, bs))
	e.Seq = e.Op("Gather", e.Axis(0), e.Op("Shape", nil, e.IDs), e.Int0(1))
	x := e.Op("Gather", nil, e.Weight(vocab, dim), e.IDs)
	small := func(r, c int) *graph.Value { // the dynamics move slowly, as FLOATER's
		v := make([]float32, r*c)
		for i := range v {
			v[i] = float32(e.Rng.NormFloat64() * math.Sqrt(2.0/1025))
		}
		return e.Floats([]int64{int64(r), int64(c)}, v)
	}
	fb := &flBuilder{Builder: e.Builder, w1: small(dim, dim), b1: e.Floats([]int64{dim}, make([]float32, dim)), w2: small(dim, dim), b2: e.Floats([]int64{dim}, make([]float32, dim))}
	p0 := make([]float32, 3*layers*dim)
	for i := range p0 {
		p0[i] = float32(e.Rng.NormFloat64() * 0.3)
	}
	y0 := e.Floats([]int64{3, layers, dim}, p0)
	var table *graph.Value // [N, 3, layers, dim]
	if s.loop {
		body := e.G.NewSubgraph("body")
		bb := &flBuilder{Builder: &st.Builder{G: body, Rng: e.Rng}, w1: fb.w1, b1: fb.b1, w2: fb.w2, b2: fb.b2}
		body.AddInput("iter", graph.TensorType(graph.Int64, nil))
		cond := body.AddInput("cond_in", graph.TensorType(graph.Bool, nil))
		p := body.AddInput("p_in", graph.TensorType(graph.Float, graph.Dims(3, layers, dim)))
		body.AddOutput(bb.Op("Identity", nil, cond))
		body.AddOutput(bb.step(s, p))
		body.AddOutput(bb.Op("Identity", nil, p)) // scan: the state at each position
		trips, _ := graph.NewTensor("trips", graph.Int64, nil, []int64{int64(s.n)})
		ct, _ := graph.NewTensor("cond", graph.Bool, nil, []bool{true})
		outs := e.G.Op("Loop", []*graph.Value{e.G.AddInitializer(trips), e.G.AddInitializer(ct), y0}, 2, graph.GraphAttr("body", body))
		table = outs[1]
	} else {
		states := []*graph.Value{e.Op("Unsqueeze", nil, y0, e.Ints(0))}
		p := y0
		for i := 1; i < s.n; i++ {
			p = fb.step(s, p)
			states = append(states, e.Op("Unsqueeze", nil, p, e.Ints(0)))
		}
		table = e.Op("Concat", e.Axis(0), states...)
	}
	rows := e.Op("Slice", nil, table, e.Ints(0), e.Op("Unsqueeze", nil, e.Seq, e.Ints(0)), e.Ints(0)) // [S, 3, layers, dim]
	bias := func(which, l int64) *graph.Value {
		return e.Op("Gather", e.Axis(1), e.Op("Gather", e.Axis(1), rows, e.Int0(which)), e.Int0(l)) // [S, dim]
	}
	heads4 := func(p *graph.Value) *graph.Value {
		return e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, e.Op("Reshape", nil, p, e.Ints(0, 0, heads, hd)))
	}
	for l := 0; l < layers; l++ {
		reads := s.readers == nil
		for _, r := range s.readers {
			reads = reads || r == l
		}
		proj := func(which int64) *graph.Value {
			p := e.Op("MatMul", nil, x, e.Weight(dim, dim))
			if reads {
				p = e.Op("Add", nil, p, bias(which, int64(l)))
			}
			return heads4(p)
		}
		q, k, v := proj(0), proj(1), proj(2)
		sc := e.Op("Mul", nil, e.Op("MatMul", nil, q, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 1, 3, 2)}, k)), e.F0(0.25))
		a := e.Op("MatMul", nil, e.Op("Softmax", e.Axis(-1), sc), v)
		o := e.Op("Reshape", nil, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, a), e.Ints(0, 0, dim))
		x = e.Op("Add", nil, x, e.Op("MatMul", nil, o, e.Weight(dim, dim)))
	}
	out := e.Op("MatMul", nil, x, e.Weight(dim, vocab))
	out.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: vocab, Known: true}})
	e.G.AddOutput(out)
	return m
}

// TestForms: FLOATER with solvers, steps, lengths and dynamics the corpus
// does not have, each with the params the math gives.
func TestForms(t *testing.T) {
	cases := []struct {
		name string
		spec flSpec
		want map[string]any
	}{{
		// Heun's method unrolled over 16 positions, step 0.05.
		name: "unrolled_heun_16",
		spec: flSpec{n: 16, h: 0.05, solver: "heun"},
		want: map[string]any{"dim": dim, "solver": "heun", "step": 0.05, "max_positions": 16, "form": "unrolled", "injection": "per_layer"},
	}, {
		// Euler steps in a Loop over 24 positions, step 0.02, the states
		// the Loop's scan output (the corpus stacks a sequence).
		name: "loop_euler_24_scan",
		spec: flSpec{n: 24, h: 0.02, solver: "euler", loop: true},
		want: map[string]any{"dim": dim, "solver": "euler", "step": 0.02, "max_positions": 24, "form": "loop", "injection": "per_layer"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := flModel(c.spec)
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, floater.Detect)
			f := st.Only(t, fs, trace)
			if len(f.Layers) != layers {
				t.Errorf("layers %v, want [0 1]", f.Layers)
			}
			st.WantParams(t, f, c.want)
		})
	}
}

// TestNearMisses: per-position biases from a table of states that are not
// FLOATER's give no finding, and the trace says why.
func TestNearMisses(t *testing.T) {
	cases := []struct {
		name   string
		spec   flSpec
		reason string
	}{{
		// Only the first of two layers reads the states.
		name:   "one_layer_reads_the_states",
		spec:   flSpec{n: 16, h: 0.05, solver: "euler", readers: []int{0}},
		reason: "one layer reads the table: not a state shared by the layers",
	}, {
		// p(t+h) = 0.5·p(t) + h·f(p(t)): no solver keeps the state.
		name:   "damped_step",
		spec:   flSpec{n: 16, h: 0.05, solver: "damped"},
		reason: "the state after the step is not the state before plus a combination of the stages",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := flModel(c.spec)
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, floater.Detect)
			st.WantMiss(t, fs, trace, "floater", c.reason)
		})
	}
}
