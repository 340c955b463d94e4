package relsin_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/codegen"
	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/extend"
	st "github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme/relsin"
)

// TestCorpus audits the corpus models whose golden reports have
// relative_sinusoidal findings: each finding as the golden report has it.
func TestCorpus(t *testing.T) { st.CheckCorpus(t, relsin.Name, audit.AuditModel) }

const (
	heads = 2
	hd    = 16
	dim   = heads * hd
	vocab = 40
)

// relSpec is a two-layer model whose scores add q·R, R a projection of
// the sinusoid of relative distances, aligned by a relative shift.
type relSpec struct {
	// xlnet: distances klen .. -qlen+1 and XLNet's reshape/slice/gather
	// shift; else klen-1 .. 0 and Transformer-XL's pad/reshape/slice.
	xlnet  bool
	base   float64
	clamp  int  // clamp of the distances (0: none)
	biases bool // q + u in the content scores, q + v in the position ones
	// dist, when set, turns the distances (float [R]) into others; inv,
	// when set, gives the frequencies [1, dim/2].
	dist func(e *st.Env, d *graph.Value) *graph.Value
	inv  func(e *st.Env) *graph.Value
	// stored, when set, fixes the inputs at stored tokens and stores the
	// sinusoid of their distances as a constant (computed here, in Go,
	// as an export at fixed sizes writes it), [rows, dim] or, with
	// batchAxis, [rows, 1, dim] (time-major, as a fold of the
	// computed form leaves it); storedDist, when set, turns the
	// distances stored into others.
	stored     int
	batchAxis  bool
	storedDist func(d float64) float64
}

// storedSinusoid is the [sin | cos] sinusoid of the distances a model of
// s.stored tokens reads (klen-1 .. 0, or klen .. -qlen+1 for XLNet),
// clamped to ±s.clamp, as a constant.
func storedSinusoid(e *st.Env, s relSpec) *graph.Value {
	L := s.stored
	if L == 0 {
		return nil
	}
	var dist []float64
	for r := 0; r < L; r++ {
		dist = append(dist, float64(L-1-r))
	}
	if s.xlnet {
		dist = dist[:0]
		for r := 0; r < 2*L; r++ {
			dist = append(dist, float64(L-r))
		}
	}
	vals := make([]float32, 0, len(dist)*dim)
	for _, d := range dist {
		if s.clamp > 0 {
			d = max(-float64(s.clamp), min(float64(s.clamp), d))
		}
		if s.storedDist != nil {
			d = s.storedDist(d)
		}
		row := make([]float32, dim)
		for i := 0; i < dim/2; i++ {
			a := d * math.Pow(s.base, -2*float64(i)/dim)
			row[i], row[dim/2+i] = float32(math.Sin(a)), float32(math.Cos(a))
		}
		vals = append(vals, row...)
	}
	dims := []int64{int64(len(dist)), dim}
	if s.batchAxis {
		dims = []int64{int64(len(dist)), 1, dim}
	}
	return e.Floats(dims, vals)
}

// computedSinusoid is the [sin | cos] sinusoid [R, dim] of the distances
// of S tokens as the graph computes it (Range, clamp, frequencies, Sin
// and Cos).
func computedSinusoid(e *st.Env, s relSpec, S *graph.Value) *graph.Value {
	var d *graph.Value
	if s.xlnet {
		d = e.Op("Range", nil, S, e.Op("Neg", nil, S), e.Int0(-1))
	} else {
		d = e.Op("Range", nil, e.Op("Sub", nil, S, e.Int0(1)), e.Int0(-1), e.Int0(-1))
	}
	switch {
	case s.clamp > 0 && s.xlnet:
		d = e.Op("Clip", nil, d, e.Int0(int64(-s.clamp)), e.Int0(int64(s.clamp)))
	case s.clamp > 0:
		d = e.Op("Min", nil, d, e.Int0(int64(s.clamp)))
	}
	df := e.ToFloat(d)
	if s.dist != nil {
		df = s.dist(e, df)
	}
	var inv *graph.Value
	if s.inv != nil {
		inv = s.inv(e)
	} else {
		f := make([]float32, dim/2)
		for i := range f {
			f[i] = float32(math.Pow(s.base, -2*float64(i)/dim))
		}
		inv = e.Floats([]int64{1, dim / 2}, f)
	}
	ang := e.Op("Mul", nil, e.Op("Unsqueeze", nil, df, e.Ints(-1)), inv)
	return e.Op("Concat", e.Axis(-1), e.Op("Sin", nil, ang), e.Op("Cos", nil, ang))
}

