package verify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/onnxpe/onnxpe/verify"
)

// TestGoBuiltLlamaVariantsAreEqual compares the Go-built Llamas, which
// share weights and differ only in how the rotation is written (computed,
// stored tables, both fused RotaryEmbedding ops, a local function): with
// the stored-table variant as A (its 128-row cache bounds the sweep's
// positions), every other variant is equal. With a computed variant as A
// the sweep feeds positions up to 4095, which the 128-row cache of B
// cannot hold: that set is an error of B and the pair is not equal.
func TestGoBuiltLlamaVariantsAreEqual(t *testing.T) {
	var a *graph.Model
	others := map[string]*graph.Model{}
	for _, s := range testmodels.Synthetics() {
		if !strings.HasPrefix(s.Name, "llama_") {
			continue
		}
		if s.Name == "llama_cache_shared" {
			a = s.Build()
		} else {
			others[s.Name] = s.Build()
		}
	}
	if a == nil || len(others) < 4 {
		t.Fatalf("variants: %d", len(others))
	}
	for name, b := range others {
		r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !r.Equal {
			t.Errorf("%s: %s", name, r.Summary)
		}
		if r.Analysis.MaxPosition != 127 || r.Analysis.MaxLength != 128 {
			t.Errorf("%s: largest position %d, longest sequence %d; the cache has 128 rows", name, r.Analysis.MaxPosition, r.Analysis.MaxLength)
		}
	}
	r, err := verify.Compare(context.Background(), others["llama_opset18"], a, verify.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	far := false
	for _, s := range r.Sets {
		if s.Name == "far" && !s.Equal && strings.Contains(s.Error, "out of range") {
			far = true
		}
	}
	if r.Equal || !far {
		t.Errorf("computed A vs 128-row cache B: %s", r.Summary)
	}
}

// TestGoBuiltSinusoidalSubgraphs verifies the sinusoidal models whose
// table comes from an If or a Loop against themselves.
func TestGoBuiltSinusoidalSubgraphs(t *testing.T) {
	for _, s := range testmodels.Synthetics() {
		if !strings.HasPrefix(s.Name, "sinusoidal_") {
			continue
		}
		r, err := verify.Compare(context.Background(), s.Build(), s.Build(), verify.Options{Seed: 1})
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if !r.Equal || len(r.Sets) < 3 {
			t.Errorf("%s: %s", s.Name, r.Summary)
		}
		t.Logf("%s: longest %d (%s)", s.Name, r.Analysis.MaxLength, r.Analysis.MaxLengthFrom)
	}
}

// TestTableInsideAnIfIsReadToItsLastRow: sinusoidal_if reads a 64-row
// table (inside an If) up to 64 tokens and computes its rows beyond. The
// sweep runs a 64-token set for the table, which is the only one to see a
// change of its last row.
func TestTableInsideAnIfIsReadToItsLastRow(t *testing.T) {
	var build func() *graph.Model
	for _, s := range testmodels.Synthetics() {
		if s.Name == "sinusoidal_if" {
			build = s.Build
		}
	}
	a, b := build(), build()
	editConst(t, b, func(n string, d []int64, _ []float32) bool { return n == "pe_table" && dimsAre(d, 64, 16) },
		func(v []float32) { alternate(v[63*16 : 64*16]) })
	r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	set, out := firstDifference(t, r)
	if set.Name != "table64" || out.Worst.Position == nil || *out.Worst.Position != 63 {
		t.Fatalf("%s", r.Summary)
	}
	for _, s := range r.Sets {
		if s.Name != "table64" && !s.Equal {
			t.Errorf("set %s differs: only 64 tokens read the table's last row", s.Name)
		}
	}
}

// TestOutputsMatchedByPositionWhenNamesDiffer renames B's output: the
// outputs are compared by position, with a warning, and the report names
// both.
func TestOutputsMatchedByPositionWhenNamesDiffer(t *testing.T) {
	e := entry(t, "rope_kvcache")
	a := loadModel(t, e.ModelPath())
	b := loadModel(t, e.ModelPath())
	for i, v := range b.Graph.Outputs {
		v.Name = fmt.Sprintf("out%d", i)
	}
	data, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if b, err = graph.Decode(data, ""); err != nil {
		t.Fatal(err)
	}
	r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal || len(r.Warnings) == 0 || !strings.Contains(r.Warnings[0], "compared by position") {
		t.Fatalf("%s; warnings %q", r.Summary, r.Warnings)
	}
	o := r.Sets[0].Outputs
	if len(o) != 5 || o[0].Name != "logits" || o[0].NameB != "out0" || o[4].NameB != "out4" {
		t.Fatalf("outputs %+v", o)
	}
}

// TestDeployFormsAgainstThemselves verifies each deployment-form model
// (testmodels.BuildDeploy: GenAI's GroupQueryAttention, RotaryEmbedding +
// MultiHeadAttention with a key padding mask, EmbedLayerNormalization +
// Attention, the opset-24 static cache through TensorScatter) against a
// second copy: the sweep's inputs must be ones the model accepts (the
// analysis reads the masks, caches and write indices these ops take by
// their contracts), so none is skipped.
func TestDeployFormsAgainstThemselves(t *testing.T) {
	skipped := 0
	for _, f := range testmodels.DeployForms {
		a, b := testmodels.BuildDeploy(f, testmodels.DefaultDeploy), testmodels.BuildDeploy(f, testmodels.DefaultDeploy)
		r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1})
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if !r.Equal {
			t.Errorf("%s: %s", f, r.Summary)
		}
		for _, s := range r.Skipped {
			skipped++
			t.Errorf("%s: skipped %s: %s", f, s.Name, s.Reason)
		}
		// GroupQueryAttention runs several tokens after a cache for one
		// sequence only (as ONNX Runtime does): the chunk is one row.
		if f == testmodels.FormGenAIGQA {
			chunk := false
			for _, s := range r.Sets {
				chunk = chunk || s.Name == "chunk" && s.Spec != nil && s.Spec.Batch == 1 && s.Spec.Seq == 4 && s.Spec.Past == 5
			}
			if !chunk || r.Analysis.OneRowChunks == "" {
				t.Errorf("%s: no chunk of 4 tokens after 5 for one sequence (%q)", f, r.Analysis.OneRowChunks)
			}
		}
	}
	t.Logf("%d deployment forms, %d sets skipped", len(testmodels.DeployForms), skipped)
}

