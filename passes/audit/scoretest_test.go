package audit_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	st "github.com/onnxpe/onnxpe/passes/internal/schemetest"
)

// scoreForm is a one-block model with every shape fixed (a static
// export), as its exporter lays the scores out: timeMajor gives
// Transformer-XL's [queries, keys, batch, heads] (Einsum 'ibnd,jbnd->ijbn',
// Softmax over axis 1), else [batch, heads, queries, keys]. bias, when
// set, is added to the scores: its value at query i and key j (the same
// for every batch and head).
type scoreForm struct {
	name       string
	seq, batch int64
	timeMajor  bool
	bias       func(i, j int) float32
}

const scoreHeads, scoreHD = 2, 8

func (f scoreForm) build() *graph.Model {
	m := graph.NewModel(8, "onnxpe-score-test", graph.Opset{Domain: "", Version: 17})
	b := &st.Builder{G: m.Graph, Rng: rand.New(rand.NewPCG(4, 2))}
	d := int64(scoreHeads * scoreHD)
	tokens := []int64{f.batch, f.seq}
	perm := []int64{0, 2, 1, 3} // [b, s, h, d] -> [b, h, s, d]
	qk, av := "bhid,bhjd->bhij", "bhij,bhjd->bhid"
	if f.timeMajor {
		tokens = []int64{f.seq, f.batch}
		perm = []int64{0, 1, 2, 3}
		qk, av = "ibnd,jbnd->ijbn", "ijbn,jbnd->ibnd"
	}
	ids := m.Graph.AddInput("input_ids", graph.TensorType(graph.Int64, graph.Dims(tokens...)))
	x := b.Op("Gather", nil, b.Weight(50, int(d)), ids)
	proj := func() *graph.Value {
		p := b.Op("Reshape", nil, b.Op("MatMul", nil, x, b.Weight(int(d), int(d))), b.Ints(tokens[0], tokens[1], scoreHeads, scoreHD))
		return b.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", perm...)}, p)
	}
	q, k, v := proj(), proj(), proj()
	scores := b.Op("Einsum", []*graph.Attr{graph.StringAttr("equation", qk)}, q, k)
	if f.bias != nil {
		vals := make([]float32, f.seq*f.seq)
		for i := range f.seq {
			for j := range f.seq {
				vals[i*f.seq+j] = f.bias(int(i), int(j))
			}
		}
		dims := []int64{1, 1, f.seq, f.seq}
		if f.timeMajor {
			dims = []int64{f.seq, f.seq, 1, 1}
		}
		scores = b.Op("Add", nil, scores, b.Floats(dims, vals))
	}
	axis := int64(-1)
	if f.timeMajor {
		axis = 1
	}
	a := b.Op("Einsum", []*graph.Attr{graph.StringAttr("equation", av)}, b.Op("Softmax", []*graph.Attr{graph.IntAttr("axis", axis)}, scores), v)
	a = b.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", perm...)}, a)
	out := b.Op("MatMul", nil, b.Op("Reshape", nil, a, b.Ints(tokens[0], tokens[1], d)), b.Weight(int(d), 50))
	out.Type = graph.TensorType(graph.Float, graph.Dims(tokens[0], tokens[1], 50))
	m.Graph.AddOutput(out)
	return m
}

// TestScoreTestOnFixedShapes: the score test of a block whose shapes are
// all fixed reads the scores' axes of queries and keys from the Softmax's
// axis (time-major scores keep the batch on a later axis), and leaves out
// the rows of queries that see no key. It failed before: Transformer-XL's
// layout was probed over its 3 batch rows as if they were the queries,
// and a query whose keys are all masked (-1e30) made the tolerance of the
// scores 1e23, so that relative scores passed for uniform (nope).
func TestScoreTestOnFixedShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 1))
	rel := make([]float32, 23)
	for i := range rel {
		rel[i] = float32(rng.NormFloat64())
	}
	causalRel := func(i, j int) float32 {
		if j > i {
			return -1e30
		}
		return rel[j-i+11]
	}
	causal := func(i, j int) float32 {
		if j > i {
			return -1e30
		}
		return 0
	}
	cases := []struct {
		form    scoreForm
		schemes []string
		test    string
		summary string
	}{{
		// Transformer-XL's layout, a causal bias of key - query stored.
		form:    scoreForm{name: "time_major_relative", seq: 12, batch: 3, timeMajor: true, bias: causalRel},
		schemes: []string{"unknown"}, test: passes.TestRelativeScores, summary: "over 12 positions",
	}, {
		// The same layout with a causal mask alone: nope, measured over
		// the 12 tokens.
		form:    scoreForm{name: "time_major_causal", seq: 12, batch: 3, timeMajor: true, bias: causal},
		schemes: []string{"nope"}, test: passes.TestUniformScores, summary: "over 12 positions",
	}, {
		// [batch, heads, q, k] with a bias of |key - query| (no scheme
		// onnxpe reads) and a first query that sees no key (a padded row
		// of a stored mask).
		form: scoreForm{name: "masked_first_query", seq: 12, batch: 1, bias: func(i, j int) float32 {
			if i == 0 {
				return -1e30
			}
			return rel[max(i-j, j-i)]
		}},
		schemes: []string{"unknown"}, test: passes.TestRelativeScores, summary: "over 12 positions",
	}}
	for _, c := range cases {
		t.Run(c.form.name, func(t *testing.T) {
			m := c.form.build()
			st.Executes(t, m, int(c.form.seq))
			r, _, err := audit.AuditModel(m, c.form.name, passes.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Schemes, c.schemes) {
				t.Fatalf("schemes %v, want %v", r.Schemes, c.schemes)
			}
			ev := r.Findings[0].Measured
			if ev == nil || ev.Test != c.test || !strings.Contains(ev.Summary, c.summary) {
				t.Errorf("evidence %+v, want test %s %q", ev, c.test, c.summary)
			}
		})
	}
}
