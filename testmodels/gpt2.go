package testmodels

import (
	"math"
	"math/rand/v2"

	"github.com/onnxpe/onnxpe/graph"
)

// GPT2BlockConfig shapes a GPT-2 transformer block built by GPT2Block.
type GPT2BlockConfig struct {
	Hidden, Heads, Layers int
	Seed                  uint64
}

// GPT2Small is the shape of one GPT-2 small block: hidden 768, 12 heads.
var GPT2Small = GPT2BlockConfig{Hidden: 768, Heads: 12, Layers: 1, Seed: 1}

// GPT2Block builds GPT-2 blocks as the exporter writes them at opset 17:
// LayerNormalization, a fused QKV projection (MatMul + Add) split in
// three, per-head attention with a causal mask and scaling, the output
// projection, and an MLP with the tanh-approximated GELU written out in
// Pow/Mul/Tanh. Input x [batch, seq, hidden] (float32); output y.
func GPT2Block(cfg GPT2BlockConfig) *graph.Model {
	m := graph.NewModel(8, "onnxpe-testmodels", graph.Opset{Domain: "", Version: 17})
	g := m.Graph
	b := &llamaBuilder{g: g, rng: rand.New(rand.NewPCG(cfg.Seed, 9))}
	d := int64(cfg.Hidden)
	hd := d / int64(cfg.Heads)
	x := g.AddInput("x", graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: d, Known: true}}))
	// Causal mask [seq, seq] from the input's shape.
	shape := b.op("Shape", nil, x)
	seq := b.op("Slice", nil, shape, b.i64("s1", 1), b.i64("s2", 2))
	sq := b.op("Concat", []*graph.Attr{graph.IntAttr("axis", 0)}, seq, seq)
	oneT, _ := graph.NewTensor("one", graph.Float, []int64{1}, []float32{1})
	lower := b.op("Trilu", []*graph.Attr{graph.IntAttr("upper", 0)}, b.op("ConstantOfShape", []*graph.Attr{graph.TensorAttr("value", oneT)}, sq))
	mask := b.op("Mul", nil, b.op("Sub", nil, b.scalar("one_s", 1), lower), b.scalar("neg", -1e4))
	gelu := func(t *graph.Value) *graph.Value {
		// 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3)))
		cube := b.op("Mul", nil, b.op("Pow", nil, t, b.scalar("three", 3)), b.scalar("c", 0.044715))
		in := b.op("Mul", nil, b.op("Add", nil, t, cube), b.scalar("k", float32(math.Sqrt(2/math.Pi))))
		return b.op("Mul", nil, b.op("Mul", nil, t, b.scalar("half", 0.5)), b.op("Add", nil, b.op("Tanh", nil, in), b.scalar("one_g", 1)))
	}
	ln := func(t *graph.Value) *graph.Value {
		sc := b.weight("ln.weight", d)
		bi := b.weight("ln.bias", d)
		return b.op("LayerNormalization", []*graph.Attr{graph.IntAttr("axis", -1), graph.FloatAttr("epsilon", 1e-5)}, t, sc, bi)
	}
	for l := 0; l < cfg.Layers; l++ {
		h := ln(x)
		qkv := b.op("Add", nil, b.op("MatMul", nil, h, b.weight("c_attn.weight", d, 3*d)), b.weight("c_attn.bias", 3*d))
		parts := g.Op("Split", []*graph.Value{qkv, b.i64("split", d, d, d)}, 3, graph.IntAttr("axis", 2))
		head := func(t *graph.Value, perm ...int64) *graph.Value {
			r := b.op("Reshape", nil, t, b.i64("heads", 0, 0, int64(cfg.Heads), hd))
			return b.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", perm...)}, r)
		}
		q := head(parts[0], 0, 2, 1, 3)
		k := head(parts[1], 0, 2, 3, 1)
		v := head(parts[2], 0, 2, 1, 3)
		s := b.op("Add", nil, b.op("Div", nil, b.op("MatMul", nil, q, k), b.scalar("scale", float32(math.Sqrt(float64(hd))))), mask)
		a := b.op("MatMul", nil, b.op("Softmax", []*graph.Attr{graph.IntAttr("axis", -1)}, s), v)
		a = b.op("Reshape", nil, b.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, a), b.i64("merge", 0, 0, d))
		x = b.op("Add", nil, x, b.op("Add", nil, b.op("MatMul", nil, a, b.weight("c_proj.weight", d, d)), b.weight("c_proj.bias", d)))
		h = ln(x)
		f := gelu(b.op("Add", nil, b.op("MatMul", nil, h, b.weight("c_fc.weight", d, 4*d)), b.weight("c_fc.bias", 4*d)))
		x = b.op("Add", nil, x, b.op("Add", nil, b.op("MatMul", nil, f, b.weight("mlp.c_proj.weight", 4*d, d)), b.weight("mlp.c_proj.bias", d)))
	}
	x.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: d, Known: true}})
	g.AddOutput(x)
	return m
}
