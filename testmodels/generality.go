package testmodels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/onnxpe/onnxpe/graph"
)

// The generality forms: models of the forms issue 21 names, each written
// the way another exporter writes it (torch.onnx.export's TorchScript
// tracing of Hugging Face modeling code, optimum's decoder export, ONNX
// Runtime's optimizer, ONNX Runtime GenAI's model builder, the ONNX
// RotaryEmbedding function body), not copied from the corpus or from the
// Hugging Face exports of passes/testdata: the audit must read them from
// what they compute. Each comes with its truth: the schemes, the params
// the graph fixes, and the params it does not fix (null with a note).

// GeneralityForm is one of those models with the audit it must give.
type GeneralityForm struct {
	Name string
	// Class is the class of issue 21 the form belongs to: 1 confident false
	// positives, 2 nope without evidence, 3 values taken for the wrong
	// scheme, 4 parameters guessed or misread.
	Class int
	Note  string
	// Build makes the model; dir is an empty folder it may write side
	// files into (the absent-weights form saves and reloads itself there).
	Build func(dir string) (*graph.Model, error)
	Truth Truth
	// Null lists per scheme the params the graph does not fix: the audit
	// must report each null, with a note naming it.
	Null map[string][]string
	// Alternatives are other audits that are right too: `unknown` with
	// its reason where the form's truth may also be given up on (a probe
	// that cannot run at the model's own size).
	Alternatives []Truth
}

// GeneralityForms lists the forms with their truth.
func GeneralityForms() []GeneralityForm {
	built := func(f func() *graph.Model) func(string) (*graph.Model, error) {
		return func(string) (*graph.Model, error) { return f(), nil }
	}
	var out []GeneralityForm
	out = append(out, encDecForms(built)...)
	out = append(out, foundForms(built)...)
	out = append(out, fusedForms(built)...)
	out = append(out, generationForms(built)...)
	out = append(out, valueForms(built)...)
	out = append(out, paramForms(built)...)
	return out
}

// layerSchemes lists layers 0..n-1 with the scheme of each from one
// per-layer list.
func layerSchemes(schemes ...string) []LayerScheme {
	ls := make([]LayerScheme, len(schemes))
	for i, s := range schemes {
		ls[i] = LayerScheme{Index: i, Scheme: s}
	}
	return ls
}

// ---- the builder ----

// gen builds one model: nodes appended in order (the exporters' order),
// weights pseudo-random from a seeded source.
type gen struct {
	m   *graph.Model
	g   *graph.Graph
	rng *rand.Rand
}

func newGen(producer string, seed uint64, opsets ...graph.Opset) *gen {
	m := graph.NewModel(8, producer, opsets...)
	return &gen{m: m, g: m.Graph, rng: rand.New(rand.NewPCG(seed, 21))}
}

func (b *gen) op(op string, attrs []*graph.Attr, in ...*graph.Value) *graph.Value {
	return b.g.Op(op, in, 1, attrs...)[0]
}

// ms appends a com.microsoft node with one output.
func (b *gen) ms(op string, attrs []*graph.Attr, in ...*graph.Value) *graph.Value {
	n := b.g.NewNode(op, "com.microsoft", in, 1, attrs...)
	b.g.Append(n)
	return n.Outputs()[0]
}

func (b *gen) ints(v ...int64) *graph.Value {
	t, err := graph.NewTensor("const_ints", graph.Int64, []int64{int64(len(v))}, v)
	if err != nil {
		panic(err)
	}
	return b.g.AddInitializer(t)
}

func (b *gen) int0(v int64) *graph.Value {
	t, err := graph.NewTensor("const_int", graph.Int64, nil, []int64{v})
	if err != nil {
		panic(err)
	}
	return b.g.AddInitializer(t)
}

func (b *gen) f0(v float32) *graph.Value { return b.fl("const_float", nil, []float32{v}) }

