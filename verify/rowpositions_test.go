package verify

import (
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestRowsOfABatchHaveDistinctPositions checks the position ids of every
// set of two rows or more of the default sweep: each row's differ from
// every other row's, no position is negative or beyond the largest the
// model allows (its stored table's last row, 4095 for computed
// encodings), a whole row's never decrease along it, and a row that
// repeats positions stays at or below row 0's. The one exception is a
// single token without a past when a mask or a static cache fixes its
// position at 0. Models: the Go-built Llama with a 128-row cos/sin table
// and with computed cos/sin (no mask: repeats and shifts), rope_llama
// (an attention mask: padding and repeats), the opset-24 static-cache
// decoder (write indices: histories and repeats), and a model whose
// position ids have no batch axis, whose rows cannot differ (a note says
// so).
func TestRowsOfABatchHaveDistinctPositions(t *testing.T) {
	llama := func(form testmodels.RopeForm) *graph.Model {
		c := testmodels.DefaultLlama
		c.RoPE = form
		return testmodels.Llama(c)
	}
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	var ropeLlama *graph.Model
	for _, e := range man.Models {
		if e.Name == "rope_llama" {
			if ropeLlama, err = graph.Load(e.ModelPath()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ropeLlama == nil {
		t.Fatal("rope_llama is not in the corpus")
	}
	cases := []struct {
		name   string
		m      *graph.Model
		maxPos int
		// shifted: a set whose rows are shifted (a single token).
		shifted bool
	}{
		{"llama cos/sin table", llama(testmodels.RopeCacheTable), 127, true},
		{"llama computed", llama(testmodels.RopeComputed), DefaultFarPosition, true},
		{"rope_llama (mask)", ropeLlama, DefaultFarPosition, false},
		{"static cache (write indices)", testmodels.BuildDeploy(testmodels.FormStaticCache24, testmodels.DefaultDeploy), 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := Analyze(c.m, Hints{}, 1)
			if err != nil {
				t.Fatal(err)
			}
			if c.maxPos > 0 && a.MaxPosition != c.maxPos {
				t.Fatalf("largest position %d, want %d", a.MaxPosition, c.maxPos)
			}
			bound := a.MaxPosition
			p := &planner{a: a, opts: &Options{}}
			batched, same, shifted, repeated := 0, 0, 0, 0
			for _, s := range p.specs() {
				if s.Batch < 2 {
					continue
				}
				batched++
				set, err := a.synthesize(s, 1)
				if err != nil {
					t.Fatal(err)
				}
				pt := set.inputs["position_ids"]
				if pt == nil || len(pt.Shape) != 2 || pt.Shape[0] != s.Batch || pt.Shape[1] != s.Seq {
					t.Fatalf("%s: position_ids %v", s.Name, pt)
				}
				v := pt.Int64s()
				rows := make([][]int64, s.Batch)
				for b := range rows {
					rows[b] = v[b*s.Seq : (b+1)*s.Seq]
				}
				t.Logf("%s (%s): %v", s.Name, s.describe(), rows)
				top := int64(s.Offset + s.Past + s.Seq - 1)
				if bound > 0 {
					top = int64(bound)
				}
				for b, r := range rows {
					for j, x := range r {
						if x < 0 || x > top {
							t.Errorf("%s row %d token %d: position %d outside [0, %d]", s.Name, b, j, x, top)
						}
					}
					whole := b >= len(s.Padding) || s.Padding[b] == "none" || s.Pads == 0
					for j := 1; j < len(r) && whole; j++ {
						if r[j] < r[j-1] {
							t.Errorf("%s row %d: positions decrease at token %d: %v", s.Name, b, j, r)
						}
					}
					if _, rep := s.rowShift(b); rep > 0 {
						repeated++
						for j := range r {
							if r[j] > rows[0][j] {
								t.Errorf("%s row %d: position %d at token %d, beyond row 0's %d", s.Name, b, r[j], j, rows[0][j])
							}
						}
					}
					if off, _ := s.rowShift(b); off != 0 {
						shifted++
					}
					for o := range b {
						if slices.Equal(rows[o], r) {
							if s.Seq == 1 && s.Past == 0 && (a.hasRole(RoleAttentionMask) || a.ragged()) {
								same++
								continue
							}
							t.Errorf("%s: rows %d and %d have the same positions %v", s.Name, o, b, r)
						}
					}
				}
			}
			t.Logf("%d sets of several rows, %d rows repeating positions, %d shifted, %d pairs of single tokens at position 0", batched, repeated, shifted, same)
			if batched == 0 || repeated == 0 || (shifted > 0) != c.shifted {
				t.Errorf("%d sets of several rows, %d rows repeating positions, %d shifted rows (want some: %v)", batched, repeated, shifted, c.shifted)
			}
		})
	}

	// Position ids [seq]: the rows cannot differ; the analysis says so.
	rowsCannotDiffer(t, []graph.Dim{{Param: "batch"}, {Param: "seq"}}, []graph.Dim{{Param: "seq"}})
}

// onePastLengthModel adds rows of a learned position table (64 rows)
// gathered by position_ids [batch, seq] to the token embeddings, after
// a past [batch, past, 16] it concatenates, and adds a past-length
// scalar (one count of cached tokens for every row) to the sum, without
// an attention mask.
func onePastLengthModel(t *testing.T) *graph.Model {
	t.Helper()
	m := graph.NewModel(8, "onnxpe test", graph.Opset{Domain: "", Version: 17})
	g := m.Graph
	bs := []graph.Dim{{Param: "batch"}, {Param: "seq"}}
	ids := g.AddInput("input_ids", graph.TensorType(graph.Int64, bs))
	pos := g.AddInput("position_ids", graph.TensorType(graph.Int64, bs))
	past := g.AddInput("past", graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "past"}, {Value: 16, Known: true}}))
	n := g.AddInput("past_length", graph.TensorType(graph.Int64, []graph.Dim{}))
	weight := func(name string, rows, cols int64) *graph.Value {
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32((i*7)%19)/19 - 0.5
		}
		tt, err := graph.NewTensor(name, graph.Float, []int64{rows, cols}, v)
		if err != nil {
			t.Fatal(err)
		}
		return g.AddInitializer(tt)
	}
	x := g.Op("Add", []*graph.Value{g.Op("Gather", []*graph.Value{weight("wte", 32, 16), ids}, 1)[0], g.Op("Gather", []*graph.Value{weight("wpe", 64, 16), pos}, 1)[0]}, 1)[0]
	present := g.Op("Concat", []*graph.Value{past, x}, 1, graph.IntAttr("axis", 1))[0]
	present.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "total"}, {Value: 16, Known: true}})
	count := g.Op("Cast", []*graph.Value{n}, 1, graph.IntAttr("to", int64(graph.Float)))[0]
	y := g.Op("Add", []*graph.Value{x, count}, 1)[0]
	logits := g.Op("MatMul", []*graph.Value{y, weight("head", 16, 32)}, 1)[0]
	logits.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: 32, Known: true}})
	g.AddOutput(logits)
	g.AddOutput(present)
	return m
}

