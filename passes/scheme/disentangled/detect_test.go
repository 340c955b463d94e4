package disentangled_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/metamorph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	st "github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/scheme/disentangled"
)

// TestCorpus audits the corpus models whose golden reports have
// disentangled findings: each finding as the golden report has it.
func TestCorpus(t *testing.T) { st.CheckCorpus(t, disentangled.Name, audit.AuditModel) }

const (
	heads = 2
	hd    = 16
	dim   = heads * hd
	vocab = 40
)

// debSpec is a two-layer model of DeBERTa's disentangled attention,
// written with Expand and explicit log buckets where Hugging Face's
// export has Tile and its own op order.
type debSpec struct {
	span    int  // rows of the relative embedding: 2·span
	buckets int  // position_buckets (0: relative positions clamped, not bucketed)
	maxPos  int  // max_relative_positions of the buckets
	p2c     bool // a position-to-content term besides content-to-position
	shared  bool // the relative embedding projected by the content projections
	// rel, when set, gives the relative positions [S, S] (int64) from the
	// query and key positions instead of q - k; noClip leaves the c2p
	// index unclamped.
	rel    func(e *st.Env, qp, kp *graph.Value) *graph.Value
	noClip bool
	// bmm writes the position terms over [batch·heads, S, hd] (torch.bmm's
	// layout) instead of [batch, heads, S, hd].
	bmm bool
	// scaleKey divides the key by sqrt(d·s) before its product with q
	// (DeBERTa-v2's bmm(q, kᵀ / scale)) instead of dividing the scores.
	scaleKey bool
	// scaleQuery divides the query (before both of its products) and the
	// position query by sqrt(d·s) (DeBERTa v1) instead of the scores and
	// the terms.
	scaleQuery bool
	// termDiv divides the position terms by termDiv instead of sqrt(d·s)
	// (0: sqrt(d·s)).
	termDiv float32
	// lengthSpan computes the span from the length as DeBERTa v1 does
	// (att_span = min(S, span)): the relative embedding sliced to
	// [span - att_span, span + att_span), the indexes clamped by Max and
	// Min to 2·att_span - 1, a bound computed in the graph.
	lengthSpan bool
	// guardP2C passes the p2c term through an If on q_len != k_len (the
	// term re-gathered when they differ, as it is when they are equal),
	// as DeBERTa v1's scripted p2c is exported.
	guardP2C bool
}