func (b *gen) fl(name string, dims []int64, v []float32) *graph.Value {
	return b.g.AddInitializer(f32Tensor(name, dims, v))
}

// w is a weight of normal values scaled by 1/sqrt(dims[0]).
func (b *gen) w(name string, dims ...int64) *graph.Value {
	return b.wScaled(name, 1/math.Sqrt(float64(dims[0])), dims...)
}

func (b *gen) wScaled(name string, scale float64, dims ...int64) *graph.Value {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(b.rng.NormFloat64() * scale)
	}
	return b.fl(name, dims, v)
}

// ones is a [n] vector of ones perturbed by ±0.1 (a norm's gain).
func (b *gen) gain(name string, n int64) *graph.Value {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(1 + 0.1*(2*b.rng.Float64()-1))
	}
	return b.fl(name, []int64{n}, v)
}

func (b *gen) input(name string, dt graph.DataType, dims ...graph.Dim) *graph.Value {
	return b.g.AddInput(name, graph.TensorType(dt, dims))
}

func (b *gen) output(v *graph.Value, name string, dt graph.DataType, dims ...graph.Dim) {
	v.Type = graph.TensorType(dt, dims)
	mustRename(b.g, v, name)
	b.g.AddOutput(v)
}

func sym(name string) graph.Dim { return graph.Dim{Param: name} }
func fixed(n int64) graph.Dim   { return graph.Dim{Value: n, Known: true} }

func axisAttr(a int64) []*graph.Attr { return []*graph.Attr{graph.IntAttr("axis", a)} }
func permAttr(p ...int64) []*graph.Attr {
	return []*graph.Attr{graph.IntsAttr("perm", p...)}
}
func toAttr(dt graph.DataType) []*graph.Attr {
	return []*graph.Attr{graph.IntAttr("to", int64(dt))}
}

func (b *gen) toF(v *graph.Value) *graph.Value { return b.op("Cast", toAttr(graph.Float), v) }
func (b *gen) toI(v *graph.Value) *graph.Value { return b.op("Cast", toAttr(graph.Int64), v) }

// dim is Shape(v)[i] as a scalar (the tracer's size(i)).
func (b *gen) dim(v *graph.Value, i int64) *graph.Value {
	return b.op("Gather", axisAttr(0), b.op("Shape", nil, v), b.int0(i))
}

// dim1 is Shape(v)[i] as a [1] vector.
func (b *gen) dim1(v *graph.Value, i int64) *graph.Value {
	return b.op("Unsqueeze", nil, b.dim(v, i), b.ints(0))
}

func (b *gen) linear(x *graph.Value, name string, in, out int64, bias bool) *graph.Value {
	y := b.op("MatMul", nil, x, b.w(name+".weight", in, out))
	if bias {
		y = b.op("Add", nil, b.wScaled(name+".bias", 0.02, out), y)
	}
	return y
}

// layerNorm is torch's layer_norm as LayerNormalization (opset 17).
func (b *gen) layerNorm(x *graph.Value, name string, d int64) *graph.Value {
	return b.op("LayerNormalization", []*graph.Attr{graph.IntAttr("axis", -1), graph.FloatAttr("epsilon", 1e-5)},
		x, b.gain(name+".weight", d), b.wScaled(name+".bias", 0.02, d))
}

// rmsNorm is T5LayerNorm and LlamaRMSNorm as TorchScript writes them:
// x · 1/sqrt(mean(x²) + eps) · weight.
func (b *gen) rmsNorm(x *graph.Value, name string, d int64) *graph.Value {
	v := b.op("ReduceMean", []*graph.Attr{graph.IntsAttr("axes", -1), graph.IntAttr("keepdims", 1)}, b.op("Pow", nil, x, b.f0(2)))
	r := b.op("Div", nil, b.f0(1), b.op("Sqrt", nil, b.op("Add", nil, v, b.f0(1e-6))))
	return b.op("Mul", nil, b.gain(name+".weight", d), b.op("Mul", nil, x, r))
}