// TestRowsAfterOnePastLength checks a model fed one past-length scalar
// for every row (no mask, no static caches): after a past, rows of
// several tokens start where it says and differ by the positions they
// repeat (they were all equal before); a single token's rows cannot
// differ without contradicting it, and the analysis says so in a note.
func TestRowsAfterOnePastLength(t *testing.T) {
	a, err := Analyze(onePastLengthModel(t), Hints{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if in := a.input("past_length"); in == nil || in.Role != RolePastLength {
		t.Fatalf("past_length: %+v", in)
	}
	noted := false
	for _, n := range a.Notes {
		noted = noted || strings.Contains(n, `past-length input "past_length" is one count for every row`)
	}
	if !noted {
		t.Errorf("no note that a single token's rows cannot differ: %q", a.Notes)
	}
	p := &planner{a: a, opts: &Options{}}
	afterPast, single := 0, 0
	for _, s := range p.specs() {
		if s.Batch < 2 {
			continue
		}
		set, err := a.synthesize(s, 1)
		if err != nil {
			t.Fatal(err)
		}
		if n := set.inputs["past_length"].Int64s(); len(n) != 1 || n[0] != int64(s.Past) {
			t.Fatalf("%s: past_length %v, want %d", s.Name, n, s.Past)
		}
		v := set.inputs["position_ids"].Int64s()
		rows := make([][]int64, s.Batch)
		for b := range rows {
			rows[b] = v[b*s.Seq : (b+1)*s.Seq]
		}
		t.Logf("%s (%s): %v", s.Name, s.describe(), rows)
		for b, r := range rows {
			if r[0] != int64(s.Past) {
				t.Errorf("%s row %d starts at %d, not at the past length %d", s.Name, b, r[0], s.Past)
			}
			for j := 1; j < len(r); j++ {
				if r[j] < r[j-1] || r[j] > r[j-1]+1 {
					t.Errorf("%s row %d: positions %v do not follow one another", s.Name, b, r)
				}
			}
			for o := range b {
				equal := slices.Equal(rows[o], r)
				switch {
				case s.Seq == 1 && !equal:
					t.Errorf("%s: rows %d and %d of a single token differ: %v, %v", s.Name, o, b, rows[o], r)
				case s.Seq > 1 && equal:
					t.Errorf("%s: rows %d and %d have the same positions %v", s.Name, o, b, r)
				}
			}
		}
		if s.Past > 0 && s.Seq > 1 {
			afterPast++
		}
		if s.Seq == 1 {
			single++
		}
	}
	if afterPast == 0 || single == 0 {
		t.Errorf("%d sets of several tokens after a past, %d of a single token: want some of each", afterPast, single)
	}
}

// TestFixedBatchRowsHaveDistinctPositions checks models that declare
// their batch of a fixed size. The ONNX backend test's RotaryEmbedding
// (input [2, 3, 32], position_ids [2, 3], cos/sin caches [50, 4] fed as
// inputs) has every size fixed: its one set gets two rows at positions
// of their own (they were both 0, 1, 2, and no note said so). Position
// ids [1, 3] beside input ids [2, 3] hold no rows of the batch (one row
// broadcast over it): a note says so and no row gets positions of its
// own.
func TestFixedBatchRowsHaveDistinctPositions(t *testing.T) {
	m, err := graph.Load("../passes/testdata/realmodels/onnx_rotary_embedding_3d_input/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	a, err := Analyze(m, Hints{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range a.Notes {
		if strings.Contains(n, "no batch axis") {
			t.Errorf("note on a position input whose rows are the batch's: %s", n)
		}
	}
	p := &planner{a: a, opts: &Options{}}
	specs := p.specs()
	if len(specs) != 1 {
		t.Fatalf("%d sets, want the one of the fixed shapes", len(specs))
	}
	s := specs[0]
	set, err := a.synthesize(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	pt := set.inputs["position_ids"]
	if !slices.Equal(pt.Shape, []int{2, 3}) {
		t.Fatalf("position_ids of shape %v", pt.Shape)
	}
	v := pt.Int64s()
	r0, r1 := v[:3], v[3:]
	t.Logf("%s (%s): %v %v", s.Name, s.describe(), r0, r1)
	if slices.Equal(r0, r1) {
		t.Errorf("both rows at positions %v", r0)
	}
	for _, r := range [][]int64{r0, r1} {
		for j, x := range r {
			if x < 0 || x > 2 || (j > 0 && x < r[j-1]) {
				t.Errorf("positions %v: not non-decreasing within [0, 2]", r)
			}
		}
	}

	for _, c := range []struct {
		name     string
		ids, pos int64
	}{{"position ids [1, 3], input ids [2, 3]", 2, 1}} {
		t.Run(c.name, func(t *testing.T) {
			fixed := func(n int64) []graph.Dim { return []graph.Dim{{Value: n, Known: true}, {Value: 3, Known: true}} }
			rowsCannotDiffer(t, fixed(c.ids), fixed(c.pos))
		})
	}
}

// rowsCannotDiffer builds a model adding rows of a learned position table
// (64 rows) gathered by position_ids of dims pos to the token embeddings
// gathered by input_ids of dims ids, whose position ids cannot hold rows of
// their own: the analysis notes that position_ids has no batch axis, and
// no set gives rows positions of their own.
func rowsCannotDiffer(t *testing.T, ids, pos []graph.Dim) {
	t.Helper()
	m := graph.NewModel(8, "onnxpe test", graph.Opset{Domain: "", Version: 17})
	g := m.Graph
	idsIn := g.AddInput("input_ids", graph.TensorType(graph.Int64, ids))
	posIn := g.AddInput("position_ids", graph.TensorType(graph.Int64, pos))
	table := func(name string, rows int64) *graph.Value {
		v := make([]float32, rows*8)
		for i := range v {
			v[i] = float32(i%13) / 13
		}
		tt, err := graph.NewTensor(name, graph.Float, []int64{rows, 8}, v)
		if err != nil {
			t.Fatal(err)
		}
		return g.AddInitializer(tt)
	}
	x := g.Op("Add", []*graph.Value{g.Op("Gather", []*graph.Value{table("wte", 128), idsIn}, 1)[0], g.Op("Gather", []*graph.Value{table("wpe", 64), posIn}, 1)[0]}, 1)[0]
	g.AddOutput(x)
	a, err := Analyze(m, Hints{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if in := a.input("position_ids"); in == nil || in.Role != RolePositionIDs {
		t.Fatalf("position_ids: %+v", in)
	}
	noted := false
	for _, n := range a.Notes {
		noted = noted || strings.Contains(n, `"position_ids" has no batch axis`)
	}
	if !noted {
		t.Errorf("no note that the rows cannot differ: %q", a.Notes)
	}
	p := &planner{a: a, opts: &Options{}}
	for _, s := range p.specs() {
		if s.RowOffsets != nil || s.RowRepeats != nil {
			t.Errorf("%s: rows given positions of their own (%s) that position_ids cannot hold", s.Name, s.describe())
		}
	}
}
