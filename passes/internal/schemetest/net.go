package schemetest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/onnxpe/onnxpe/graph"
)

// Net builds small models in the fused forms deployed transformers carry:
// token embeddings, projections and attention layers whose positional
// encoding is a fused op (or an unfused one feeding a fused attention op).
type Net struct {
	M   *graph.Model
	G   *graph.Graph
	Rng *rand.Rand
	n   int
}

// The sizes of Net's models: hidden size, heads, key/value heads, head
// dimension and vocabulary.
const (
	Hidden  = 64
	Heads   = 4
	KVHeads = 2
	HeadDim = 16
	Vocab   = 32
)

// NewNet starts a model importing opsets.
func NewNet(opsets ...graph.Opset) *Net {
	m := graph.NewModel(10, "onnxpe-test", opsets...)
	return &Net{M: m, G: m.Graph, Rng: rand.New(rand.NewPCG(3, 5))}
}

// Name is a fresh name with prefix p.
func (b *Net) Name(p string) string { b.n++; return fmt.Sprintf("%s_%d", p, b.n) }

// F32 is a constant float tensor of the given shape.
func (b *Net) F32(dims []int64, v []float32) *graph.Value {
	t, err := graph.NewTensor(b.Name("c"), graph.Float, dims, v)
	if err != nil {
		panic(err)
	}
	return b.G.AddInitializer(t)
}

// Weight is a random float tensor of the given shape.
func (b *Net) Weight(dims ...int64) *graph.Value {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(b.Rng.NormFloat64() / math.Sqrt(float64(dims[0])))
	}
	return b.F32(dims, v)
}

// Scalar is a constant float scalar.
func (b *Net) Scalar(v float32) *graph.Value { return b.F32(nil, []float32{v}) }

// I64 is a constant int64 vector.
func (b *Net) I64(v ...int64) *graph.Value {
	t, err := graph.NewTensor(b.Name("i"), graph.Int64, []int64{int64(len(v))}, v)
	if err != nil {
		panic(err)
	}
	return b.G.AddInitializer(t)
}

// I64s is a constant int64 scalar.
func (b *Net) I64s(v int64) *graph.Value {
	t, _ := graph.NewTensor(b.Name("i"), graph.Int64, nil, []int64{v})
	return b.G.AddInitializer(t)
}

// Op appends an ONNX-domain node and returns its first output.
func (b *Net) Op(op string, ins []*graph.Value, attrs ...*graph.Attr) *graph.Value {
	return b.G.Op(op, ins, 1, attrs...)[0]
}

// Dop appends a node of another domain.
func (b *Net) Dop(domain, op string, ins []*graph.Value, nout int, attrs ...*graph.Attr) []*graph.Value {
	n := b.G.NewNode(op, domain, ins, nout, attrs...)
	b.G.Append(n)
	return n.Outputs()
}

// IDs adds the input_ids input [batch, seq].
func (b *Net) IDs() *graph.Value {
	return b.G.AddInput("input_ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
}

// PosIDs adds the position_ids input [batch, seq].
func (b *Net) PosIDs() *graph.Value {
	return b.G.AddInput("position_ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
}

// Embed gathers a fresh [Vocab, Hidden] token table at ids.
func (b *Net) Embed(ids *graph.Value) *graph.Value {
	return b.Op("Gather", []*graph.Value{b.Weight(Vocab, Hidden), ids})
}

// Proj projects x [.., Hidden] to out columns.
func (b *Net) Proj(x *graph.Value, out int64) *graph.Value {
	return b.Op("MatMul", []*graph.Value{x, b.Weight(Hidden, out)})
}

// Heads4 reshapes (B, S, n·hd) to (B, n, S, hd).
func (b *Net) Heads4(x *graph.Value, n int64) *graph.Value {
	r := b.Op("Reshape", []*graph.Value{x, b.I64(0, 0, n, HeadDim)})
	return b.Op("Transpose", []*graph.Value{r}, graph.IntsAttr("perm", 0, 2, 1, 3))
}

// Merge3 reshapes (B, n, S, hd) to (B, S, n·hd).
func (b *Net) Merge3(x *graph.Value) *graph.Value {
	t := b.Op("Transpose", []*graph.Value{x}, graph.IntsAttr("perm", 0, 2, 1, 3))
	return b.Op("Reshape", []*graph.Value{t, b.I64(0, 0, -1)})
}

// Output ends the model on logits [batch, seq, Vocab].
func (b *Net) Output(x *graph.Value) {
	y := b.Op("MatMul", []*graph.Value{x, b.Weight(int64(Hidden), Vocab)})
	y.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: Vocab, Known: true}})
	b.G.AddOutput(y)
}

// Caches are cos/sin tables [rows, rd/2] of base^(-2k/rd)/scale(k)
// frequencies, multiplied by amp.
func (b *Net) Caches(rows, rd int, base float64, scale func(k int) float64, amp float64) (*graph.Value, *graph.Value) {
	h := rd / 2
	cv, sv := make([]float32, rows*h), make([]float32, rows*h)
	for p := 0; p < rows; p++ {
		for k := 0; k < h; k++ {
			inv := math.Pow(base, -2*float64(k)/float64(rd)) / scale(k)
			a := float64(float32(p) * float32(inv))
			cv[p*h+k], sv[p*h+k] = float32(amp*math.Cos(a)), float32(amp*math.Sin(a))
		}
	}
	return b.F32([]int64{int64(rows), int64(h)}, cv), b.F32([]int64{int64(rows), int64(h)}, sv)
}