func debModel(s debSpec) *graph.Model {
	m := graph.NewModel(8, "onnxpe-deberta-test", graph.Opset{Domain: "", Version: 17})
	e := &st.Env{Builder: &st.Builder{G: m.Graph, Rng: rand.New(rand.NewPCG(5, 13))}, Opset: 17, Heads: heads, HD: hd, D: dim}
	bs := []graph.Dim{{Param: "batch"}, {Param: "seq"}}
	e.IDs = e.G.AddInput("input_ids", graph.TensorType(graph.Int64, bs))
	e.Seq = e.Op("Gather", e.Axis(0), e.Op("Shape", nil, e.IDs), e.Int0(1))
	x := e.Op("Gather", nil, e.Weight(vocab, dim), e.IDs)
	// Relative positions q - k [S, S], bucketed or not.
	r := e.RangeS()
	qp, kp := e.Op("Unsqueeze", nil, r, e.Ints(1)), e.Op("Unsqueeze", nil, r, e.Ints(0))
	var rel *graph.Value
	if s.rel != nil {
		rel = s.rel(e, qp, kp)
	} else {
		rel = e.Op("Sub", nil, qp, kp)
	}
	if s.buckets > 0 {
		mid := float32(s.buckets / 2)
		rf := e.ToFloat(rel)
		inner := e.Op("And", nil, e.Op("Less", nil, rf, e.F0(mid)), e.Op("Greater", nil, rf, e.F0(-mid)))
		abs := e.Op("Where", nil, inner, e.F0(mid-1), e.Op("Abs", nil, rf))
		lr := float32(math.Log(float64(float32(float64(s.maxPos-1) / float64(mid)))))
		lg := e.Op("Div", nil, e.Op("Log", nil, e.Op("Div", nil, abs, e.F0(mid))), e.F0(lr))
		logPos := e.Op("Add", nil, e.Op("Ceil", nil, e.Op("Mul", nil, lg, e.F0(mid-1))), e.F0(mid))
		b := e.Op("Where", nil, e.Op("LessOrEqual", nil, abs, e.F0(mid)), rf, e.Op("Mul", nil, logPos, e.Op("Sign", nil, rf)))
		rel = e.ToInt(b)
	}
	span := int64(s.span)
	// sp is the span the indexes are offset by and clamped to (a value of
	// the run with lengthSpan).
	sp := e.Int0(span)
	clip := func(v *graph.Value) *graph.Value {
		if s.noClip {
			return v
		}
		if s.lengthSpan {
			hi := e.Op("Sub", nil, e.Op("Mul", nil, sp, e.Int0(2)), e.Int0(1))
			return e.Op("Max", nil, e.Op("Min", nil, v, hi), e.Int0(0))
		}
		return e.Op("Clip", nil, v, e.Int0(0), e.Int0(2*span-1))
	}
	relEmb := e.Weight(int(2*span), dim)
	if s.lengthSpan {
		sp = e.Op("Min", nil, e.Seq, e.Int0(span))
		lo, hi := e.Op("Sub", nil, e.Int0(span), sp), e.Op("Add", nil, e.Int0(span), sp)
		relEmb = e.Op("Slice", nil, relEmb, e.Op("Unsqueeze", nil, lo, e.Ints(0)), e.Op("Unsqueeze", nil, hi, e.Ints(0)), e.Ints(0))
	}
	c2pIdx := clip(e.Op("Add", nil, rel, sp))
	p2cIdx := clip(e.Op("Add", nil, e.Op("Neg", nil, rel), sp))
	batch := e.Op("Slice", nil, e.Op("Shape", nil, x), e.Ints(0), e.Ints(1))
	// table [2·span, dim] as [B, H, 2·span, hd], over the batch (the
	// batch makes it a value of the run, as HF's repeat does).
	perHead := func(t *graph.Value) *graph.Value {
		h := e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 1, 0, 2)}, e.Op("Reshape", nil, t, e.Ints(-1, heads, hd)))
		x := e.Op("Expand", nil, e.Op("Unsqueeze", nil, h, e.Ints(0)), e.Op("Concat", e.Axis(0), batch, e.Ints(heads, 1, hd)))
		if s.bmm {
			rows := e.Op("Slice", nil, e.Op("Shape", nil, h), e.Ints(1), e.Ints(2))
			x = e.Op("Reshape", nil, x, e.Op("Concat", e.Axis(0), e.Ints(-1), rows, e.Ints(hd)))
		}
		return x
	}
	// bmm3 is x [B, H, S, hd] as [B·H, S, hd] when the terms are batched
	// so.
	bmm3 := func(x *graph.Value) *graph.Value {
		if s.bmm {
			return e.Op("Reshape", nil, x, e.Op("Concat", e.Axis(0), e.Ints(-1), e.Op("Unsqueeze", nil, e.Seq, e.Ints(0)), e.Ints(hd)))
		}
		return x
	}
	heads4 := func(p *graph.Value) *graph.Value {
		return e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, e.Op("Reshape", nil, p, e.Ints(0, 0, heads, hd)))
	}
	nTerms := 1
	if s.p2c {
		nTerms = 2
	}
	scale := float32(math.Sqrt(float64(hd * (1 + nTerms))))
	// term gathers the columns of a product p [.., S, 2·span] at idx
	// [S, S] and returns it as [B, H, S, S] (like qk).
	term := func(p, idx, qk *graph.Value) *graph.Value {
		ix := e.Op("Unsqueeze", nil, idx, e.Ints(0, 1))
		if s.bmm {
			ix = e.Op("Unsqueeze", nil, idx, e.Ints(0))
		}
		g := e.Op("GatherElements", e.Axis(-1), p, e.Op("Expand", nil, ix, e.Op("Concat", e.Axis(0), e.Op("Slice", nil, e.Op("Shape", nil, p), e.Ints(0), e.Ints(-1)), e.Op("Unsqueeze", nil, e.Seq, e.Ints(0)))))
		if s.bmm {
			g = e.Op("Reshape", nil, g, e.Op("Shape", nil, qk))
		}
		return g
	}
	for l := 0; l < 2; l++ {
		wq, bq, wk, bk := e.Weight(dim, dim), e.Floats([]int64{dim}, make([]float32, dim)), e.Weight(dim, dim), e.Floats([]int64{dim}, make([]float32, dim))
		q := heads4(e.Op("Add", nil, e.Op("MatMul", nil, x, wq), bq))
		k := heads4(e.Op("Add", nil, e.Op("MatMul", nil, x, wk), bk))
		v := heads4(e.Op("MatMul", nil, x, e.Weight(dim, dim)))
		posK, posQ := e.Op("MatMul", nil, relEmb, e.Weight(dim, dim)), e.Op("MatMul", nil, relEmb, e.Weight(dim, dim))
		if s.shared {
			posK = e.Op("Add", nil, e.Op("MatMul", nil, relEmb, wk), bk)
			posQ = e.Op("Add", nil, e.Op("MatMul", nil, relEmb, wq), bq)
		}
		// swap exchanges the last two axes of a position table (3-D when
		// the terms are batched as torch.bmm, else 4-D).
		swap := func(v *graph.Value) *graph.Value {
			perm := []int64{0, 1, 3, 2}
			if s.bmm {
				perm = []int64{0, 2, 1}
			}
			return e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", perm...)}, v)
		}
		kT := e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 1, 3, 2)}, k)
		// div divides a term by termDiv (sqrt(d·s) when not set), or
		// leaves it when the query was scaled first.
		div := func(t *graph.Value) *graph.Value {
			switch {
			case s.scaleQuery:
				return t
			case s.termDiv != 0:
				return e.Op("Div", nil, t, e.F0(s.termDiv))
			}
			return e.Op("Div", nil, t, e.F0(scale))
		}
		pq := perHead(posQ)
		var qk, scores *graph.Value
		switch {
		case s.scaleKey:
			qk = e.Op("MatMul", nil, q, e.Op("Div", nil, kT, e.F0(scale)))
			scores = qk
		case s.scaleQuery:
			q = e.Op("Div", nil, q, e.F0(scale))
			pq = e.Op("Div", nil, pq, e.F0(scale))
			qk = e.Op("MatMul", nil, q, kT)
			scores = qk
		default:
			qk = e.Op("MatMul", nil, q, kT)
			scores = e.Op("Div", nil, qk, e.F0(scale))
		}
		c2p := e.Op("MatMul", nil, bmm3(q), swap(perHead(posK))) // [.., S, 2·span]
		scores = e.Op("Add", nil, scores, div(term(c2p, c2pIdx, qk)))
		if s.p2c {
			p2c := e.Op("MatMul", nil, bmm3(k), swap(pq))
			p2c = e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 1, 3, 2)}, term(p2c, p2cIdx, qk))
			if s.guardP2C {
				p2c = guard(e, p2c, q, k)
			}
			scores = e.Op("Add", nil, scores, div(p2c))
		}
		a := e.Op("MatMul", nil, e.Op("Softmax", e.Axis(-1), scores), v)
		o := e.Op("Reshape", nil, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, a), e.Ints(0, 0, dim))
		x = e.Op("Add", nil, x, e.Op("MatMul", nil, o, e.Weight(dim, dim)))
	}
	out := e.Op("MatMul", nil, x, e.Weight(dim, vocab))
	out.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: vocab, Known: true}})
	e.G.AddOutput(out)
	return m
}