func relModel(s relSpec) *graph.Model {
	m := graph.NewModel(8, "onnxpe-relsin-test", graph.Opset{Domain: "", Version: 17})
	e := &st.Env{Builder: &st.Builder{G: m.Graph, Rng: rand.New(rand.NewPCG(3, 11))}, Opset: 17, Heads: heads, HD: hd, D: dim}
	bs := []graph.Dim{{Param: "batch"}, {Param: "seq"}}
	if s.stored > 0 {
		bs = graph.Dims(1, int64(s.stored))
	}
	e.IDs = e.G.AddInput("input_ids", graph.TensorType(graph.Int64, bs))
	S := e.Op("Gather", e.Axis(0), e.Op("Shape", nil, e.IDs), e.Int0(1))
	e.Seq = S
	x := e.Op("Gather", nil, e.Weight(vocab, dim), e.IDs)
	// The distances and their sinusoid [R, dim].
	posEmb := storedSinusoid(e, s)
	if s.stored == 0 {
		posEmb = computedSinusoid(e, s, S)
	}
	dims := func(vs ...*graph.Value) *graph.Value { return e.Op("Concat", e.Axis(0), vs...) } // 1-D shapes joined
	heads4 := func(p *graph.Value) *graph.Value {
		return e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, e.Op("Reshape", nil, p, e.Ints(0, 0, heads, hd)))
	}
	for l := 0; l < 2; l++ {
		q, k, v := heads4(e.Op("MatMul", nil, x, e.Weight(dim, dim))), heads4(e.Op("MatMul", nil, x, e.Weight(dim, dim))), heads4(e.Op("MatMul", nil, x, e.Weight(dim, dim)))
		r := e.Op("Reshape", nil, e.Op("MatMul", nil, posEmb, e.Weight(dim, dim)), e.Ints(-1, heads, hd))
		rt := e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 1, 2, 0)}, r) // [H, hd, R]
		qu, qv := q, q
		if s.biases {
			bias := func() *graph.Value {
				v := make([]float32, dim)
				for i := range v {
					v[i] = float32(e.Rng.NormFloat64() * 0.1)
				}
				return e.Floats([]int64{heads, 1, hd}, v)
			}
			qu, qv = e.Op("Add", nil, q, bias()), e.Op("Add", nil, q, bias())
		}
		ac := e.Op("MatMul", nil, qu, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 1, 3, 2)}, k))
		bd := e.Op("MatMul", nil, qv, rt) // [B, H, S, R]
		one := e.Ints(1)
		su := e.Op("Unsqueeze", nil, S, e.Ints(0))
		if s.xlnet {
			// rel_shift_bnij: [B,H,2S,S], drop the first row, [B,H,S,2S-1],
			// keep the first S columns.
			x1 := e.Op("Reshape", nil, bd, dims(e.Ints(0, 0), e.Op("Mul", nil, su, e.Ints(2)), su))
			x2 := e.Op("Slice", nil, x1, one, e.Ints(math.MaxInt64), e.Ints(2))
			x3 := e.Op("Reshape", nil, x2, dims(e.Ints(0, 0), su, e.Op("Sub", nil, e.Op("Mul", nil, su, e.Ints(2)), one)))
			bd = e.Op("Gather", e.Axis(3), x3, e.Op("Range", nil, e.Int0(0), S, e.Int0(1)))
		} else {
			// _rel_shift: a zero column in front, [B,H,S+1,S], drop the first
			// row, back to [B,H,S,S].
			zshape := dims(e.Op("Slice", nil, e.Op("Shape", nil, bd), e.Ints(0), e.Ints(3)), one)
			zero := e.Op("ConstantOfShape", []*graph.Attr{graph.TensorAttr("value", st.MustTensor(graph.Float, []int64{1}, []float32{0}))}, zshape)
			padded := e.Op("Concat", e.Axis(3), zero, bd)
			x1 := e.Op("Reshape", nil, padded, dims(e.Ints(0, 0), e.Op("Add", nil, su, one), su))
			x2 := e.Op("Slice", nil, x1, one, e.Ints(math.MaxInt64), e.Ints(2))
			bd = e.Op("Reshape", nil, x2, e.Op("Shape", nil, ac))
		}
		scores := e.Op("Mul", nil, e.Op("Add", nil, ac, bd), e.F0(0.25))
		a := e.Op("MatMul", nil, e.Op("Softmax", e.Axis(-1), scores), v)
		o := e.Op("Reshape", nil, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, a), e.Ints(0, 0, dim))
		x = e.Op("Add", nil, x, e.Op("MatMul", nil, o, e.Weight(dim, dim)))
	}
	out := e.Op("MatMul", nil, x, e.Weight(dim, vocab))
	out.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: vocab, Known: true}})
	e.G.AddOutput(out)
	return m
}

