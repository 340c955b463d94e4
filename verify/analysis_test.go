package verify_test

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/onnxpe/onnxpe/verify"
)

// twoTables builds a model whose inputs x0 and x1 ([batch, seq] int64)
// index two tables of 32 rows whose rows are added: nothing in the graph
// says which holds positions (x0 does).
func twoTables() *graph.Model {
	m := graph.NewModel(8, "t", graph.Opset{Version: 17})
	g := m.Graph
	dims := []graph.Dim{{Param: "batch"}, {Param: "seq"}}
	x0 := g.AddInput("x0", graph.TensorType(graph.Int64, dims))
	x1 := g.AddInput("x1", graph.TensorType(graph.Int64, dims))
	rng := rand.New(rand.NewPCG(1, 2))
	table := func(name string) *graph.Value {
		v := make([]float32, 32*8)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		t, _ := graph.NewTensor(name, graph.Float, []int64{32, 8}, v)
		return g.AddInitializer(t)
	}
	p := g.Op("Gather", []*graph.Value{table("t0"), x0}, 1)[0]
	e := g.Op("Gather", []*graph.Value{table("t1"), x1}, 1)[0]
	y := g.Op("Add", []*graph.Value{p, e}, 1)[0]
	y.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: 8, Known: true}})
	g.AddOutput(y)
	return m
}

func roles(a *verify.Analysis) map[string]verify.Role {
	out := map[string]verify.Role{}
	for _, in := range a.Inputs {
		out[in.Name] = in.Role
	}
	return out
}