// heads is x [B, S, H·hd] viewed as [B, H, S, hd] (view, transpose).
func (b *gen) heads(x *graph.Value, h, hd int64) *graph.Value {
	return b.op("Transpose", permAttr(0, 2, 1, 3), b.op("Reshape", nil, x, b.ints(0, 0, h, hd)))
}

// merge is a [B, H, S, hd] back to [B, S, H·hd].
func (b *gen) merge(a *graph.Value, d int64) *graph.Value {
	return b.op("Reshape", nil, b.op("Transpose", permAttr(0, 2, 1, 3), a), b.ints(0, 0, d))
}

// attn is eager multi-head attention as Hugging Face writes it: scores
// q·kᵀ (times scale unless 0), bias(scores) (nil: none), Softmax, ·v.
func (b *gen) attn(q, k, v *graph.Value, scale float64, bias func(*graph.Value) *graph.Value) *graph.Value {
	s := b.op("MatMul", nil, q, b.op("Transpose", permAttr(0, 1, 3, 2), k))
	if scale != 0 {
		s = b.op("Mul", nil, s, b.f0(float32(scale)))
	}
	if bias != nil {
		s = bias(s)
	}
	return b.op("MatMul", nil, b.op("Softmax", axisAttr(-1), s), v)
}

// extendedMask is Hugging Face's get_extended_attention_mask of a [B, S]
// mask of ones and zeros: (1 - mask[:, None, None, :]) · finfo.min.
func (b *gen) extendedMask(mask *graph.Value) *graph.Value {
	m := b.toF(b.op("Unsqueeze", nil, mask, b.ints(1, 2)))
	return b.op("Mul", nil, b.op("Sub", nil, b.f0(1), m), b.f0(-3.4028234663852886e+38))
}

// causalMask is the [1, 1, S, S] additive causal mask of a sequence of
// length seq (a scalar): 0 on and below the diagonal, finfo.min above.
func (b *gen) causalMask(seq *graph.Value) *graph.Value {
	r := b.op("Range", nil, b.int0(0), seq, b.int0(1))
	above := b.op("Greater", nil, b.op("Unsqueeze", nil, r, b.ints(0)), b.op("Unsqueeze", nil, r, b.ints(1)))
	m := b.op("Where", nil, above, b.f0(-3.4028234663852886e+38), b.f0(0))
	return b.op("Unsqueeze", nil, m, b.ints(0, 1))
}

// ffn is Linear, activation, Linear.
func (b *gen) ffn(x *graph.Value, name string, d, f int64, act string, bias bool) *graph.Value {
	h := b.linear(x, name+".fc1", d, f, bias)
	switch act {
	case "relu":
		h = b.op("Relu", nil, h)
	case "gelu":
		h = b.op("Mul", nil, b.op("Mul", nil, h, b.f0(0.5)),
			b.op("Add", nil, b.op("Erf", nil, b.op("Div", nil, h, b.f0(math.Sqrt2))), b.f0(1)))
	case "silu":
		h = b.op("Mul", nil, h, b.op("Sigmoid", nil, h))
	}
	return b.linear(h, name+".fc2", f, d, bias)
}

// saveAbsent saves m into dir with every tensor of at least threshold
// bytes in the side file model.onnx.data, removes that file, and loads the
// model back: a model whose weights are in an external file that did not
// come with it.
func saveAbsent(m *graph.Model, dir string, threshold int64) (*graph.Model, error) {
	p := filepath.Join(dir, "model.onnx")
	if err := m.Save(p, graph.SaveOptions{External: graph.ExternalizeLarge, Threshold: threshold}); err != nil {
		return nil, err
	}
	if err := os.Remove(p + ".data"); err != nil {
		return nil, fmt.Errorf("testmodels: the side file was not written: %w", err)
	}
	return graph.LoadWith(p, graph.LoadOptions{AllowMissingExternal: true})
}