// guard is If(q_len != k_len) of the term re-gathered (its rows
// reversed), else the term: what a scripted function with a branch on
// the lengths exports to.
func guard(e *st.Env, term, q, k *graph.Value) *graph.Value {
	qlen := e.Op("Gather", e.Axis(0), e.Op("Shape", nil, q), e.Int0(2))
	klen := e.Op("Gather", e.Axis(0), e.Op("Shape", nil, k), e.Int0(2))
	differ := e.Op("Not", nil, e.Op("Equal", nil, qlen, klen))
	then := e.G.NewSubgraph("then")
	rev := then.Op("Neg", []*graph.Value{term}, 1)[0]
	rev.Type = term.Type
	then.AddOutput(rev)
	els := e.G.NewSubgraph("else")
	same := els.Op("Identity", []*graph.Value{term}, 1)[0]
	same.Type = term.Type
	els.AddOutput(same)
	return e.Op("If", []*graph.Attr{graph.GraphAttr("then_branch", then), graph.GraphAttr("else_branch", els)}, differ)
}

// TestForms: disentangled attention with bucket counts, spans and terms
// the corpus does not have, each with the params the math gives.
func TestForms(t *testing.T) {
	cases := []struct {
		name string
		spec debSpec
		want map[string]any
	}{{
		// Both terms through the content projections, over [B·H, S, hd]
		// with the tables expanded over the batch (the corpus tiles them),
		// 8 log buckets reaching 64 (the corpus has 16 and 128).
		name: "shared_8_buckets_64",
		spec: debSpec{span: 8, buckets: 8, maxPos: 64, p2c: true, shared: true, bmm: true},
		want: map[string]any{"position_buckets": 8, "max_relative_positions": 64, "att_types": []string{"c2p", "p2c"}, "share_att_key": true, "scale_factor": 3.0},
	}, {
		// The key divided by sqrt(3d) before its product with q
		// (DeBERTa-v2): the p2c term multiplies the key all the same,
		// and the shared projections are the terms' own.
		name: "shared_key_scaled_first",
		spec: debSpec{span: 8, buckets: 8, maxPos: 32, p2c: true, shared: true, bmm: true, scaleKey: true},
		want: map[string]any{"position_buckets": 8, "max_relative_positions": 32, "att_types": []string{"c2p", "p2c"}, "share_att_key": true, "scale_factor": 3.0},
	}, {
		// Both terms, each through its own projection of the relative
		// embedding: not shared.
		name: "unshared_both_terms",
		spec: debSpec{span: 8, buckets: 8, maxPos: 32, p2c: true, scaleKey: true},
		want: map[string]any{"position_buckets": 8, "max_relative_positions": 32, "att_types": []string{"c2p", "p2c"}, "share_att_key": false, "scale_factor": 3.0},
	}, {
		// DeBERTa v1: no buckets, the span min(S, 16) computed from the
		// length, the table sliced to it, the indexes clamped by Max and
		// Min to a computed bound, p2c through an If on the lengths.
		name: "v1_span_from_length",
		// The query and the position query are divided by sqrt(3d)
		// before their products, the terms are not.
		spec: debSpec{span: 16, p2c: true, lengthSpan: true, guardP2C: true, scaleQuery: true},
		want: map[string]any{"position_buckets": nil, "max_relative_positions": 16, "att_types": []string{"c2p", "p2c"}, "share_att_key": false, "scale_factor": 3.0},
	}, {
		// Content-to-position only, its own projection, relative
		// positions clamped to ±6 (no buckets), scores / sqrt(2d).
		name: "c2p_only_span_6",
		spec: debSpec{span: 6},
		want: map[string]any{"position_buckets": nil, "max_relative_positions": 6, "att_types": []string{"c2p"}, "share_att_key": false, "scale_factor": 2.0},
	}, {
		// The scores divided by sqrt(3d), the terms by 4: no one
		// sqrt(d·s) divides them all.
		name: "terms_scaled_unlike_scores",
		spec: debSpec{span: 8, buckets: 8, maxPos: 32, p2c: true, termDiv: 4},
		want: map[string]any{"position_buckets": 8, "max_relative_positions": 32, "att_types": []string{"c2p", "p2c"}, "share_att_key": false, "scale_factor": nil},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := debModel(c.spec)
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, disentangled.Detect)
			f := st.Only(t, fs, trace)
			if len(f.Layers) != 2 {
				t.Errorf("layers %v, want [0 1]", f.Layers)
			}
			st.WantParams(t, f, c.want)
		})
	}
}

