package testmodels

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// Single-node models of the deployed attention and quantized-matrix ops,
// at the shapes their benchmarks use (bench/vsort compares them with ONNX
// Runtime): a Llama-shaped attention layer and a 4-bit MatMulNBits.

// AttnShape is one attention call: batch, new tokens, past tokens, query
// heads, key/value heads and head size.
type AttnShape struct {
	Batch, Seq, Past, Heads, KVHeads, HeadDim int
}

// Llama8B is the attention of a Llama-3-8B layer: 32 query heads, 8
// key/value heads, head size 128.
func Llama8B(batch, seq, past int) AttnShape {
	return AttnShape{Batch: batch, Seq: seq, Past: past, Heads: 32, KVHeads: 8, HeadDim: 128}
}

func (a AttnShape) String() string {
	return fmt.Sprintf("B%d S%d past %d, %d/%d heads x %d", a.Batch, a.Seq, a.Past, a.Heads, a.KVHeads, a.HeadDim)
}

func f32Tensor(name string, dims []int64, v []float32) *graph.Tensor {
	t, err := graph.NewTensor(name, graph.Float, dims, v)
	if err != nil {
		panic(err)
	}
	return t
}

// RopeCache returns cos/sin caches (rows, rotaryDim/2) for base, in
// float32, computed in float64.
func RopeCache(rows, rotaryDim int, base float64) (cos, sin []float32) {
	half := rotaryDim / 2
	cos, sin = make([]float32, rows*half), make([]float32, rows*half)
	for p := range rows {
		for i := range half {
			a := float64(p) / math.Pow(base, float64(2*i)/float64(rotaryDim))
			cos[p*half+i], sin[p*half+i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	return cos, sin
}

// GQALayer is one com.microsoft GroupQueryAttention node as ONNX Runtime
// GenAI's model builder writes it: separate query (B, S, Nq*H), key and
// value (B, S, Nkv*H) inputs, past_key/past_value (B, Nkv, P, H) when
// a.Past > 0, seqlens_k and total_sequence_length, do_rotary with stored
// cos/sin caches of maxPos rows (base 500000). Outputs: output,
// present_key, present_value.
func GQALayer(a AttnShape, maxPos int) *graph.Model {
	m := graph.NewModel(10, "onnxpe-testmodels", graph.Opset{Domain: "", Version: 21}, graph.Opset{Domain: "com.microsoft", Version: 1})
	g := m.Graph
	H := int64(a.HeadDim)
	in := func(name string, dt graph.DataType, dims ...int64) *graph.Value {
		return g.AddInput(name, graph.TensorType(dt, graph.Dims(dims...)))
	}
	B, S, P := int64(a.Batch), int64(a.Seq), int64(a.Past)
	q := in("query", graph.Float, B, S, int64(a.Heads)*H)
	k := in("key", graph.Float, B, S, int64(a.KVHeads)*H)
	v := in("value", graph.Float, B, S, int64(a.KVHeads)*H)
	var pk, pv *graph.Value
	if a.Past > 0 {
		pk = in("past_key", graph.Float, B, int64(a.KVHeads), P, H)
		pv = in("past_value", graph.Float, B, int64(a.KVHeads), P, H)
	}
	seq := in("seqlens_k", graph.Int32, B)
	tot := in("total_sequence_length", graph.Int32)
	cs, sn := RopeCache(maxPos, a.HeadDim, 500000)
	cv := g.AddInitializer(f32Tensor("cos_cache", []int64{int64(maxPos), H / 2}, cs))
	sv := g.AddInitializer(f32Tensor("sin_cache", []int64{int64(maxPos), H / 2}, sn))
	n := g.NewNode("GroupQueryAttention", "com.microsoft", []*graph.Value{q, k, v, pk, pv, seq, tot, cv, sv}, 3,
		graph.IntAttr("num_heads", int64(a.Heads)), graph.IntAttr("kv_num_heads", int64(a.KVHeads)), graph.IntAttr("do_rotary", 1))
	g.Append(n)
	T := int64(a.Past + a.Seq)
	n.Outputs()[0].Type = graph.TensorType(graph.Float, graph.Dims(B, S, int64(a.Heads)*H))
	for _, o := range n.Outputs()[1:] {
		o.Type = graph.TensorType(graph.Float, graph.Dims(B, int64(a.KVHeads), T, H))
	}
	for _, o := range n.Outputs() {
		g.AddOutput(o)
	}
	return m
}

// AttentionLayer is one Attention node of opset 23 as exporters write it:
// (B, S, N*H) query, key and value with q_num_heads and kv_num_heads,
// is_causal, past_key/past_value (B, Nkv, P, H) when a.Past > 0. Outputs:
// Y, present_key, present_value.
func AttentionLayer(a AttnShape) *graph.Model {
	m := graph.NewModel(10, "onnxpe-testmodels", graph.Opset{Domain: "", Version: 23})
	g := m.Graph
	H := int64(a.HeadDim)
	B, S, P := int64(a.Batch), int64(a.Seq), int64(a.Past)
	in := func(name string, dims ...int64) *graph.Value {
		return g.AddInput(name, graph.TensorType(graph.Float, graph.Dims(dims...)))
	}
	q := in("query", B, S, int64(a.Heads)*H)
	k := in("key", B, S, int64(a.KVHeads)*H)
	v := in("value", B, S, int64(a.KVHeads)*H)
	ins := []*graph.Value{q, k, v, nil}
	if a.Past > 0 {
		ins = append(ins, in("past_key", B, int64(a.KVHeads), P, H), in("past_value", B, int64(a.KVHeads), P, H))
	}
	n := g.NewNode("Attention", "", ins, 3, graph.IntAttr("q_num_heads", int64(a.Heads)),
		graph.IntAttr("kv_num_heads", int64(a.KVHeads)), graph.IntAttr("is_causal", 1))
	g.Append(n)
	T := int64(a.Past + a.Seq)
	n.Outputs()[0].Type = graph.TensorType(graph.Float, graph.Dims(B, S, int64(a.Heads)*H))
	for _, o := range n.Outputs()[1:] {
		o.Type = graph.TensorType(graph.Float, graph.Dims(B, int64(a.KVHeads), T, H))
	}
	for _, o := range n.Outputs() {
		g.AddOutput(o)
	}
	return m
}

func randTensor(rng *rand.Rand, shape ...int) *kernels.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	d := make([]float32, n)
	for i := range d {
		d[i] = float32(rng.NormFloat64())
	}
	return kernels.FromSlice(shape, d)
}

// AttnInputs are seeded inputs of GQALayer or AttentionLayer (gqa selects
// the GroupQueryAttention extras: seqlens_k, total_sequence_length).
func AttnInputs(a AttnShape, gqa bool, seed uint64) map[string]*kernels.Tensor {
	rng := rand.New(rand.NewPCG(seed, 7))
	H := a.HeadDim
	in := map[string]*kernels.Tensor{
		"query": randTensor(rng, a.Batch, a.Seq, a.Heads*H),
		"key":   randTensor(rng, a.Batch, a.Seq, a.KVHeads*H),
		"value": randTensor(rng, a.Batch, a.Seq, a.KVHeads*H),
	}
	if a.Past > 0 {
		in["past_key"] = randTensor(rng, a.Batch, a.KVHeads, a.Past, H)
		in["past_value"] = randTensor(rng, a.Batch, a.KVHeads, a.Past, H)
	}
	if gqa {
		s := make([]int32, a.Batch)
		for i := range s {
			s[i] = int32(a.Past + a.Seq - 1)
		}
		in["seqlens_k"] = kernels.FromSlice([]int{a.Batch}, s)
		in["total_sequence_length"] = kernels.Scalar(int32(a.Past + a.Seq))
	}
	return in
}

// NBitsWeight is a random MatMulNBits weight: N rows of K values in
// blocks of blockSize, bits 4 or 8, with packed uint8 zero points.
type NBitsWeight struct {
	K, N, Bits, BlockSize int
	B                     []uint8   // (N, k_blocks, blob)
	Scales                []float32 // (N, k_blocks)
	ZeroPoints            []uint8   // (N, ceil(k_blocks*bits/8))
}

// NewNBitsWeight draws a weight whose dequantized values have a standard
// deviation about 1/sqrt(K) (a Llama projection's).
func NewNBitsWeight(K, N, bits, blockSize int, seed uint64) *NBitsWeight {
	rng := rand.New(rand.NewPCG(seed, 9))
	kb := (K + blockSize - 1) / blockSize
	w := &NBitsWeight{K: K, N: N, Bits: bits, BlockSize: blockSize,
		B: make([]uint8, N*kb*blockSize*bits/8), Scales: make([]float32, N*kb), ZeroPoints: make([]uint8, N*((kb*bits+7)/8))}
	for i := range w.B {
		w.B[i] = uint8(rng.IntN(256))
	}
	levels := float64(int(1) << bits)
	for i := range w.Scales {
		w.Scales[i] = float32((0.5 + rng.Float64()) * 2 / (levels * math.Sqrt(float64(K))))
	}
	for i := range w.ZeroPoints {
		w.ZeroPoints[i] = uint8(rng.IntN(256))
	}
	return w
}

// addMatMulNBits appends a MatMulNBits node reading a with w's constants,
// its scales stored in dt (A's type T: graph.Float, or graph.Float16 as
// GenAI's fp16 int4 builds, each float32 scale rounded once).
func addMatMulNBits(g *graph.Graph, name string, a *graph.Value, w *NBitsWeight, dt graph.DataType) *graph.Value {
	kb := int64((w.K + w.BlockSize - 1) / w.BlockSize)
	bt, err := graph.NewTensor(name+"_q", graph.Uint8, []int64{int64(w.N), kb, int64(w.BlockSize * w.Bits / 8)}, w.B)
	if err != nil {
		panic(err)
	}
	zt, err := graph.NewTensor(name+"_zp", graph.Uint8, []int64{int64(len(w.ZeroPoints))}, w.ZeroPoints)
	if err != nil {
		panic(err)
	}
	st := f32Tensor(name+"_scales", []int64{int64(w.N) * kb}, w.Scales)
	if dt != graph.Float {
		sc := make([]float64, len(w.Scales))
		for i, v := range w.Scales {
			sc[i] = float64(v)
		}
		if st, err = graph.TensorFromFloat64(name+"_scales", dt, []int64{int64(w.N) * kb}, sc); err != nil {
			panic(err)
		}
	}
	n := g.NewNode("MatMulNBits", "com.microsoft", []*graph.Value{a, g.AddInitializer(bt), g.AddInitializer(st), g.AddInitializer(zt)}, 1,
		graph.IntAttr("K", int64(w.K)), graph.IntAttr("N", int64(w.N)), graph.IntAttr("bits", int64(w.Bits)), graph.IntAttr("block_size", int64(w.BlockSize)))
	g.Append(n)
	return n.Outputs()[0]
}

// MatMulNBitsLayer is one MatMulNBits node: A (M, K) input times a
// constant weight w.
func MatMulNBitsLayer(M int, w *NBitsWeight) *graph.Model {
	m := graph.NewModel(10, "onnxpe-testmodels", graph.Opset{Domain: "", Version: 21}, graph.Opset{Domain: "com.microsoft", Version: 1})
	g := m.Graph
	a := g.AddInput("A", graph.TensorType(graph.Float, graph.Dims(int64(M), int64(w.K))))
	y := addMatMulNBits(g, "w", a, w, graph.Float)
	y.Type = graph.TensorType(graph.Float, graph.Dims(int64(M), int64(w.N)))
	g.AddOutput(y)
	return m
}
