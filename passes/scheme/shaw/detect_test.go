package shaw_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/codegen"
	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
	"github.com/onnxpe/onnxpe/internal/metamorph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/extend"
	st "github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme/shaw"
)

// TestCorpus audits the corpus models whose golden reports have
// relative_clipped findings: each finding as the golden report has it.
func TestCorpus(t *testing.T) { st.CheckCorpus(t, shaw.Name, audit.AuditModel) }

const (
	heads = 2
	hd    = 16
	dim   = heads * hd
	vocab = 40
)

// relModel is a model of layers attention blocks over q, k, v [B,H,S,hd]
// whose scores add q times a [rows, hd] table gathered at idx(e) [S, S]
// (Einsum bhid,ijd->bhij) and, with values, whose outputs add the weights
// times a second table gathered at the same index; each layer its own
// tables.
func relModel(layers, rows int, values bool, idx func(e *st.Env) *graph.Value) *graph.Model {
	m := graph.NewModel(8, "onnxpe-shaw-test", graph.Opset{Domain: "", Version: 17})
	e := &st.Env{Builder: &st.Builder{G: m.Graph, Rng: rand.New(rand.NewPCG(7, 9))}, Opset: 17, Heads: heads, HD: hd, D: dim}
	bs := []graph.Dim{{Param: "batch"}, {Param: "seq"}}
	e.IDs = e.G.AddInput("input_ids", graph.TensorType(graph.Int64, bs))
	e.Seq = e.Op("Gather", e.Axis(0), e.Op("Shape", nil, e.IDs), e.Int0(1))
	x := e.Op("Gather", nil, e.Weight(vocab, dim), e.IDs)
	index := idx(e)
	heads4 := func(p *graph.Value) *graph.Value {
		return e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, e.Op("Reshape", nil, p, e.Ints(0, 0, heads, hd)))
	}
	einsum := func(eq string, a, b *graph.Value) *graph.Value {
		return e.Op("Einsum", []*graph.Attr{graph.StringAttr("equation", eq)}, a, b)
	}
	for l := 0; l < layers; l++ {
		q, k, v := heads4(e.Op("MatMul", nil, x, e.Weight(dim, dim))), heads4(e.Op("MatMul", nil, x, e.Weight(dim, dim))), heads4(e.Op("MatMul", nil, x, e.Weight(dim, dim)))
		relK := e.Op("Gather", nil, e.Weight(rows, hd), index) // [S, S, hd]
		scores := e.Op("Add", nil, einsum("bhid,bhjd->bhij", q, k), einsum("bhid,ijd->bhij", q, relK))
		w := e.Op("Softmax", e.Axis(-1), e.Op("Mul", nil, scores, e.F0(0.25)))
		a := e.Op("MatMul", nil, w, v)
		if values {
			relV := e.Op("Gather", nil, e.Weight(rows, hd), index)
			a = e.Op("Add", nil, a, einsum("bhij,ijd->bhid", w, relV))
		}
		o := e.Op("Reshape", nil, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, a), e.Ints(0, 0, dim))
		x = e.Op("Add", nil, x, e.Op("MatMul", nil, o, e.Weight(dim, dim)))
	}
	out := e.Op("MatMul", nil, x, e.Weight(dim, vocab))
	out.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: vocab, Known: true}})
	e.G.AddOutput(out)
	return m
}

// jMinusI is j - i as int64 [S, S] (key minus query).
func jMinusI(e *st.Env) *graph.Value {
	r := e.RangeS()
	return e.Op("Sub", nil, e.Op("Unsqueeze", nil, r, e.Ints(0)), e.Op("Unsqueeze", nil, r, e.Ints(1)))
}