// TestNearMisses: position terms gathered by indices that are not
// DeBERTa's give no finding, and the trace says why.
func TestNearMisses(t *testing.T) {
	cases := []struct {
		name   string
		spec   debSpec
		reason string
	}{{
		// The index q - k + span is not clamped to the table.
		name:   "index_not_clamped",
		spec:   debSpec{span: 6, noClip: true},
		reason: "the term's index is not a clamped function of the positions",
	}, {
		// The query's position alone (broadcast over the keys), clamped.
		name: "index_of_the_query_alone",
		spec: debSpec{span: 6, rel: func(e *st.Env, qp, kp *graph.Value) *graph.Value {
			return e.Op("Add", nil, qp, e.Op("Mul", nil, kp, e.Int0(0)))
		}},
		reason: "the index is not a function of q - k",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := debModel(c.spec)
			if !c.spec.noClip { // an unclamped index reads past the table
				st.Executes(t, m, 6)
			}
			fs, trace := st.Detect(t, m, disentangled.Detect)
			st.WantMiss(t, fs, trace, "disentangled", c.reason)
		})
	}
}

// TestExternalWeights: with the weights stored outside the model file
// (which normalisation does not read, so the position tables computed
// from the relative embedding stay computed) the finding is the one of
// the model with its weights inside, nodes included.
func TestExternalWeights(t *testing.T) {
	spec := debSpec{span: 8, buckets: 8, maxPos: 32, p2c: true, shared: true, bmm: true}
	fs, trace := st.Detect(t, debModel(spec), disentangled.Detect)
	want := st.Only(t, fs, trace)
	ext, n, err := metamorph.ExternalData(debModel(spec), t.TempDir())
	if err != nil || n == 0 {
		t.Fatalf("external data: %d tensors moved, %v", n, err)
	}
	fs, trace = st.Detect(t, ext, disentangled.Detect)
	got := st.Only(t, fs, trace)
	if passes.ParamsKey(got.Params) != passes.ParamsKey(want.Params) {
		t.Errorf("params %s, want %s", passes.ParamsKey(got.Params), passes.ParamsKey(want.Params))
	}
	if !slices.Equal(got.Nodes, want.Nodes) {
		t.Errorf("nodes %d, want %d: %v\nwant %v", len(got.Nodes), len(want.Nodes), got.Nodes, want.Nodes)
	}
}
