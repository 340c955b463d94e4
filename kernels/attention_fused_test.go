package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// attnCase is a model and how to make its inputs at a batch size and a
// sequence length.
type attnCase struct {
	name   string
	m      *graph.Model
	inputs func(rng *rand.Rand, batch, seq int) (map[string]*kernels.Tensor, error)
}

// goBuiltInputs feeds a Go-built model: token ids below 16, positions
// 0..seq-1 (each row after the first shifted by one more), images of
// their declared size (an open one of about seq patches of 4 pixels),
// normal floats.
func goBuiltInputs(m *graph.Model) func(*rand.Rand, int, int) (map[string]*kernels.Tensor, error) {
	return func(rng *rand.Rand, batch, seq int) (map[string]*kernels.Tensor, error) {
		out := map[string]*kernels.Tensor{}
		for _, v := range kernels.FeedInputs(m) {
			dims, _ := v.Type.Shape()
			shape := make([]int, len(dims))
			rows := 1
			for (rows+1)*(rows+2) <= seq {
				rows++
			}
			for i, d := range dims {
				switch {
				case d.Known:
					shape[i] = int(d.Value)
				case d.Param == "batch":
					shape[i] = batch
				case d.Param == "seq":
					shape[i] = seq
				case d.Param == "height":
					shape[i] = 4 * rows
				case d.Param == "width":
					shape[i] = 4 * (rows + 1)
				default:
					return nil, fmt.Errorf("input %s: dimension %q", v.Name, d.Param)
				}
			}
			n := 1
			for _, d := range shape {
				n *= d
			}
			switch v.Type.ElemType() {
			case graph.Int64:
				x := make([]int64, n)
				for i := range x {
					if v.Name == "position_ids" {
						b, j := i/shape[len(shape)-1], i%shape[len(shape)-1]
						x[i] = int64(j + b)
					} else {
						x[i] = int64(rng.IntN(16))
					}
				}
				out[v.Name] = kernels.FromSlice(shape, x)
			case graph.Float:
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				out[v.Name] = kernels.FromSlice(shape, x)
			default:
				return nil, fmt.Errorf("input %s: %v", v.Name, v.Type)
			}
		}
		return out, nil
	}
}

// attnCases are every corpus model (the exports and ONNX Runtime's saves
// of them), the Go-built synthetic models and the Llama builder in its
// four RoPE forms and three element types (tables of 1024 positions).
func attnCases(t *testing.T) []attnCase {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	var cases []attnCase
	for _, e := range man.Models {
		files, _ := filepath.Glob(filepath.Join(filepath.Dir(e.ModelPath()), "*.onnx"))
		for _, f := range files {
			m, err := graph.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			e := e
			cases = append(cases, attnCase{e.Name + "/" + filepath.Base(f), m, func(rng *rand.Rand, batch, seq int) (map[string]*kernels.Tensor, error) {
				return e.RandomInputs(rng, testmodels.Sizes{Batch: batch, Seq: seq, Past: 3})
			}})
		}
	}
	for _, s := range append(testmodels.Synthetics(), testmodels.AxialSynthetics()...) {
		m := s.Build()
		cases = append(cases, attnCase{s.Name, m, goBuiltInputs(m)})
	}
	for _, f := range testmodels.LlamaRoPEForms {
		for _, dt := range []graph.DataType{graph.Float, graph.Float16, graph.BFloat16} {
			cfg := testmodels.DefaultLlama
			cfg.MaxPositions = 1024
			cfg.DType = dt
			f.Edit(&cfg)
			m := testmodels.Llama(cfg)
			cases = append(cases, attnCase{fmt.Sprintf("llama_%s_%v", f.Name, dt), m, goBuiltInputs(m)})
		}
	}
	gpt2 := testmodels.GPT2Block(testmodels.GPT2BlockConfig{Hidden: 64, Heads: 4, Layers: 2, Seed: 1})
	cases = append(cases, attnCase{"gpt2_blocks", gpt2, goBuiltInputs(gpt2)})
	return cases
}

// unfusedModels are the models whose attention the session runs as
// written, and why: the probabilities or the scores have other readers
// (Shaw's relative values, DeBERTa's XSoftmax), the scores are no
// MatMul (Einsum in Transformer-XL and XLNet, complex-order's complex
// product), ONNX Runtime's float16 saves write the softmax out
// (Exp/ReduceMax/ReduceSum), and its saves of fairseq-style [S, B*H, d]
// products fold the transposes into FusedMatMul's transBatchA/B.
var unfusedModels = []string{
	"complex_order/model.onnx", "complex_order/ort_basic.onnx", "complex_order/ort_extended.onnx",
	"disentangled_deberta/model.onnx", "disentangled_deberta/ort_basic.onnx", "disentangled_deberta/ort_extended.onnx",
	"disentangled_deberta_unshared/model.onnx", "disentangled_deberta_unshared/ort_basic.onnx", "disentangled_deberta_unshared/ort_extended.onnx",
	"floater_loop/ort_extended.onnx", "floater_unrolled/ort_extended.onnx",
	"relative_shaw/model.onnx", "relative_shaw/ort_basic.onnx", "relative_shaw/ort_extended.onnx",
	"relative_transfo_xl/model.onnx", "relative_transfo_xl/ort_basic.onnx", "relative_transfo_xl/ort_extended.onnx",
	"relative_xlnet/model.onnx", "relative_xlnet/ort_basic.onnx", "relative_xlnet/ort_extended.onnx",
	"rope_llama_fp16/ort_basic.onnx", "rope_llama_fp16/ort_extended.onnx",
	"sinusoidal_fairseq/ort_extended.onnx",
}