// TestForms: relative embeddings with clippings, directions and ops the
// corpus does not have, each with the params the math gives.
func TestForms(t *testing.T) {
	cases := []struct {
		name string
		m    *graph.Model
		want map[string]any
		// note starts one of the finding's notes ("": not checked).
		note string
		// radius is the table's row of distance 0 (its rows 2·radius + 1).
		radius int
	}{{
		// One layer, key tables only, key - query clipped to ±6 by Clip.
		name: "clip_6_keys_only",
		m: relModel(1, 13, false, func(e *st.Env) *graph.Value {
			return e.Op("Add", nil, e.Op("Clip", nil, jMinusI(e), e.Int0(-6), e.Int0(6)), e.Int0(6))
		}),
		want:   map[string]any{"max_relative_position": 6, "dim": hd, "distance": "key_minus_query", "clipped": true, "relative_values": false, "per_layer_tables": false},
		radius: 6,
	}, {
		// Two layers with key and value tables each, query - key clipped
		// to ±3 by Max and Min.
		name: "query_minus_key_3_with_values",
		m: relModel(2, 7, true, func(e *st.Env) *graph.Value {
			d := e.Op("Neg", nil, jMinusI(e))
			return e.Op("Add", nil, e.Op("Min", nil, e.Op("Max", nil, d, e.Int0(-3)), e.Int0(3)), e.Int0(3))
		}),
		want:   map[string]any{"max_relative_position": 3, "dim": hd, "distance": "query_minus_key", "clipped": true, "relative_values": true, "per_layer_tables": true},
		radius: 3,
	}, {
		// key - query clipped to ±20 (41 rows): the clamp lies beyond
		// the first probe's distances and is found at the table's edges.
		name: "clip_20_past_the_first_probe",
		m: relModel(1, 41, false, func(e *st.Env) *graph.Value {
			return e.Op("Add", nil, e.Op("Clip", nil, jMinusI(e), e.Int0(-20), e.Int0(20)), e.Int0(20))
		}),
		want:   map[string]any{"max_relative_position": 20, "dim": hd, "distance": "key_minus_query", "clipped": true, "relative_values": false, "per_layer_tables": false},
		radius: 20,
	}, {
		// Hugging Face's relative_key: query - key + 31 into 63 rows with
		// no clamp (longer inputs read outside the table): no clipping
		// distance, the table's radius 31 in the note and the evidence.
		name: "relative_key_unclamped_63_rows",
		m: relModel(1, 63, false, func(e *st.Env) *graph.Value {
			return e.Op("Add", nil, e.Op("Neg", nil, jMinusI(e)), e.Int0(31))
		}),
		want:   map[string]any{"max_relative_position": nil, "dim": hd, "distance": "query_minus_key", "clipped": false, "relative_values": false, "per_layer_tables": false},
		note:   "max_relative_position: no clamp",
		radius: 31,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st.Executes(t, c.m, 6)
			fs, trace := st.Detect(t, c.m, shaw.Detect)
			f := st.Only(t, fs, trace)
			st.WantParams(t, f, c.want)
			if ev, _ := f.Evidence.(*shaw.Evidence); ev == nil || ev.Radius != c.radius {
				t.Errorf("evidence %+v, want the table's radius %d", f.Evidence, c.radius)
			}
			if c.note != "" && !slices.ContainsFunc(f.Notes, func(n string) bool { return strings.HasPrefix(n, c.note) }) {
				t.Errorf("notes %q, want one starting %q", f.Notes, c.note)
			}
		})
	}
}

// TestNearMisses: tables gathered by indices that are not clipped
// relative positions give no finding, and the trace says why.
func TestNearMisses(t *testing.T) {
	cases := []struct {
		name   string
		m      *graph.Model
		reason string
	}{{
		// The key's own position, clipped (an absolute index).
		name: "index_of_the_key_alone",
		m: relModel(1, 9, false, func(e *st.Env) *graph.Value {
			r := e.RangeS()
			j := e.Op("Sub", nil, e.Op("Unsqueeze", nil, r, e.Ints(0)), e.Op("Mul", nil, e.Op("Unsqueeze", nil, r, e.Ints(1)), e.Int0(0)))
			return e.Op("Clip", nil, j, e.Int0(0), e.Int0(8))
		}),
		reason: "the index is not a function of key - query",
	}, {
		// 2·(j - i) clipped to ±8: every other row skipped.
		name: "index_steps_by_two",
		m: relModel(1, 17, false, func(e *st.Env) *graph.Value {
			d := e.Op("Mul", nil, jMinusI(e), e.Int0(2))
			return e.Op("Add", nil, e.Op("Clip", nil, d, e.Int0(-8), e.Int0(8)), e.Int0(8))
		}),
		reason: "the index changes by 2 per position",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st.Executes(t, c.m, 6)
			fs, trace := st.Detect(t, c.m, shaw.Detect)
			st.WantMiss(t, fs, trace, "relative_clipped", c.reason)
		})
	}
}