// TestForms: relative sinusoids with bases, clamps and ops the corpus does
// not have, each with the params the math gives.
func TestForms(t *testing.T) {
	cases := []struct {
		name string
		spec relSpec
		want map[string]any
	}{{
		// Transformer-XL's distances and shift by MatMul instead of
		// Einsum, base 1000, no global biases, no clamp.
		name: "transfo_xl_base_1000_matmul",
		spec: relSpec{base: 1000},
		want: map[string]any{"variant": "transfo_xl", "dim": dim, "base": 1000.0, "global_biases": false, "clamp_len": nil, "rel_shift": "pad_reshape_slice"},
	}, {
		// XLNet's distances clamped to ±6 by Clip, base 5000, global
		// biases u and v, the shift's columns kept by Gather.
		name: "xlnet_clamp_6_biases",
		spec: relSpec{xlnet: true, base: 5000, clamp: 6, biases: true},
		want: map[string]any{"variant": "xlnet", "dim": dim, "base": 5000.0, "global_biases": true, "clamp_len": 6, "rel_shift": "reshape_slice"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := relModel(c.spec)
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, relsin.Detect)
			f := st.Only(t, fs, trace)
			if len(f.Layers) != 2 {
				t.Errorf("layers %v, want [0 1]", f.Layers)
			}
			st.WantParams(t, f, c.want)
		})
	}
}

// TestNearMisses: position terms over sinusoids that are not of relative
// distances give no finding, and the trace says why.
func TestNearMisses(t *testing.T) {
	cases := []struct {
		name   string
		spec   relSpec
		reason string
	}{{
		// The frequencies are a graph input: the angles are not in the
		// file.
		name: "frequencies_given_as_input",
		spec: relSpec{inv: func(e *st.Env) *graph.Value {
			return e.G.AddInput("inv_freq", graph.TensorType(graph.Float, graph.Dims(1, dim/2)))
		}},
		reason: "the angles come from parameters given as inputs",
	}, {
		// The squares of the distances: the rows are not one distance
		// apart.
		name:   "squared_distances",
		spec:   relSpec{base: 10000, dist: func(e *st.Env, d *graph.Value) *graph.Value { return e.Op("Mul", nil, d, d) }},
		reason: "is not at a whole distance",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := relModel(c.spec)
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, relsin.Detect)
			st.WantMiss(t, fs, trace, "relative_sinusoidal", c.reason)
		})
	}
}

// TestStoredForms: the sinusoid stored as a constant the layers project
// (an export at fixed sizes, ONNX Runtime's constant folding), no Sin or
// Cos in the graph, is read from its rows: the params the math gives,
// and a clamp the stored distances do not reach is null with a note.
func TestStoredForms(t *testing.T) {
	cases := []struct {
		name string
		spec relSpec
		want map[string]any
		note string
	}{{
		// Transformer-XL's 10 distances 9 .. 0 clamped at 6 (rows 6, 6,
		// 6, 6, 5, .. 0), base 10000, global biases.
		name: "transfo_xl_10_clamp_6",
		spec: relSpec{stored: 10, base: 10000, clamp: 6, biases: true},
		want: map[string]any{"variant": "transfo_xl", "dim": dim, "base": 10000.0, "global_biases": true, "clamp_len": 6, "rel_shift": "pad_reshape_slice"},
	}, {
		// XLNet's 16 distances 8 .. -7, [rows, 1, dim] as a fold of the
		// time-major computed form leaves it, base 5000: no clamp shows.
		name: "xlnet_8_batch_axis",
		spec: relSpec{stored: 8, xlnet: true, base: 5000, batchAxis: true},
		want: map[string]any{"variant": "xlnet", "dim": dim, "base": 5000.0, "global_biases": false, "clamp_len": nil, "rel_shift": "reshape_slice"},
		note: "clamp_len: the stored sinusoid holds the distances 8 .. -7 of 8 keys and 8 queries only",
	}, {
		// XLNet's distances clamped to ±3 at both ends.
		name: "xlnet_8_clamp_3",
		spec: relSpec{stored: 8, xlnet: true, base: 10000, clamp: 3, biases: true},
		want: map[string]any{"variant": "xlnet", "dim": dim, "base": 10000.0, "global_biases": true, "clamp_len": 3, "rel_shift": "reshape_slice"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := relModel(c.spec)
			st.Executes(t, m, c.spec.stored)
			fs, trace := st.Detect(t, m, relsin.Detect)
			f := st.Only(t, fs, trace)
			if len(f.Layers) != 2 {
				t.Errorf("layers %v, want [0 1]", f.Layers)
			}
			st.WantParams(t, f, c.want)
			if got := strings.Join(f.Notes, "; "); c.note == "" && got != "" || !strings.Contains(got, c.note) {
				t.Errorf("notes %q, want %q", f.Notes, c.note)
			}
			ev := f.Evidence.(*relsin.Evidence)
			if ev.Stored == "" || ev.Exact != nil {
				t.Errorf("evidence stored %q, exact %v: want the stored table named and no arithmetic", ev.Stored, ev.Exact)
			}
		})
	}
}