// closeTo is the executor's tolerance between two computations of one
// model (verify's defaults): float32 rtol 1e-5 atol 2e-6, float16 4e-3,
// bfloat16 3e-2; integers and bools equal.
func closeTo(dt graph.DataType, a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return a == b
	}
	rtol, atol := 1e-5, 2e-6
	switch dt {
	case graph.Float16:
		rtol, atol = 4e-3, 4e-3
	case graph.BFloat16:
		rtol, atol = 3e-2, 3e-2
	case graph.Float, graph.Double:
	default:
		rtol, atol = 0, 0
	}
	return math.Abs(a-b) <= atol+rtol*math.Abs(a)
}

// TestBlockwiseAttentionMatchesUnfused runs every model with its
// decomposed attention blockwise and as written, at 1, 7, 128 and 1000
// tokens (batch 2, or 1 at 1000), and compares every output within the
// executor's tolerance. Every chain a session fused must run blockwise;
// a model whose inputs at a length both sessions refuse (a table or mask
// shorter than the length) is counted and printed. At 1000 tokens the
// blockwise run holds less than the unfused one by at least one [heads,
// N, N] score tensor.
func TestBlockwiseAttentionMatchesUnfused(t *testing.T) {
	lengths := []int{1, 7, 128, 1000}
	if testing.Short() {
		lengths = []int{1, 7, 128}
	}
	var refused, shorter []string
	fusedModels, total := 0, 0
	var noChain []string
	for _, c := range attnCases(t) {
		t.Run(c.name, func(t *testing.T) {
			total++
			plain, err := kernels.NewSession(c.m, kernels.Unfused(kernels.Options{}))
			if err != nil {
				t.Fatal(err)
			}
			fused, err := kernels.NewSession(c.m, kernels.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if plain.FusedAttention() != 0 {
				t.Fatalf("the unfused session fused %d chains", plain.FusedAttention())
			}
			if fused.FusedAttention() == 0 {
				// Both sessions run the model as written.
				noChain = append(noChain, c.name)
				return
			}
			fusedModels++
			prev := 0
			for _, n := range lengths {
				batch := 2
				if n >= 1000 {
					batch = 1
				}
				// A model that takes fewer positions (a table, a mask of
				// fixed length) runs at the longest of n/2, n/4, ...
				// above the previous length that both runs take.
				var want, got map[string]*kernels.Tensor
				var in map[string]*kernels.Tensor
				asked := n
				for ; n > prev; n /= 2 {
					var err error
					in, err = c.inputs(rand.New(rand.NewPCG(uint64(n), 3)), batch, n)
					if err != nil {
						t.Fatal(err)
					}
					var errPlain, errFused error
					want, errPlain = plain.Run(in)
					got, errFused = fused.Run(in)
					if errPlain == nil && errFused == nil {
						break
					}
					if errPlain == nil || errFused == nil || errPlain.Error() != errFused.Error() {
						t.Fatalf("length %d: unfused error %v, blockwise error %v", n, errPlain, errFused)
					}
				}
				if n <= prev {
					refused = append(refused, fmt.Sprintf("%s at %d", c.name, asked))
					continue
				}
				if n != asked {
					shorter = append(shorter, fmt.Sprintf("%s at %d for %d", c.name, n, asked))
				}
				prev = n
				ps, fs := plain.LastRunStats(), fused.LastRunStats()
				if fs.BlockwiseAttention != fused.FusedAttention() {
					t.Errorf("length %d: %d of %d fused chains ran blockwise", n, fs.BlockwiseAttention, fused.FusedAttention())
				}
				for name, w := range want {
					g := got[name]
					if g == nil || !slices.Equal(g.Shape, w.Shape) || g.DType != w.DType {
						t.Fatalf("length %d: output %s: got %v, want %v", n, name, g, w)
					}
					if w.DType == graph.String {
						continue
					}
					wv, gv := w.Float64s(), g.Float64s()
					worst, at := 0.0, -1
					for i := range wv {
						if !closeTo(w.DType, wv[i], gv[i]) {
							t.Fatalf("length %d: output %s[%d]: blockwise %g, unfused %g", n, name, i, gv[i], wv[i])
						}
						if d := math.Abs(wv[i] - gv[i]); d > worst {
							worst, at = d, i
						}
					}
					if asked == lengths[len(lengths)-1] && at >= 0 {
						t.Logf("length %d: output %s: largest difference %.3g at %d (of %.3g)", n, name, worst, at, wv[at])
					}
				}
				// Where the sequence is an axis of the inputs, the
				// blockwise run at 1000 tokens holds at least one [N, N]
				// float32 score tensor less.
				seqAxis := false
				for _, x := range in {
					seqAxis = seqAxis || slices.Contains(x.Shape, n)
				}
				if n >= 1000 && seqAxis && fused.FusedAttention() > 0 {
					t.Logf("length %d: peak of intermediates %d B blockwise, %d B unfused", n, fs.PeakLiveBytes, ps.PeakLiveBytes)
					if nn := int64(n) * int64(n) * 4; fs.PeakLiveBytes > ps.PeakLiveBytes-nn {
						t.Errorf("length %d: the blockwise run holds %d B, the unfused %d B: not one [N, N] score tensor less", n, fs.PeakLiveBytes, ps.PeakLiveBytes)
					}
				}
			}
		})
	}
	slices.Sort(noChain)
	if !slices.Equal(noChain, unfusedModels) {
		t.Errorf("models without a fused chain: %v, want %v", noChain, unfusedModels)
	}
	t.Logf("%d of %d models have fused attention chains; none in: %s", fusedModels, total, strings.Join(noChain, ", "))
	t.Logf("%d (model, length) pairs ran shorter (the model takes fewer positions): %s", len(shorter), strings.Join(shorter, "; "))
	t.Logf("%d (model, length) pairs both runs refuse at every shorter length: %s", len(refused), strings.Join(refused, "; "))
}

// attentionOnly is the decomposed attention of one Llama layer's heads:
// q, k, v [1, heads, S, 128] in, softmax(q·kᵀ/√128 + mask)·v out, with the
// causal mask [1, 1, S, S] as exports compute it (Trilu of ones, Where).
func attentionOnly(heads int) *graph.Model {
	m := graph.NewModel(8, "bench", graph.Opset{Version: 17})
	g := m.Graph
	dims := []graph.Dim{{Value: 1, Known: true}, {Value: int64(heads), Known: true}, {Param: "seq"}, {Value: 128, Known: true}}
	q := g.AddInput("q", graph.TensorType(graph.Float, dims))
	k := g.AddInput("k", graph.TensorType(graph.Float, dims))
	v := g.AddInput("v", graph.TensorType(graph.Float, dims))
	op := func(t string, attrs []*graph.Attr, in ...*graph.Value) *graph.Value {
		return g.Op(t, in, 1, attrs...)[0]
	}
	i64 := func(name string, x ...int64) *graph.Value {
		t, _ := graph.NewTensor(name, graph.Int64, []int64{int64(len(x))}, x)
		return g.AddInitializer(t)
	}
	f32 := func(name string, x float32) *graph.Value {
		t, _ := graph.NewTensor(name, graph.Float, nil, []float32{x})
		return g.AddInitializer(t)
	}
	seq := op("Slice", nil, op("Shape", nil, q), i64("s0", 2), i64("s1", 3))
	sq := op("Concat", []*graph.Attr{graph.IntAttr("axis", 0)}, i64("one1", 1, 1), seq, seq)
	oneT, _ := graph.NewTensor("onet", graph.Bool, []int64{1}, []bool{true})
	lower := op("Trilu", []*graph.Attr{graph.IntAttr("upper", 0)}, op("Cast", []*graph.Attr{graph.IntAttr("to", int64(graph.Int32))}, op("ConstantOfShape", []*graph.Attr{graph.TensorAttr("value", oneT)}, sq)))
	allowed := op("Cast", []*graph.Attr{graph.IntAttr("to", int64(graph.Bool))}, lower)
	kt := op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 1, 3, 2)}, k)
	sc := op("Div", nil, op("MatMul", nil, q, kt), f32("scale", float32(math.Sqrt(128))))
	masked := op("Where", nil, allowed, sc, f32("neg", -3.4e38))
	p := op("Softmax", []*graph.Attr{graph.IntAttr("axis", -1)}, masked)
	g.AddOutput(op("MatMul", nil, p, v))
	return m
}

// BenchmarkDecomposedAttention times the attention of a 16-head layer
// (head size 128) on prompts of 128, 512 and 2048 tokens and one token,
// run blockwise and as written.
func BenchmarkDecomposedAttention(b *testing.B) {
	const heads = 16
	m := attentionOnly(heads)
	for _, seq := range []int{1, 128, 512, 2048} {
		rng := rand.New(rand.NewPCG(1, uint64(seq)))
		in := map[string]*kernels.Tensor{}
		for _, name := range []string{"q", "k", "v"} {
			x := make([]float32, heads*seq*128)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			in[name] = kernels.FromSlice([]int{1, heads, seq, 128}, x)
		}
		for _, mode := range []string{"unfused", "blockwise"} {
			for _, ts := range threadSettings {
				b.Run(fmt.Sprintf("seq%d/%s/%s", seq, mode, ts.name), func(b *testing.B) {
					o := kernels.Options{Threads: ts.threads}
					if mode == "unfused" {
						o = kernels.Unfused(o)
					}
					benchRunOpts(b, m, in, o)
				})
			}
		}
	}
}