// One is the scale of Caches' frequencies without scaling.
func One(int) float64 { return 1 }

// RopeUnfused rotates 4-D x (B, n, S, hd) half-split by cos/sin computed
// from position_ids and inv_freq (Hugging Face Llama).
func (b *Net) RopeUnfused(x, pos *graph.Value, base float64) *graph.Value {
	inv := make([]float32, HeadDim/2)
	for i := range inv {
		inv[i] = float32(math.Pow(base, -2*float64(i)/HeadDim))
	}
	invT := b.F32([]int64{1, HeadDim / 2, 1}, inv)
	pf := b.Op("Cast", []*graph.Value{b.Op("Unsqueeze", []*graph.Value{pos, b.I64(1)})}, graph.IntAttr("to", int64(graph.Float)))
	fr := b.Op("Transpose", []*graph.Value{b.Op("MatMul", []*graph.Value{invT, pf})}, graph.IntsAttr("perm", 0, 2, 1))
	emb := b.Op("Concat", []*graph.Value{fr, fr}, graph.IntAttr("axis", -1))
	cos := b.Op("Unsqueeze", []*graph.Value{b.Op("Cos", []*graph.Value{emb}), b.I64(1)})
	sin := b.Op("Unsqueeze", []*graph.Value{b.Op("Sin", []*graph.Value{emb}), b.I64(1)})
	x1 := b.Op("Slice", []*graph.Value{x, b.I64(0), b.I64(HeadDim / 2), b.I64(-1)})
	x2 := b.Op("Slice", []*graph.Value{x, b.I64(HeadDim / 2), b.I64(HeadDim), b.I64(-1)})
	rot := b.Op("Concat", []*graph.Value{b.Op("Neg", []*graph.Value{x2}), x1}, graph.IntAttr("axis", -1))
	return b.Op("Add", []*graph.Value{b.Op("Mul", []*graph.Value{x, cos}), b.Op("Mul", []*graph.Value{rot, sin})})
}

// SoftmaxAttention is an unfused block over 4-D q, k, v (same heads).
func (b *Net) SoftmaxAttention(q, k, v *graph.Value) *graph.Value {
	kt := b.Op("Transpose", []*graph.Value{k}, graph.IntsAttr("perm", 0, 1, 3, 2))
	s := b.Op("Div", []*graph.Value{b.Op("MatMul", []*graph.Value{q, kt}), b.Scalar(4)})
	return b.Op("MatMul", []*graph.Value{b.Op("Softmax", []*graph.Value{s}, graph.IntAttr("axis", -1)), v})
}

// SeqLen is the sequence length of ids as a scalar int64.
func (b *Net) SeqLen(ids *graph.Value) *graph.Value {
	return b.Op("Gather", []*graph.Value{b.Op("Shape", []*graph.Value{ids}), b.I64s(1)}, graph.IntAttr("axis", 0))
}

// MS is the com.microsoft opset.
func MS() graph.Opset { return graph.Opset{Domain: "com.microsoft", Version: 1} }

// ONNX is the ONNX opset of version v.
func ONNX(v int64) graph.Opset {
	return graph.Opset{Domain: "", Version: v}
}

// Sub is a builder of a graph nested in b's (an attribute of a node).
func (b *Net) Sub(name string) *Net {
	return &Net{M: b.M, G: b.G.NewSubgraph(name), Rng: b.Rng, n: b.n + 1000}
}

// MSRopeLayer is one layer of com.microsoft RotaryEmbedding on q and k
// feeding MultiHeadAttention.
func (b *Net) MSRopeLayer(x, pos, cos, sin *graph.Value) *graph.Value {
	q, k, v := b.Proj(x, Hidden), b.Proj(x, Hidden), b.Proj(x, Hidden)
	q = b.Dop("com.microsoft", "RotaryEmbedding", []*graph.Value{q, pos, cos, sin}, 1, graph.IntAttr("num_heads", Heads))[0]
	k = b.Dop("com.microsoft", "RotaryEmbedding", []*graph.Value{k, pos, cos, sin}, 1, graph.IntAttr("num_heads", Heads))[0]
	a := b.Dop("com.microsoft", "MultiHeadAttention", []*graph.Value{q, k, v}, 1, graph.IntAttr("num_heads", Heads))[0]
	return b.Op("Add", []*graph.Value{x, b.Proj(a, Hidden)})
}

// IntInput adds an int64 input.
func (b *Net) IntInput(name string, dims ...graph.Dim) *graph.Value {
	return b.G.AddInput(name, graph.TensorType(graph.Int64, dims))
}

// Gather reads rows of a fresh [rows, Hidden] table at ids.
func (b *Net) Gather(rows int64, ids *graph.Value) *graph.Value {
	return b.Op("Gather", []*graph.Value{b.Weight(rows, Hidden), ids})
}

// EncoderOut ends a model on its hidden states (no logits).
func (b *Net) EncoderOut(x *graph.Value) {
	y := b.Op("Add", []*graph.Value{x, b.Proj(x, Hidden)})
	y.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: Hidden, Known: true}})
	b.G.AddOutput(y)
}