// nezhaModel is a model of two attention blocks written as Hugging
// Face's Nezha exports its functional relative positions: a stored
// [L, L, hd] table of the embeddings of clamp(j - i, -k, k) (rows of a
// fixed interleaved sinusoid, the product one_hot(index) @ table computed
// at init), sliced [:S, :S], transposed to [S, hd, S] and multiplied with
// the query permuted to [S, B·H, hd]; the product, viewed [S, B, H, S]
// and permuted back, is added to q·kᵀ before the scaling. With values,
// the weights permuted to [S, B·H, S] times the sliced table are added to
// the output the same way. table gives the stored table instead (nil:
// Nezha's).
func nezhaModel(L, k int, values bool, table []float32) *graph.Model {
	m := graph.NewModel(8, "onnxpe-shaw-test", graph.Opset{Domain: "", Version: 17})
	e := &st.Env{Builder: &st.Builder{G: m.Graph, Rng: rand.New(rand.NewPCG(7, 9))}, Opset: 17, Heads: heads, HD: hd, D: dim}
	bs := []graph.Dim{{Param: "batch"}, {Param: "seq"}}
	e.IDs = e.G.AddInput("input_ids", graph.TensorType(graph.Int64, bs))
	e.Seq = e.Op("Gather", e.Axis(0), e.Op("Shape", nil, e.IDs), e.Int0(1))
	if table == nil {
		sin := st.SinTableInterleaved(2*k+1, hd)
		table = make([]float32, L*L*hd)
		for i := 0; i < L; i++ {
			for j := 0; j < L; j++ {
				r := max(-k, min(k, j-i)) + k
				copy(table[(i*L+j)*hd:(i*L+j+1)*hd], sin[r*hd:(r+1)*hd])
			}
		}
	}
	stored := e.Floats([]int64{int64(L), int64(L), hd}, table)
	x := e.Op("Gather", nil, e.Weight(vocab, dim), e.IDs)
	heads4 := func(p *graph.Value) *graph.Value {
		return e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, e.Op("Reshape", nil, p, e.Ints(0, 0, heads, hd)))
	}
	perm := func(x *graph.Value, p ...int64) *graph.Value {
		return e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", p...)}, x)
	}
	s1 := e.Op("Unsqueeze", nil, e.Seq, e.Ints(0))
	for l := 0; l < 2; l++ {
		q, kk, v := heads4(e.Op("MatMul", nil, x, e.Weight(dim, dim))), heads4(e.Op("MatMul", nil, x, e.Weight(dim, dim))), heads4(e.Op("MatMul", nil, x, e.Weight(dim, dim)))
		ends := e.Op("Concat", e.Axis(0), s1, s1)
		rel := e.Op("Slice", nil, stored, e.Ints(0, 0), ends, e.Ints(0, 1)) // [S, S, hd]
		qr := e.Op("Reshape", nil, perm(q, 2, 0, 1, 3), e.Ints(0, -1, hd))  // [S, B·H, hd]
		kp := e.Op("MatMul", nil, qr, perm(rel, 0, 2, 1))                   // [S, B·H, S]
		kp = perm(e.Op("Reshape", nil, kp, e.Op("Concat", e.Axis(0), s1, e.Ints(-1, heads), s1)), 1, 2, 0, 3)
		scores := e.Op("Add", nil, e.Op("MatMul", nil, q, perm(kk, 0, 1, 3, 2)), kp)
		w := e.Op("Softmax", e.Axis(-1), e.Op("Div", nil, scores, e.F0(4)))
		a := e.Op("MatMul", nil, w, v)
		if values {
			wr := e.Op("Reshape", nil, perm(w, 2, 0, 1, 3), e.Op("Concat", e.Axis(0), s1, e.Ints(-1), s1)) // [S, B·H, S]
			vp := e.Op("MatMul", nil, wr, rel)                                                             // [S, B·H, hd]
			vp = perm(e.Op("Reshape", nil, vp, e.Op("Concat", e.Axis(0), s1, e.Ints(-1, heads, hd))), 1, 2, 0, 3)
			a = e.Op("Add", nil, a, vp)
		}
		o := e.Op("Reshape", nil, perm(a, 0, 2, 1, 3), e.Ints(0, 0, dim))
		x = e.Op("Add", nil, x, e.Op("MatMul", nil, o, e.Weight(dim, dim)))
	}
	out := e.Op("MatMul", nil, x, e.Weight(dim, vocab))
	out.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: vocab, Known: true}})
	e.G.AddOutput(out)
	return m
}