// TestStoredNearMisses: a stored table of sin/cos pairs whose rows are not
// consecutive distances is no relative sinusoid, and the trace says why.
func TestStoredNearMisses(t *testing.T) {
	m := relModel(relSpec{stored: 8, base: 10000, storedDist: func(d float64) float64 { return d * d }})
	st.Executes(t, m, 8)
	fs, trace := st.Detect(t, m, relsin.Detect)
	st.WantMiss(t, fs, trace, "relative_sinusoidal", "angles are not linear in the row")
}

// TestStoredIsLeftAlone: a stored sinusoid is not rewritten (it is stored
// already), not extended (the longer distances are not in the file) and
// not generated (the graph holds no arithmetic of it), each with the
// reason, as T5's stored bias is.
func TestStoredIsLeftAlone(t *testing.T) {
	m := relModel(relSpec{stored: 8, xlnet: true, base: 10000, biases: true})
	r, _, err := audit.RewriteModel(m, passes.Options{}, relsin.Rewrite)
	if err != nil {
		t.Fatalf("rewrite: %v", err)
	}
	var notes []string
	for _, ch := range r.Changes {
		if ch.Pass == relsin.Rewrite.Name {
			notes = append(notes, ch.Notes...)
			if len(ch.Layers) > 0 || len(ch.Skipped) > 0 {
				t.Errorf("rewrite: layers %v, skipped %q: want the finding noted as stored", ch.Layers, ch.Skipped)
			}
		}
	}
	if want := "the sinusoid is stored already"; !strings.Contains(strings.Join(notes, "; "), want) {
		t.Errorf("rewrite notes %q, want %q", notes, want)
	}
	rep, ctx, err := audit.AuditModel(m, "stored", passes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = extend.Extend(rep, ctx, rewrite.ExtendOptions{To: 64})
	if want := "of the distances 8 .. -7: the sinusoid of longer distances is not in the file"; !errors.Is(err, rewrite.ErrExtend) || !strings.Contains(err.Error(), want) {
		t.Errorf("extend: %v, want %q", err, want)
	}
	rep, ctx, err = audit.AuditModel(m, "stored", passes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := codegen.Generate(rep, ctx, emit.Options{Lang: "go", Package: "relsin"})
	if res == nil {
		t.Fatalf("codegen: %v", err)
	}
	if !errors.Is(err, codegen.ErrNothing) || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, "of the distances 8 .. -7: the graph holds no arithmetic of it to write") {
		t.Errorf("codegen: %v, skipped %+v: want the stored sinusoid left out with the reason", err, res.Skipped)
	}
}

// pairModel is a two-layer model whose scores add q·a(i, j) from a
// [L, L, hd] constant of a row per query i and key j, cut to the length
// (relative embeddings stored whole, as Hugging Face's Nezha export
// holds them): the sinusoid (interleaved) of dist(j - i).
func pairModel(L int, dist func(n int) int) *graph.Model {
	m := graph.NewModel(8, "onnxpe-relsin-test", graph.Opset{Domain: "", Version: 17})
	e := &st.Env{Builder: &st.Builder{G: m.Graph, Rng: rand.New(rand.NewPCG(7, 9))}, Opset: 17, Heads: heads, HD: hd, D: dim}
	e.IDs = e.G.AddInput("input_ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
	e.Seq = e.Op("Gather", e.Axis(0), e.Op("Shape", nil, e.IDs), e.Int0(1))
	table := make([]float32, 0, L*L*hd)
	for i := 0; i < L; i++ {
		for j := 0; j < L; j++ {
			for c := 0; c < hd; c++ {
				a := float64(dist(j-i)) * math.Pow(10000, -float64(2*(c/2))/hd)
				if c%2 == 0 {
					table = append(table, float32(math.Sin(a)))
				} else {
					table = append(table, float32(math.Cos(a)))
				}
			}
		}
	}
	stored := e.Floats([]int64{int64(L), int64(L), hd}, table)
	x := e.Op("Gather", nil, e.Weight(vocab, dim), e.IDs)
	perm := func(x *graph.Value, p ...int64) *graph.Value {
		return e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", p...)}, x)
	}
	heads4 := func(p *graph.Value) *graph.Value {
		return perm(e.Op("Reshape", nil, p, e.Ints(0, 0, heads, hd)), 0, 2, 1, 3)
	}
	s1 := e.Op("Unsqueeze", nil, e.Seq, e.Ints(0))
	for l := 0; l < 2; l++ {
		q, k, v := heads4(e.Op("MatMul", nil, x, e.Weight(dim, dim))), heads4(e.Op("MatMul", nil, x, e.Weight(dim, dim))), heads4(e.Op("MatMul", nil, x, e.Weight(dim, dim)))
		rel := e.Op("Slice", nil, stored, e.Ints(0, 0), e.Op("Concat", e.Axis(0), s1, s1), e.Ints(0, 1)) // [S, S, hd]
		qr := e.Op("Reshape", nil, perm(q, 2, 0, 1, 3), e.Ints(0, -1, hd))                               // [S, B·H, hd]
		kp := e.Op("MatMul", nil, qr, perm(rel, 0, 2, 1))                                                // [S, B·H, S]
		kp = perm(e.Op("Reshape", nil, kp, e.Op("Concat", e.Axis(0), s1, e.Ints(-1, heads), s1)), 1, 2, 0, 3)
		scores := e.Op("Add", nil, e.Op("MatMul", nil, q, perm(k, 0, 1, 3, 2)), kp)
		a := e.Op("MatMul", nil, e.Op("Softmax", e.Axis(-1), e.Op("Div", nil, scores, e.F0(4))), v)
		o := e.Op("Reshape", nil, perm(a, 0, 2, 1, 3), e.Ints(0, 0, dim))
		x = e.Op("Add", nil, x, e.Op("MatMul", nil, o, e.Weight(dim, dim)))
	}
	out := e.Op("MatMul", nil, x, e.Weight(dim, vocab))
	out.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: vocab, Known: true}})
	e.G.AddOutput(out)
	return m
}

