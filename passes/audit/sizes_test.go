package audit_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
	"github.com/onnxpe/onnxpe/testmodels"
)

// alibiWithCache is a BLOOM-style decoder layer with a KV cache: the ALiBi
// bias comes from the CumSum of a mask over past and new tokens (its own
// size symbol), plus a causal mask built from Range(0, past+seq) and
// Range(past, past+seq). sameMask declares the mask as long as the new
// tokens (one symbol), as the Phi-3.5 export does.
func alibiWithCache(sameMask bool) (*graph.Model, []float32) {
	b := schemetest.NewNet(schemetest.ONNX(18))
	ids := b.IDs()
	total := graph.Dim{Param: "total"}
	if sameMask {
		total = graph.Dim{Param: "seq"}
	}
	mask := b.IntInput("attention_mask", graph.Dim{Param: "batch"}, total)
	kvDims := []graph.Dim{{Param: "batch"}, {Value: schemetest.Heads, Known: true}, {Param: "past"}, {Value: schemetest.HeadDim, Known: true}}
	pastK := b.G.AddInput("past_key", graph.TensorType(graph.Float, kvDims))
	pastV := b.G.AddInput("past_value", graph.TensorType(graph.Float, kvDims))
	plen := b.Op("Gather", []*graph.Value{b.Op("Shape", []*graph.Value{pastK}), b.I64s(2)}, graph.IntAttr("axis", 0))
	tot := b.Op("Add", []*graph.Value{plen, b.SeqLen(ids)})
	kr := b.Op("Range", []*graph.Value{b.I64s(0), tot, b.I64s(1)})
	qr := b.Op("Range", []*graph.Value{plen, tot, b.I64s(1)})
	causal := b.Op("LessOrEqual", []*graph.Value{b.Op("Unsqueeze", []*graph.Value{kr, b.I64(0)}), b.Op("Unsqueeze", []*graph.Value{qr, b.I64(1)})})
	cbias := b.Op("Where", []*graph.Value{causal, b.Scalar(0), b.Scalar(-1e9)})
	kp := b.Op("Mul", []*graph.Value{b.Op("Sub", []*graph.Value{b.Op("CumSum", []*graph.Value{mask, b.I64s(1)}), b.I64s(1)}), mask})
	kpf := b.Op("Unsqueeze", []*graph.Value{b.Op("Cast", []*graph.Value{kp}, graph.IntAttr("to", int64(graph.Float))), b.I64(1, 2)})
	slopes := []float32{0.5, 0.25, 0.125, 0.0625}
	ab := b.Op("Mul", []*graph.Value{kpf, b.F32([]int64{1, schemetest.Heads, 1, 1}, slopes)})
	bias := b.Op("Add", []*graph.Value{ab, cbias})

	x := b.Embed(ids)
	q := b.Heads4(b.Proj(x, schemetest.Heads*schemetest.HeadDim), schemetest.Heads)
	k := b.Op("Concat", []*graph.Value{pastK, b.Heads4(b.Proj(x, schemetest.Heads*schemetest.HeadDim), schemetest.Heads)}, graph.IntAttr("axis", 2))
	v := b.Op("Concat", []*graph.Value{pastV, b.Heads4(b.Proj(x, schemetest.Heads*schemetest.HeadDim), schemetest.Heads)}, graph.IntAttr("axis", 2))
	kt := b.Op("Transpose", []*graph.Value{k}, graph.IntsAttr("perm", 0, 1, 3, 2))
	s := b.Op("Add", []*graph.Value{b.Op("Div", []*graph.Value{b.Op("MatMul", []*graph.Value{q, kt}), b.Scalar(4)}), bias})
	a := b.Op("MatMul", []*graph.Value{b.Op("Softmax", []*graph.Value{s}, graph.IntAttr("axis", -1)), v})
	b.Output(b.Op("Add", []*graph.Value{x, b.Proj(b.Merge3(a), schemetest.Hidden)}))
	return b.M, slopes
}

// TestProbeBindsPastApartFromSeq: a probe of a model with a KV cache binds
// the cache's size to a length other than the new tokens', and a mask over
// both to their sum; a model whose mask is declared as long as the new
// tokens is probed with an empty cache (the only one its shapes allow).
func TestProbeBindsPastApartFromSeq(t *testing.T) {
	for _, same := range []bool{false, true} {
		m, _ := alibiWithCache(same)
		w, err := work.NewWork(m)
		if err != nil {
			t.Fatal(err)
		}
		shapes := map[string][]int{}
		p := probe.NewProbe(w, 1, 8, 0)
		for _, v := range w.Inputs() {
			s, ok := p.BindShape(w.Shape(v))
			if !ok {
				t.Fatalf("%s: shape not bound", v.Name)
			}
			shapes[v.Name] = s
		}
		switch {
		case !same && (p.Past == 0 || p.Past == p.Seq):
			t.Errorf("past %d for %d new tokens: want another, non-zero length", p.Past, p.Seq)
		case same && p.Past != 0:
			t.Errorf("mask declared as long as the new tokens: past %d, want 0", p.Past)
		}
		if want := []int{1, schemetest.Heads, p.Past, schemetest.HeadDim}; !slices.Equal(shapes["past_key"], want) {
			t.Errorf("past_key %v, want %v", shapes["past_key"], want)
		}
		if want := []int{1, p.Past + p.Seq}; !slices.Equal(shapes["attention_mask"], want) {
			t.Errorf("attention_mask %v, want %v", shapes["attention_mask"], want)
		}
		if want := []int{1, p.Seq}; !slices.Equal(shapes["input_ids"], want) {
			t.Errorf("input_ids %v, want %v", shapes["input_ids"], want)
		}
	}
}

// TestScoreBiasWithCache: ALiBi added to a causal mask over the cache and
// the new tokens evaluates (the mask and the Range over past+seq agree)
// and is read exactly, in both declarations of the mask.
func TestScoreBiasWithCache(t *testing.T) {
	for _, same := range []bool{false, true} {
		m, slopes := alibiWithCache(same)
		r, _, err := audit.AuditModel(m, "alibi_cache", passes.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, len(slopes))
		for i, s := range slopes {
			want[i] = float64(s)
		}
		checkReport(t, r, []string{"alibi"}, []wantFinding{{scheme: "alibi", layers: []int{0},
			params: map[string]any{"num_heads": schemetest.Heads, "slopes": want, "symmetric": false}}})
	}
}

// TestPhi35MasksEvaluate: the Phi-3.5 export declares its mask with the
// token ids' size and takes a KV cache; its score masks evaluate (with the
// empty cache its shapes allow) and are read as masks, not left as biases
// that could not be evaluated.
func TestPhi35MasksEvaluate(t *testing.T) {
	m, err := graph.LoadWith(filepath.Join(testmodels.RealModelsDir(), "ee_phi35_mini_longrope_noweights", "model.onnx"), graph.LoadOptions{AllowMissingExternal: true})
	if err != nil {
		t.Fatal(err)
	}
	_, c, err := audit.AuditModel(m, "phi35", passes.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	masks := 0
	for _, miss := range c.Trace() {
		if miss.Rule != "score_bias" {
			continue
		}
		if !strings.Contains(miss.Reason, "only masks") {
			t.Errorf("score bias at %s: %s", miss.At, miss.Reason)
		}
		masks++
	}
	if masks != 2 {
		t.Errorf("%d masks read, want one per layer (2)", masks)
	}
}