// TestStoredWhole: relative embeddings stored whole, [L, L, hd], read by
// no index (Nezha's form): the clipping read from what the term adds to
// the scores.
func TestStoredWhole(t *testing.T) {
	cases := []struct {
		name string
		m    *graph.Model
		want map[string]any
	}{{
		// Hugging Face's Nezha: keys and values, clipped at 4.
		name: "nezha_clip_4_keys_values",
		m:    nezhaModel(32, 4, true, nil),
		want: map[string]any{"max_relative_position": 4, "dim": hd, "distance": "key_minus_query", "clipped": true, "relative_values": true},
	}, {
		// Clipped at 20, beyond the first probe's 16 positions: read at
		// the table's 48.
		name: "clip_20_keys_only",
		m:    nezhaModel(48, 20, false, nil),
		want: map[string]any{"max_relative_position": 20, "dim": hd, "distance": "key_minus_query", "clipped": true, "relative_values": false},
	}, {
		// A table of 12 positions, fewer than the first probe's 16: read
		// at its 12.
		name: "table_of_12",
		m:    nezhaModel(12, 4, true, nil),
		want: map[string]any{"max_relative_position": 4, "dim": hd, "distance": "key_minus_query", "clipped": true, "relative_values": true},
	}, {
		// Every MatMul an Einsum "...ij,...jk->...ik": the contracted
		// width read through the ellipsis.
		name: "nezha_einsum",
		m: func() *graph.Model {
			m, _, err := metamorph.MatMulToEinsum(nezhaModel(32, 4, true, nil))
			if err != nil {
				panic(err)
			}
			return m
		}(),
		want: map[string]any{"max_relative_position": 4, "dim": hd, "distance": "key_minus_query", "clipped": true, "relative_values": true},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st.Executes(t, c.m, 6)
			fs, trace := st.Detect(t, c.m, shaw.Detect)
			f := st.Only(t, fs, trace)
			st.WantParams(t, f, c.want)
			if ev, _ := f.Evidence.(*shaw.Evidence); ev == nil || ev.Stored == "" {
				t.Errorf("evidence %+v, want the stored table named", f.Evidence)
			}
		})
	}
	misses := []struct {
		name   string
		m      *graph.Model
		reason string
	}{{
		// A stored table of random vectors: not relative.
		name: "random_table",
		m: func() *graph.Model {
			rng := rand.New(rand.NewPCG(1, 2))
			tb := make([]float32, 24*24*hd)
			for i := range tb {
				tb[i] = float32(rng.NormFloat64())
			}
			return nezhaModel(24, 4, false, tb)
		}(),
		reason: "not a function of key - query",
	}, {
		// Clipped at 40 in a table of 32: every distance apart, as
		// another relative scheme's stored embeddings would be.
		name:   "no_clipping_within_the_table",
		m:      nezhaModel(32, 40, false, nil),
		reason: "no clipping shows",
	}}
	for _, c := range misses {
		t.Run(c.name, func(t *testing.T) {
			st.Executes(t, c.m, 6)
			fs, trace := st.Detect(t, c.m, shaw.Detect)
			st.WantMiss(t, fs, trace, "relative_clipped", c.reason)
		})
	}
}

// TestStoredWholeRefused: the audit of embeddings stored whole carries
// its measurement and a plot saying so; the extension refuses them (the
// embeddings of longer inputs are not in the file) and codegen leaves
// them out (no table of distances, no index), each with the reason.
func TestStoredWholeRefused(t *testing.T) {
	m := nezhaModel(32, 4, true, nil)
	rep, ctx, err := audit.AuditModel(m, "nezha", passes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var f *passes.Finding
	for _, g := range rep.Findings {
		if g.Scheme == shaw.Name {
			f = g
		}
	}
	if f == nil || f.Measured == nil {
		t.Fatalf("findings %s, want a measured %s finding", st.Describe(rep.Findings), shaw.Name)
	}
	ev, _ := f.Evidence.(*shaw.Evidence)
	if ev == nil || ev.Stored == "" || ev.Held != 32 {
		t.Fatalf("evidence %+v, want the stored table of 32 positions", f.Evidence)
	}
	figs := shaw.Plots(&plot.IDs{}, f)
	if len(figs) != 1 || figs[0] == nil || !strings.Contains(figs[0].Caption, "stored whole") || !strings.Contains(figs[0].Caption, "read the embeddings of ±4") {
		t.Errorf("plots %+v, want the stored embeddings' numbers with the clipping at 4", figs)
	}
	_, err = extend.Extend(rep, ctx, rewrite.ExtendOptions{To: 64})
	if !errors.Is(err, rewrite.ErrExtend) || !strings.Contains(err.Error(), "stored whole") || !strings.Contains(err.Error(), "of 32 queries and keys") {
		t.Errorf("extend: %v, want the stored table refused", err)
	}
	res, err := codegen.Generate(rep, ctx, emit.Options{Lang: "go", Package: "nezha", Model: "nezha.onnx", SHA256: strings.Repeat("0", 64)})
	if err != nil && !errors.Is(err, codegen.ErrNothing) {
		t.Fatal(err)
	}
	if res == nil || len(res.Skipped) != 1 || res.Skipped[0].Scheme != shaw.Name || !strings.Contains(res.Skipped[0].Reason, "stored whole") {
		t.Errorf("codegen: %+v, want %s left out as stored whole", res, shaw.Name)
	}
}