func TestSuggestedRolesSettleWhatTheGraphDoesNot(t *testing.T) {
	m := twoTables()
	a, err := verify.Analyze(m, verify.Hints{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Equal tables: the first input is taken for token ids.
	if r := roles(a); r["x0"] != verify.RoleTokenIDs || r["x1"] != verify.RolePositionIDs {
		t.Fatalf("without hints: %v", r)
	}
	h := verify.Hints{Suggested: map[string]verify.Role{"x0": verify.RolePositionIDs, "x1": verify.RoleTokenIDs}, From: "the audit"}
	a, err = verify.Analyze(m, h, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := roles(a); r["x0"] != verify.RolePositionIDs || r["x1"] != verify.RoleTokenIDs {
		t.Fatalf("with suggestions: %v", r)
	}
	for _, in := range a.Inputs {
		if in.Name == "x1" && (in.Rows != 32 || !strings.Contains(in.Evidence, "the audit")) {
			t.Errorf("x1: %+v", in)
		}
		if in.Name == "x0" && in.MaxPosition != 31 {
			t.Errorf("x0 indexes a 32-row table: max position %d", in.MaxPosition)
		}
	}
}

// TestSuggestionsDoNotOverrideFirmRoles: a position input read by
// RotaryEmbedding stays position ids whatever another analysis suggests,
// and the report notes the disagreement; a role given in Roles wins.
func TestSuggestionsDoNotOverrideFirmRoles(t *testing.T) {
	cfg := testmodels.DefaultLlama
	cfg.RoPE = testmodels.RopeFusedMS
	m := testmodels.Llama(cfg)
	a, err := verify.Analyze(m, verify.Hints{Suggested: map[string]verify.Role{"position_ids": verify.RoleAttentionMask}, From: "the audit"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := roles(a); r["position_ids"] != verify.RolePositionIDs || r["input_ids"] != verify.RoleTokenIDs {
		t.Fatalf("roles %v", r)
	}
	if len(a.Notes) != 1 || !strings.Contains(a.Notes[0], "the audit suggests position_ids is attention_mask") {
		t.Errorf("notes %q", a.Notes)
	}
	if a.MaxPosition != cfg.MaxPositions-1 && a.MaxPosition != 127 {
		t.Errorf("max position %d: the fused node's cache has 128 rows", a.MaxPosition)
	}
	a, err = verify.Analyze(m, verify.Hints{Roles: map[string]verify.Role{"position_ids": verify.RoleTableIndex}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := roles(a); r["position_ids"] != verify.RoleTableIndex {
		t.Errorf("a given role is not applied: %v", r)
	}
}

func TestMaxPositionsHintSetsTheLongSequence(t *testing.T) {
	e := entry(t, "sinusoidal_interleaved")
	m := loadModel(t, e.ModelPath())
	a, err := verify.Analyze(m, verify.Hints{MaxPositions: 100, From: "a test"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.MaxLength != 100 || a.MaxLengthFrom != "a test" {
		t.Fatalf("longest %d from %q", a.MaxLength, a.MaxLengthFrom)
	}
	a, err = verify.Analyze(m, verify.Hints{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.MaxLength != 256 || len(a.Tables) == 0 || a.Tables[0].Rows != 256 {
		t.Fatalf("longest %d, tables %+v", a.MaxLength, a.Tables)
	}
}

// TestPrecisionFrequencies checks the frequencies the precision audit
// fits against the models' own formulas, computed and stored.
func TestPrecisionFrequencies(t *testing.T) {
	for _, c := range []struct {
		model string
		n     int
		freq  func(i int) float64
		rel   float64
	}{
		// rope_llama_fp16 keeps inv_freq at float16 precision.
		{"rope_llama_fp16", 8, func(i int) float64 { return float64(f16(math.Pow(10000, -2*float64(i)/16))) }, 1e-6},
		{"rope_neox", 4, func(i int) float64 { return math.Pow(10000, -2*float64(i)/8) }, 1e-5},
		{"sinusoidal_interleaved", 16, func(i int) float64 { return math.Pow(10000, -2*float64(i)/32) }, 1e-5},
		// GPT-J's [sin|cos] table, tiled before GatherElements reads it.
		{"rope_gptj", 4, func(i int) float64 { return math.Pow(10000, -2*float64(i)/8) }, 1e-5},
		// fairseq: log_timescale_increment ln(1e4)/(d/2-1); the zero
		// padding_idx row is skipped.
		{"sinusoidal_fairseq", 16, func(i int) float64 { return math.Pow(10000, -float64(i)/15) }, 1e-5},
	} {
		e := entry(t, c.model)
		r, err := verify.Precision(context.Background(), loadModel(t, e.ModelPath()), verify.PrecisionOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.model, err)
		}
		fs := r.Encodings[0].Frequencies
		if len(fs) != c.n {
			t.Fatalf("%s: %d frequencies, want %d", c.model, len(fs), c.n)
		}
		for i, f := range fs {
			if want := c.freq(i); math.Abs(f.Frequency-want) > c.rel*want {
				t.Errorf("%s: frequency %d is %.9g, want %.9g", c.model, i, f.Frequency, want)
			}
		}
	}
}

func f16(x float64) float32 {
	// float16 rounding through the bit pattern of float32 (ties to even).
	b := math.Float32bits(float32(x))
	exp := int(b>>23&0xff) - 127
	shift := uint(13)
	if exp < -14 {
		shift += uint(-14 - exp)
	}
	half := uint32(1) << (shift - 1)
	r := b & (1<<shift - 1)
	b &^= 1<<shift - 1
	if r > half || (r == half && b&(1<<shift) != 0) {
		b += 1 << shift
	}
	return math.Float32frombits(b)
}

// TestPrecisionAsBFloat16 audits rope_llama's float32 cos/sin as
// bfloat16 and checks the first indistinct and the first out-of-bound
// positions of every frequency against a direct computation: angles
// p*inv_freq in float32 (as the model's MatMul computes them), cos/sin
// rounded to bfloat16, compared with float64.
func TestPrecisionAsBFloat16(t *testing.T) {
	e := entry(t, "rope_llama")
	m := loadModel(t, e.ModelPath())
	const n, bound = 2048, 1e-2
	r, err := verify.Precision(context.Background(), m, verify.PrecisionOptions{As: graph.BFloat16, Positions: n, Bound: bound})
	if err != nil {
		t.Fatal(err)
	}
	fs := r.Encodings[0].Frequencies
	if r.DType != "bfloat16" || len(fs) != 8 || r.Positions != n {
		t.Fatalf("report %+v", r)
	}
	bf := func(x float64) float64 { return float64(graph.BF16FromFloat32(float32(x)).Float32()) }
	someIndistinct := false
	for i, f := range fs {
		inv := float32(1 / math.Pow(10000, 2*float64(i)/16))
		ind, over := -1, -1
		var pc, ps float64
		for p := 0; p < n; p++ {
			ang := float32(p) * inv
			c, s := bf(float64(float32(math.Cos(float64(ang))))), bf(float64(float32(math.Sin(float64(ang)))))
			ref := float64(p) * float64(inv)
			if over < 0 && math.Max(math.Abs(c-math.Cos(ref)), math.Abs(s-math.Sin(ref))) > bound {
				over = p
			}
			if p > 0 && ind < 0 && c == pc && s == ps {
				ind = p
			}
			pc, ps = c, s
		}
		if f.FirstIndistinct != ind || f.FirstOverBound != over {
			t.Errorf("frequency %d (%g): indistinct from %d, over bound from %d; want %d, %d", i, inv, f.FirstIndistinct, f.FirstOverBound, ind, over)
		}
		someIndistinct = someIndistinct || ind > 0
	}
	if !someIndistinct {
		t.Error("bfloat16 keeps every position distinct at every frequency up to 2048: the check checks nothing")
	}
}

// TestMaskAddedToCausalIsAMask: Hugging Face's Llama (transformers 4.47)
// adds its attention_mask, as floats, to the causal mask and compares the
// sum with 0 (padding_mask = causal_mask + attention_mask; == 0): an
// attention mask, not positions used as numbers (the sweep fed it
// positions, and a fused rewrite was found unequal on masks of 2 and 3).
func TestMaskAddedToCausalIsAMask(t *testing.T) {
	for _, name := range []string{"hf-llama-rope-linear", "hf-falcon-rope-mqa", "hf-gemma-rope-mqa-headdim24"} {
		m, err := graph.Load(filepath.Join(testmodels.HFModelsDir(), name, "model.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		a, err := verify.Analyze(m, verify.Hints{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if r := roles(a)["attention_mask"]; r != verify.RoleAttentionMask {
			t.Errorf("%s: attention_mask is %s", name, r)
		}
	}
}