// TestStoredPairsClipped: a sinusoid stored whole, a row per query and
// key, of a distance key − query clipped at ±k (the rows beyond repeat
// those of ±k) is Shaw's clipped relative embedding, not a relative
// sinusoid, whether the rows hold the clipped distance or it shifted by
// k (Nezha's table rows 0 .. 2k); the trace says why. Unclipped, every
// distance has a row of its own and the relative sinusoid still reads
// it (Shaw's detector refuses such a table).
func TestStoredPairsClipped(t *testing.T) {
	clip := func(k, off int) func(n int) int { return func(n int) int { return max(-k, min(k, n)) + off } }
	for _, c := range []struct {
		name string
		dist func(n int) int
		miss string
	}{
		{"nezha_clip_4", clip(4, 4), "stop changing beyond the distances -4 and 4 of -15 .. 15"},
		{"clip_6_centered", clip(6, 0), "stop changing beyond the distances -6 and 6"},
		{"every_distance", func(n int) int { return n }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := pairModel(16, c.dist)
			st.Executes(t, m, 8)
			fs, trace := st.Detect(t, m, relsin.Detect)
			if c.miss == "" {
				if f := st.Only(t, fs, trace); len(f.Layers) != 2 {
					t.Errorf("layers %v, want [0 1]", f.Layers)
				}
				return
			}
			st.WantMiss(t, fs, trace, "relative_sinusoidal", c.miss)
		})
	}
}