// TestHalfGenAIAgainstItself verifies GenAI's fp16 and bf16 builds
// (GroupQueryAttention with do_rotary on half q/k/v, past caches and
// cos/sin caches) against a second copy: every set runs (the executor
// widens the half inputs of GroupQueryAttention to float32 and rounds its
// outputs back), none is skipped, and a copy whose cos cache is off by one
// position in one row differs.
func TestHalfGenAIAgainstItself(t *testing.T) {
	for _, dt := range []graph.DataType{graph.Float16, graph.BFloat16} {
		cfg := testmodels.DefaultDeploy
		cfg.DType = dt
		a, b := testmodels.BuildDeploy(testmodels.FormGenAIGQA, cfg), testmodels.BuildDeploy(testmodels.FormGenAIGQA, cfg)
		r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1})
		if err != nil {
			t.Errorf("%v: %v", dt, err)
			continue
		}
		if !r.Equal {
			t.Errorf("%v: %s", dt, r.Summary)
		}
		for _, s := range r.Skipped {
			t.Errorf("%v: skipped %s: %s", dt, s.Name, s.Reason)
		}
		if len(r.Sets) == 0 {
			t.Errorf("%v: no sets ran", dt)
		}
		// The sets must see the caches: shift row 1 of the cos cache.
		c := testmodels.BuildDeploy(testmodels.FormGenAIGQA, cfg)
		cos := c.Graph.Lookup("cos_cache")
		v, err := cos.Const.Float64s()
		if err != nil {
			t.Fatal(err)
		}
		half := len(v) / cfg.MaxPositions
		copy(v[half:2*half], v[2*half:3*half])
		shifted, err := graph.TensorFromFloat64("cos_cache", dt, cos.Const.Dims(), v)
		if err != nil {
			t.Fatal(err)
		}
		cos.Const = shifted
		r, err = verify.Compare(context.Background(), a, c, verify.Options{Seed: 1})
		if err != nil {
			t.Errorf("%v shifted: %v", dt, err)
		} else if r.Equal {
			t.Errorf("%v: a cos cache off by a position in row 1 verifies equal: %s", dt, r.Summary)
		}
	}
}

// TestMultimodalPositionsExerciseTheStreams verifies rope_mrope against a
// copy that reads its first position stream for all three (what a
// RotaryEmbedding fed one stream computes): the sweep's position ids put
// an image on a grid in every other row, so the copy must differ — and
// equal the original on text alone, where every stream is the diagonal.
func TestMultimodalPositionsExerciseTheStreams(t *testing.T) {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	var path string
	for _, e := range man.Models {
		if e.Name == "rope_mrope" {
			path = e.ModelPath()
		}
	}
	if path == "" {
		t.Fatal("rope_mrope is not in the corpus")
	}
	load := func() *graph.Model {
		m, err := graph.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b := load(), load()
	// b: position_ids[0:1] expanded back to [3, batch, seq].
	g := b.Graph
	pos := g.Lookup("position_ids")
	if pos == nil || !pos.IsGraphInput() {
		t.Fatal("no position_ids input")
	}
	i64 := func(name string, vals ...int64) *graph.Value {
		tt, err := graph.NewTensor(name, graph.Int64, []int64{int64(len(vals))}, vals)
		if err != nil {
			t.Fatal(err)
		}
		return g.AddInitializer(tt)
	}
	uses := pos.Uses()
	first := g.NewNode("Slice", "", []*graph.Value{pos, i64("s0", 0), i64("s1", 1), i64("s2", 0)}, 1)
	shape := g.NewNode("Shape", "", []*graph.Value{pos}, 1)
	expand := g.NewNode("Expand", "", []*graph.Value{first.Output(0), shape.Output(0)}, 1)
	g.InsertBefore(g.Nodes()[0], expand)
	g.InsertBefore(expand, shape)
	g.InsertBefore(shape, first)
	for _, u := range uses {
		u.Node.SetInput(u.Index, expand.Output(0))
	}
	r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Equal {
		t.Fatalf("a model reading one position stream is equal to M-RoPE: %s", r.Summary)
	}
	for _, s := range r.Sets {
		switch {
		case s.Spec == nil:
		case s.Spec.Seq < 6 && !s.Equal:
			// Too short for an image: every stream is the diagonal.
			t.Errorf("set %s (%d tokens, text only) differs", s.Name, s.Spec.Seq)
		case s.Spec.Seq >= 6 && s.Equal:
			t.Errorf("set %s (%d tokens, an image in every other row) is equal", s.Name, s.Spec.Seq)
		}
	}
	t.Log(r.Summary)
}

// TestImagesCutIntoPatches verifies a patch embedding of images of any
// size (Conv of stride 4 over [batch, 3, height, width]) against itself:
// every set's image cuts into whole patches on a grid with more columns
// than rows, as many patches as about the set's tokens.
func TestImagesCutIntoPatches(t *testing.T) {
	m := graph.NewModel(8, "onnxpe test", graph.Opset{Domain: "", Version: 17})
	g := m.Graph
	px := g.AddInput("pixel_values", graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Value: 3, Known: true}, {Param: "height"}, {Param: "width"}}))
	w := make([]float32, 8*3*4*4)
	for i := range w {
		w[i] = float32(i%7) / 7
	}
	wt, err := graph.NewTensor("patch_w", graph.Float, []int64{8, 3, 4, 4}, w)
	if err != nil {
		t.Fatal(err)
	}
	conv := g.NewNode("Conv", "", []*graph.Value{px, g.AddInitializer(wt)}, 1,
		graph.IntsAttr("kernel_shape", 4, 4), graph.IntsAttr("strides", 4, 4))
	g.Append(conv)
	g.AddOutput(conv.Output(0))
	r, err := verify.Compare(context.Background(), m, m, verify.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal {
		t.Fatalf("the model differs from itself: %s", r.Summary)
	}
	if len(r.Sets) < 2 {
		t.Fatalf("%d sets: %s", len(r.Sets), r.Summary)
	}
	for _, s := range r.Sets {
		sh := s.Inputs[0].Shape
		t.Logf("%s: %v", s.Name, sh)
		if len(sh) != 4 || sh[2]%4 != 0 || sh[3]%4 != 0 || sh[2] == 0 || sh[3] <= sh[2] {
			t.Errorf("set %s: image %v does not cut into a grid of 4x4 patches with more columns than rows", s.Name, sh)
		}
	}
	if in := r.Analysis.Inputs[0]; in.Dims[2].Kind != verify.DimImageRows || in.Dims[3].Kind != verify.DimImageCols || in.Dims[2].Size != 4 {
		t.Errorf("dims %+v", in.Dims)
	}
}

// TestImageGridsExerciseBothAxes verifies a ViT with axial 2-D RoPE over
// images of open size (rope-vit's grid: col = t % cols, row = t / cols)
// against a copy whose row index is always 0 (a model that turns no pair
// with the row): the sweep's images have grids of one row, which cannot
// tell them apart, and of several rows, which must; the model is equal to
// itself on all of them.
func TestImageGridsExerciseBothAxes(t *testing.T) {
	cfg := testmodels.DefaultAxial
	cfg.ImageH, cfg.ImageW = 0, 0
	a, b := testmodels.AxialViT(cfg), testmodels.AxialViT(cfg)
	var row *graph.Node
	for _, n := range b.Graph.Nodes() {
		if p := n.Input(0).Producer(); n.OpType == "Div" && p != nil && p.OpType == "Range" {
			row = n
		}
	}
	if row == nil {
		t.Fatal("no row index t / cols in the model")
	}
	g := b.Graph
	zt, err := graph.NewTensor("zero_row", graph.Int64, nil, []int64{0})
	if err != nil {
		t.Fatal(err)
	}
	uses := row.Output(0).Uses()
	zero := g.NewNode("Mul", "", []*graph.Value{row.Output(0), g.AddInitializer(zt)}, 1)
	g.InsertAfter(row, zero)
	for _, u := range uses {
		u.Node.SetInput(u.Index, zero.Output(0))
	}
	r := equalToItselfNotTo(t, a, a, b, "a model turning no pair with the row is equal to 2-D RoPE")
	rows := map[bool]int{}
	for _, s := range r.Sets {
		sh := s.Inputs[0].Shape
		if len(sh) != 4 || sh[2]%cfg.Patch != 0 || sh[3]%cfg.Patch != 0 || sh[3] <= sh[2] {
			t.Errorf("set %s: image %v is not a grid of %d x %d patches with more columns than rows", s.Name, sh, cfg.Patch, cfg.Patch)
			continue
		}
		several := sh[2]/cfg.Patch > 1
		rows[several]++
		if several == s.Equal {
			t.Errorf("set %s (%d x %d patches): equal %v", s.Name, sh[2]/cfg.Patch, sh[3]/cfg.Patch, s.Equal)
		}
		t.Logf("%s: %v equal %v", s.Name, sh, s.Equal)
	}
	if rows[true] < 2 || rows[false] < 1 {
		t.Errorf("sets of one row: %d, of several: %d", rows[false], rows[true])
	}
}

// TestOpenImageViTsEqualThemselves verifies the Go-built ViTs with axial
// 2-D RoPE over images of open size against themselves, with the audit's
// hints as the command uses them (the audit finds their RoPE, grid null):
// equal on every set, and the sets are grids of several sizes.
func TestOpenImageViTsEqualThemselves(t *testing.T) {
	n := 0
	for _, s := range testmodels.AxialSynthetics() {
		if s.Truth.Findings[0].Params["grid"] != nil {
			continue
		}
		n++
		t.Run(s.Name, func(t *testing.T) {
			m := s.Build()
			h, err := verify.AuditHints(m)
			if err != nil {
				t.Fatal(err)
			}
			r, err := verify.Compare(context.Background(), m, s.Build(), verify.Options{Seed: 1, Hints: h})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Equal {
				t.Fatalf("the model differs from itself: %s", r.Summary)
			}
			grids := map[[2]int]bool{}
			for _, set := range r.Sets {
				if sh := set.Inputs[0].Shape; len(sh) == 4 {
					grids[[2]int{sh[2], sh[3]}] = true
				}
			}
			if len(grids) < 3 {
				t.Errorf("the sets' images are %v: want 3 grids at least", grids)
			}
		})
	}
	if n != 2 {
		t.Errorf("%d ViTs of open image size, want 2 (divmod and meshgrid)", n)
	}
}

// equalToItselfNotTo compares a with self (a model computing what a does,
// or a itself), which must be equal, and then with b, which must not be
// (else the test fails with what, and the summary); it returns the report
// of a against b.
func equalToItselfNotTo(t *testing.T, a, self, b *graph.Model, what string) *verify.Report {
	t.Helper()
	sr, err := verify.Compare(context.Background(), a, self, verify.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !sr.Equal {
		t.Fatalf("the model differs from itself: %s", sr.Summary)
	}
	r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Equal {
		t.Fatalf("%s: %s", what, r.Summary)
	}
	return r
}
