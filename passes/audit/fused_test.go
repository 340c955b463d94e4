package audit_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/testmodels"
)

// fub builds small models in the fused forms deployed transformers carry:
// token embeddings, projections and attention layers whose positional
// encoding is a fused op (or an unfused one feeding a fused attention op).
type fub struct {
	m   *graph.Model
	g   *graph.Graph
	rng *rand.Rand
	n   int
}

const (
	fbHidden = 64
	fbHeads  = 4
	fbKV     = 2
	fbHD     = 16
	fbVocab  = 32
)

func newFub(opsets ...graph.Opset) *fub {
	m := graph.NewModel(10, "onnxpe-test", opsets...)
	return &fub{m: m, g: m.Graph, rng: rand.New(rand.NewPCG(3, 5))}
}

func (b *fub) name(p string) string { b.n++; return fmt.Sprintf("%s_%d", p, b.n) }

func (b *fub) f32(dims []int64, v []float32) *graph.Value {
	t, err := graph.NewTensor(b.name("c"), graph.Float, dims, v)
	if err != nil {
		panic(err)
	}
	return b.g.AddInitializer(t)
}

func (b *fub) weight(dims ...int64) *graph.Value {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(b.rng.NormFloat64() / math.Sqrt(float64(dims[0])))
	}
	return b.f32(dims, v)
}

func (b *fub) scalar(v float32) *graph.Value { return b.f32(nil, []float32{v}) }

func (b *fub) i64(v ...int64) *graph.Value {
	t, err := graph.NewTensor(b.name("i"), graph.Int64, []int64{int64(len(v))}, v)
	if err != nil {
		panic(err)
	}
	return b.g.AddInitializer(t)
}

func (b *fub) i64s(v int64) *graph.Value {
	t, _ := graph.NewTensor(b.name("i"), graph.Int64, nil, []int64{v})
	return b.g.AddInitializer(t)
}

// op appends an ONNX-domain node and returns its first output.
func (b *fub) op(op string, ins []*graph.Value, attrs ...*graph.Attr) *graph.Value {
	return b.g.Op(op, ins, 1, attrs...)[0]
}

// dop appends a node of another domain.
func (b *fub) dop(domain, op string, ins []*graph.Value, nout int, attrs ...*graph.Attr) []*graph.Value {
	n := b.g.NewNode(op, domain, ins, nout, attrs...)
	b.g.Append(n)
	return n.Outputs()
}

func (b *fub) ids() *graph.Value {
	return b.g.AddInput("input_ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
}

func (b *fub) posIDs() *graph.Value {
	return b.g.AddInput("position_ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
}

func (b *fub) embed(ids *graph.Value) *graph.Value {
	return b.op("Gather", []*graph.Value{b.weight(fbVocab, fbHidden), ids})
}

func (b *fub) proj(x *graph.Value, out int64) *graph.Value {
	return b.op("MatMul", []*graph.Value{x, b.weight(fbHidden, out)})
}

// heads4 reshapes (B, S, n·hd) to (B, n, S, hd).
func (b *fub) heads4(x *graph.Value, n int64) *graph.Value {
	r := b.op("Reshape", []*graph.Value{x, b.i64(0, 0, n, fbHD)})
	return b.op("Transpose", []*graph.Value{r}, graph.IntsAttr("perm", 0, 2, 1, 3))
}

// merge3 reshapes (B, n, S, hd) to (B, S, n·hd).
func (b *fub) merge3(x *graph.Value) *graph.Value {
	t := b.op("Transpose", []*graph.Value{x}, graph.IntsAttr("perm", 0, 2, 1, 3))
	return b.op("Reshape", []*graph.Value{t, b.i64(0, 0, -1)})
}

func (b *fub) output(x *graph.Value) {
	y := b.op("MatMul", []*graph.Value{x, b.weight(int64(fbHidden), fbVocab)})
	y.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: fbVocab, Known: true}})
	b.g.AddOutput(y)
}

// caches are cos/sin tables [rows, rd/2] of base^(-2k/rd)/scale(k)
// frequencies, multiplied by amp.
func (b *fub) caches(rows, rd int, base float64, scale func(k int) float64, amp float64) (*graph.Value, *graph.Value) {
	h := rd / 2
	cv, sv := make([]float32, rows*h), make([]float32, rows*h)
	for p := 0; p < rows; p++ {
		for k := 0; k < h; k++ {
			inv := math.Pow(base, -2*float64(k)/float64(rd)) / scale(k)
			a := float64(float32(p) * float32(inv))
			cv[p*h+k], sv[p*h+k] = float32(amp*math.Cos(a)), float32(amp*math.Sin(a))
		}
	}
	return b.f32([]int64{int64(rows), int64(h)}, cv), b.f32([]int64{int64(rows), int64(h)}, sv)
}

func one(int) float64 { return 1 }

// ropeUnfused rotates 4-D x (B, n, S, hd) half-split by cos/sin computed
// from position_ids and inv_freq (Hugging Face Llama).
func (b *fub) ropeUnfused(x, pos *graph.Value, base float64) *graph.Value {
	inv := make([]float32, fbHD/2)
	for i := range inv {
		inv[i] = float32(math.Pow(base, -2*float64(i)/fbHD))
	}
	invT := b.f32([]int64{1, fbHD / 2, 1}, inv)
	pf := b.op("Cast", []*graph.Value{b.op("Unsqueeze", []*graph.Value{pos, b.i64(1)})}, graph.IntAttr("to", int64(graph.Float)))
	fr := b.op("Transpose", []*graph.Value{b.op("MatMul", []*graph.Value{invT, pf})}, graph.IntsAttr("perm", 0, 2, 1))
	emb := b.op("Concat", []*graph.Value{fr, fr}, graph.IntAttr("axis", -1))
	cos := b.op("Unsqueeze", []*graph.Value{b.op("Cos", []*graph.Value{emb}), b.i64(1)})
	sin := b.op("Unsqueeze", []*graph.Value{b.op("Sin", []*graph.Value{emb}), b.i64(1)})
	x1 := b.op("Slice", []*graph.Value{x, b.i64(0), b.i64(fbHD / 2), b.i64(-1)})
	x2 := b.op("Slice", []*graph.Value{x, b.i64(fbHD / 2), b.i64(fbHD), b.i64(-1)})
	rot := b.op("Concat", []*graph.Value{b.op("Neg", []*graph.Value{x2}), x1}, graph.IntAttr("axis", -1))
	return b.op("Add", []*graph.Value{b.op("Mul", []*graph.Value{x, cos}), b.op("Mul", []*graph.Value{rot, sin})})
}

// softmaxAttention is an unfused block over 4-D q, k, v (same heads).
func (b *fub) softmaxAttention(q, k, v *graph.Value) *graph.Value {
	kt := b.op("Transpose", []*graph.Value{k}, graph.IntsAttr("perm", 0, 1, 3, 2))
	s := b.op("Div", []*graph.Value{b.op("MatMul", []*graph.Value{q, kt}), b.scalar(4)})
	return b.op("MatMul", []*graph.Value{b.op("Softmax", []*graph.Value{s}, graph.IntAttr("axis", -1)), v})
}

// seqLen is the sequence length of ids as a scalar int64.
func (b *fub) seqLen(ids *graph.Value) *graph.Value {
	return b.op("Gather", []*graph.Value{b.op("Shape", []*graph.Value{ids}), b.i64s(1)}, graph.IntAttr("axis", 0))
}

// fusedCase is one Go-built model with what its audit must say.
type fusedCase struct {
	name  string
	build func() *graph.Model
	// layers is the scheme of every layer; want the findings (scheme,
	// layers, fused, params that must match, params that must be null).
	layers []string
	want   []wantFinding
}

type wantFinding struct {
	scheme   string
	layers   []int
	fused    bool
	params   map[string]any
	null     []string
	subgraph string
	note     string // a substring one of the notes must hold
}

func ms() graph.Opset { return graph.Opset{Domain: "com.microsoft", Version: 1} }
func onnx(v int64) graph.Opset {
	return graph.Opset{Domain: "", Version: v}
}

// fusedCases are the fused deployment forms the audit must read.
func fusedCases() []fusedCase {
	return []fusedCase{
		{
			// com.microsoft RotaryEmbedding on 3-D q and k with num_heads = 0
			// and rotary_embedding_dim = 0 (sizes from the cache width), linear
			// scaling in the caches, feeding the opset-23 Attention (GQA).
			name: "ms_rotary_infer_attention23",
			build: func() *graph.Model {
				b := newFub(onnx(23), ms())
				ids, pos := b.ids(), b.posIDs()
				x := b.embed(ids)
				cos, sin := b.caches(256, fbHD, 10000, func(int) float64 { return 4 }, 1)
				for l := 0; l < 2; l++ {
					q, k, v := b.proj(x, fbHeads*fbHD), b.proj(x, fbKV*fbHD), b.proj(x, fbKV*fbHD)
					q = b.dop("com.microsoft", "RotaryEmbedding", []*graph.Value{q, pos, cos, sin}, 1)[0]
					k = b.dop("com.microsoft", "RotaryEmbedding", []*graph.Value{k, pos, cos, sin}, 1)[0]
					a := b.op("Attention", []*graph.Value{q, k, v}, graph.IntAttr("q_num_heads", fbHeads), graph.IntAttr("kv_num_heads", fbKV), graph.IntAttr("is_causal", 1))
					x = b.op("Add", []*graph.Value{x, b.proj(a, fbHidden)})
				}
				b.output(x)
				return b.m
			},
			layers: []string{"rope", "rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0, 1}, fused: true, params: map[string]any{
				"layout": "half_split", "head_dim": 16, "rotary_dim": 16, "num_heads": fbHeads, "num_kv_heads": fbKV,
				"base": 10000, "scaling": "linear", "factor": 4, "max_positions": 256}}},
		},
		{
			// ONNX RotaryEmbedding (opset 23) on 4-D q and k, interleaved,
			// num_heads = 0 and rotary_embedding_dim = 0, position_ids given;
			// base 500000; MultiHeadAttention reads them back in 3-D.
			name: "onnx_rotary_infer_mha",
			build: func() *graph.Model {
				b := newFub(onnx(23), ms())
				ids, pos := b.ids(), b.posIDs()
				x := b.embed(ids)
				cos, sin := b.caches(64, fbHD, 500000, one, 1)
				q, k, v := b.proj(x, fbHeads*fbHD), b.proj(x, fbHeads*fbHD), b.proj(x, fbHeads*fbHD)
				rot := func(t *graph.Value) *graph.Value {
					return b.op("RotaryEmbedding", []*graph.Value{b.heads4(t, fbHeads), cos, sin, pos}, graph.IntAttr("interleaved", 1))
				}
				q, k = b.merge3(rot(q)), b.merge3(rot(k))
				a := b.dop("com.microsoft", "MultiHeadAttention", []*graph.Value{q, k, v}, 1, graph.IntAttr("num_heads", fbHeads), graph.IntAttr("unidirectional", 1))[0]
				b.output(b.op("Add", []*graph.Value{x, b.proj(a, fbHidden)}))
				return b.m
			},
			layers: []string{"rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0}, fused: true, params: map[string]any{
				"layout": "interleaved", "head_dim": 16, "rotary_dim": 16, "num_heads": fbHeads, "num_kv_heads": fbHeads,
				"base": 500000, "scaling": "none", "factor": 1, "max_positions": 64}}},
		},
		{
			// GroupQueryAttention with do_rotary and cos/sin caches (ONNX
			// Runtime GenAI), partial rotary (8 of 16), no position_ids: the
			// positions continue the KV cache.
			name: "gqa_do_rotary",
			build: func() *graph.Model {
				b := newFub(onnx(21), ms())
				ids := b.ids()
				mask := b.g.AddInput("attention_mask", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "total"}}))
				x := b.embed(ids)
				cos, sin := b.caches(128, 8, 10000, one, 1)
				sum := b.op("ReduceSum", []*graph.Value{mask, b.i64(1)}, graph.IntAttr("keepdims", 0))
				seqlens := b.op("Cast", []*graph.Value{b.op("Sub", []*graph.Value{sum, b.i64s(1)})}, graph.IntAttr("to", int64(graph.Int32)))
				total := b.op("Cast", []*graph.Value{b.op("Gather", []*graph.Value{b.op("Shape", []*graph.Value{mask}), b.i64s(1)})}, graph.IntAttr("to", int64(graph.Int32)))
				for l := 0; l < 2; l++ {
					pk := b.g.AddInput(fmt.Sprintf("past_key_%d", l), graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Value: fbKV, Known: true}, {Param: "past"}, {Value: fbHD, Known: true}}))
					pv := b.g.AddInput(fmt.Sprintf("past_value_%d", l), graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Value: fbKV, Known: true}, {Param: "past"}, {Value: fbHD, Known: true}}))
					q, k, v := b.proj(x, fbHeads*fbHD), b.proj(x, fbKV*fbHD), b.proj(x, fbKV*fbHD)
					outs := b.dop("com.microsoft", "GroupQueryAttention", []*graph.Value{q, k, v, pk, pv, seqlens, total, cos, sin}, 3,
						graph.IntAttr("num_heads", fbHeads), graph.IntAttr("kv_num_heads", fbKV), graph.IntAttr("do_rotary", 1))
					x = b.op("Add", []*graph.Value{x, b.proj(outs[0], fbHidden)})
				}
				b.output(x)
				return b.m
			},
			layers: []string{"rope", "rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0, 1}, fused: true, params: map[string]any{
				"layout": "half_split", "head_dim": 16, "rotary_dim": 8, "num_heads": fbHeads, "num_kv_heads": fbKV,
				"base": 10000, "scaling": "none", "factor": 1, "max_positions": 128, "position_source": "past_length"}}},
		},
		{
			// GroupQueryAttention whose cos/sin caches an If chooses by the
			// total length (ONNX Runtime GenAI's LongRoPE models): short
			// factors up to 64 positions, long ones beyond, both scaled by
			// sqrt(1 + ln 4 / ln 64).
			name: "gqa_longrope_if_caches",
			build: func() *graph.Model {
				b := newFub(onnx(21), ms())
				ids := b.ids()
				mask := b.g.AddInput("attention_mask", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "total"}}))
				x := b.embed(ids)
				short := []float64{1, 1.02, 1.05, 1.1, 1.2, 1.4, 1.7, 2}
				long := []float64{1, 1.1, 1.3, 1.7, 2.3, 3, 3.6, 4}
				amp := math.Sqrt(1 + math.Log(4)/math.Log(64))
				cs, ss := b.caches(256, fbHD, 10000, func(k int) float64 { return short[k] }, amp)
				cl, sl := b.caches(256, fbHD, 10000, func(k int) float64 { return long[k] }, amp)
				totalI := b.op("Gather", []*graph.Value{b.op("Shape", []*graph.Value{mask}), b.i64s(1)})
				cond := b.op("Greater", []*graph.Value{totalI, b.i64s(64)})
				branch := func(name string, c, s *graph.Value) *graph.Graph {
					g := b.g.NewSubgraph(name)
					g.AddOutput(g.Op("Identity", []*graph.Value{c}, 1)[0])
					g.AddOutput(g.Op("Identity", []*graph.Value{s}, 1)[0])
					return g
				}
				sel := b.g.Op("If", []*graph.Value{cond}, 2, graph.GraphAttr("then_branch", branch("long", cl, sl)), graph.GraphAttr("else_branch", branch("short", cs, ss)))
				sum := b.op("ReduceSum", []*graph.Value{mask, b.i64(1)}, graph.IntAttr("keepdims", 0))
				seqlens := b.op("Cast", []*graph.Value{b.op("Sub", []*graph.Value{sum, b.i64s(1)})}, graph.IntAttr("to", int64(graph.Int32)))
				total := b.op("Cast", []*graph.Value{totalI}, graph.IntAttr("to", int64(graph.Int32)))
				q, k, v := b.proj(x, fbHeads*fbHD), b.proj(x, fbKV*fbHD), b.proj(x, fbKV*fbHD)
				outs := b.dop("com.microsoft", "GroupQueryAttention", []*graph.Value{q, k, v, nil, nil, seqlens, total, sel[0], sel[1]}, 3,
					graph.IntAttr("num_heads", fbHeads), graph.IntAttr("kv_num_heads", fbKV), graph.IntAttr("do_rotary", 1))
				b.output(b.op("Add", []*graph.Value{x, b.proj(outs[0], fbHidden)}))
				return b.m
			},
			layers: []string{"rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0}, fused: true, params: map[string]any{
				"layout": "half_split", "head_dim": 16, "rotary_dim": 16, "num_heads": fbHeads, "num_kv_heads": fbKV,
				"scaling": "longrope", "original_max_positions": 64, "factor": 4, "max_positions": 256,
				"attention_factor": math.Sqrt(1 + math.Log(4)/math.Log(64))},
				null: []string{"base"}, note: "chosen by an If"}},
		},
		{
			// GroupQueryAttention with packed QKV and interleaved do_rotary.
			name: "gqa_packed_interleaved",
			build: func() *graph.Model {
				b := newFub(onnx(21), ms())
				ids := b.ids()
				x := b.embed(ids)
				cos, sin := b.caches(100, fbHD, 1e6, one, 1)
				sl := b.op("Cast", []*graph.Value{b.op("Sub", []*graph.Value{b.seqLen(ids), b.i64s(1)})}, graph.IntAttr("to", int64(graph.Int32)))
				seqlens := b.op("Expand", []*graph.Value{sl, b.i64(1)})
				total := b.op("Cast", []*graph.Value{b.seqLen(ids)}, graph.IntAttr("to", int64(graph.Int32)))
				qkv := b.proj(x, (fbHeads+2*fbKV)*fbHD)
				outs := b.dop("com.microsoft", "GroupQueryAttention", []*graph.Value{qkv, nil, nil, nil, nil, seqlens, total, cos, sin}, 3,
					graph.IntAttr("num_heads", fbHeads), graph.IntAttr("kv_num_heads", fbKV), graph.IntAttr("do_rotary", 1), graph.IntAttr("rotary_interleaved", 1))
				b.output(b.op("Add", []*graph.Value{x, b.proj(outs[0], fbHidden)}))
				return b.m
			},
			layers: []string{"rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0}, fused: true, params: map[string]any{
				"layout": "interleaved", "head_dim": 16, "rotary_dim": 16, "num_heads": fbHeads, "num_kv_heads": fbKV,
				"base": 1e6, "scaling": "none", "max_positions": 100}}},
		},
		{
			// com.microsoft Attention with do_rotary: the op computes its cos
			// and sin inside; the graph gives sizes, not frequencies.
			name: "attention_do_rotary_without_caches",
			build: func() *graph.Model {
				b := newFub(onnx(17), ms())
				ids := b.ids()
				x := b.embed(ids)
				a := b.dop("com.microsoft", "Attention", []*graph.Value{x, b.weight(fbHidden, 3*fbHidden), b.weight(3 * fbHidden)}, 1,
					graph.IntAttr("num_heads", fbHeads), graph.IntAttr("do_rotary", 1), graph.IntAttr("unidirectional", 1))[0]
				b.output(b.op("Add", []*graph.Value{x, b.proj(a, fbHidden)}))
				return b.m
			},
			layers: []string{"rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0}, fused: true, params: map[string]any{
				"head_dim": 16, "rotary_dim": 16, "num_heads": fbHeads, "num_kv_heads": fbHeads},
				null: []string{"layout", "base", "scaling", "factor"}, note: "computes inside"}},
		},
		{
			// ONNX RotaryEmbedding without position_ids: caches of one row
			// per token, gathered upstream from stored tables (llama3 rule).
			name: "onnx_rotary_per_token_caches",
			build: func() *graph.Model {
				b := newFub(onnx(23))
				ids, pos := b.ids(), b.posIDs()
				x := b.embed(ids)
				// llama3: factor 8, low 1, high 4, original 128, base 10000.
				scale := func(k int) float64 {
					inv := math.Pow(10000, -2*float64(k)/fbHD)
					wl := 2 * math.Pi / inv
					switch {
					case wl < 128.0/4:
						return 1
					case wl > 128.0/1:
						return 8
					}
					sm := (128/wl - 1) / (4 - 1)
					return 1 / ((1-sm)/8 + sm)
				}
				ct, st := b.caches(512, fbHD, 10000, scale, 1)
				cos, sin := b.op("Gather", []*graph.Value{ct, pos}), b.op("Gather", []*graph.Value{st, pos})
				q, k, v := b.heads4(b.proj(x, fbHidden), fbHeads), b.heads4(b.proj(x, fbHidden), fbHeads), b.heads4(b.proj(x, fbHidden), fbHeads)
				q = b.op("RotaryEmbedding", []*graph.Value{q, cos, sin})
				k = b.op("RotaryEmbedding", []*graph.Value{k, cos, sin})
				a := b.op("Attention", []*graph.Value{q, k, v}, graph.IntAttr("is_causal", 1))
				b.output(b.op("Add", []*graph.Value{x, b.proj(b.merge3(a), fbHidden)}))
				return b.m
			},
			layers: []string{"rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0}, fused: true, params: map[string]any{
				"layout": "half_split", "head_dim": 16, "rotary_dim": 16, "num_heads": fbHeads, "num_kv_heads": fbHeads,
				"base": 10000, "scaling": "llama3", "factor": 8, "max_positions": 512},
				// Only original/low and original/high are in the frequencies.
				note: "settings of original_max_positions"}},
		},
		{
			// GroupQueryAttention without do_rotary: a NoPE block, even with
			// cos/sin caches lying around in the file.
			name: "gqa_no_rotary",
			build: func() *graph.Model {
				b := newFub(onnx(21), ms())
				ids := b.ids()
				x := b.embed(ids)
				sl := b.op("Cast", []*graph.Value{b.op("Sub", []*graph.Value{b.seqLen(ids), b.i64s(1)})}, graph.IntAttr("to", int64(graph.Int32)))
				seqlens := b.op("Expand", []*graph.Value{sl, b.i64(1)})
				total := b.op("Cast", []*graph.Value{b.seqLen(ids)}, graph.IntAttr("to", int64(graph.Int32)))
				q, k, v := b.proj(x, fbHeads*fbHD), b.proj(x, fbKV*fbHD), b.proj(x, fbKV*fbHD)
				outs := b.dop("com.microsoft", "GroupQueryAttention", []*graph.Value{q, k, v, nil, nil, seqlens, total}, 3,
					graph.IntAttr("num_heads", fbHeads), graph.IntAttr("kv_num_heads", fbKV))
				b.output(b.op("Add", []*graph.Value{x, b.proj(outs[0], fbHidden)}))
				return b.m
			},
			layers: []string{"nope"},
			want:   []wantFinding{{scheme: "nope", layers: []int{0}}},
		},
		{
			// The opset-23 Attention fed by unfused RoPE: the unfused detector
			// sees through the fused attention op.
			name: "attention23_unfused_rope",
			build: func() *graph.Model {
				b := newFub(onnx(23))
				ids, pos := b.ids(), b.posIDs()
				x := b.embed(ids)
				for l := 0; l < 2; l++ {
					q := b.ropeUnfused(b.heads4(b.proj(x, fbHeads*fbHD), fbHeads), pos, 10000)
					k := b.ropeUnfused(b.heads4(b.proj(x, fbKV*fbHD), fbKV), pos, 10000)
					v := b.heads4(b.proj(x, fbKV*fbHD), fbKV)
					a := b.op("Attention", []*graph.Value{q, k, v}, graph.IntAttr("is_causal", 1))
					x = b.op("Add", []*graph.Value{x, b.proj(b.merge3(a), fbHidden)})
				}
				b.output(x)
				return b.m
			},
			layers: []string{"rope", "rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0, 1}, fused: false, params: map[string]any{
				"layout": "half_split", "head_dim": 16, "rotary_dim": 16, "num_heads": fbHeads, "num_kv_heads": fbKV,
				"base": 10000, "scaling": "none", "factor": 1}}},
		},
		{
			// MultiHeadAttention with an attention-bias input computed upstream
			// by unfused ALiBi (slopes · (j - i) plus a causal mask).
			name: "mha_alibi_bias",
			build: func() *graph.Model {
				b := newFub(onnx(17), ms())
				ids := b.ids()
				x := b.embed(ids)
				s := b.seqLen(ids)
				r := b.op("Cast", []*graph.Value{b.op("Range", []*graph.Value{b.i64s(0), s, b.i64s(1)})}, graph.IntAttr("to", int64(graph.Float)))
				dist := b.op("Sub", []*graph.Value{b.op("Unsqueeze", []*graph.Value{r, b.i64(0)}), b.op("Unsqueeze", []*graph.Value{r, b.i64(1)})})
				slopes := b.f32([]int64{fbHeads, 1, 1}, []float32{0.25, 0.0625, 0.015625, 0.00390625})
				causal := b.op("Mul", []*graph.Value{b.op("Cast", []*graph.Value{b.op("Greater", []*graph.Value{dist, b.scalar(0)})}, graph.IntAttr("to", int64(graph.Float))), b.scalar(-1e9)})
				bias := b.op("Unsqueeze", []*graph.Value{b.op("Add", []*graph.Value{b.op("Mul", []*graph.Value{slopes, dist}), causal}), b.i64(0)})
				for l := 0; l < 2; l++ {
					q, k, v := b.proj(x, fbHidden), b.proj(x, fbHidden), b.proj(x, fbHidden)
					a := b.dop("com.microsoft", "MultiHeadAttention", []*graph.Value{q, k, v, nil, nil, bias}, 1, graph.IntAttr("num_heads", fbHeads))[0]
					x = b.op("Add", []*graph.Value{x, b.proj(a, fbHidden)})
				}
				b.output(x)
				return b.m
			},
			layers: []string{"alibi", "alibi"},
			want: []wantFinding{{scheme: "alibi", layers: []int{0, 1}, fused: false, params: map[string]any{
				"num_heads": fbHeads, "slopes": []float64{0.25, 0.0625, 0.015625, 0.00390625}, "symmetric": false, "alibi_bias_max": 8}}},
		},
		{
			// RelativePositionBias (T5 buckets) shared by two MultiHeadAttention
			// blocks (scale 1, as T5 does not scale).
			name: "mha_relative_position_bias",
			build: func() *graph.Model {
				b := newFub(onnx(17), ms())
				ids := b.ids()
				x := b.embed(ids)
				s := b.seqLen(ids)
				bias := b.dop("com.microsoft", "RelativePositionBias", []*graph.Value{b.weight(32, fbHeads), s, s}, 1,
					graph.IntAttr("max_distance", 128), graph.IntAttr("is_bidirectional", 1))[0]
				for l := 0; l < 2; l++ {
					q, k, v := b.proj(x, fbHidden), b.proj(x, fbHidden), b.proj(x, fbHidden)
					a := b.dop("com.microsoft", "MultiHeadAttention", []*graph.Value{q, k, v, nil, nil, bias}, 1, graph.IntAttr("num_heads", fbHeads), graph.FloatAttr("scale", 1))[0]
					x = b.op("Add", []*graph.Value{x, b.proj(a, fbHidden)})
				}
				b.output(x)
				return b.m
			},
			layers: []string{"t5_relative_bias", "t5_relative_bias"},
			want: []wantFinding{{scheme: "t5_relative_bias", layers: []int{0, 1}, fused: true, params: map[string]any{
				"num_buckets": 32, "max_distance": 128, "bidirectional": true, "num_heads": fbHeads, "shared_across_layers": true, "scaled_scores": false}}},
		},
		{
			// GatedRelativePositionBias (WavLM) gating a RelativePositionBias,
			// feeding the attention_bias of com.microsoft Attention.
			name: "attention_gated_relative_position_bias",
			build: func() *graph.Model {
				b := newFub(onnx(17), ms())
				ids := b.ids()
				x := b.embed(ids)
				s := b.seqLen(ids)
				rel := b.dop("com.microsoft", "RelativePositionBias", []*graph.Value{b.weight(320, fbHeads), s, s}, 1,
					graph.IntAttr("max_distance", 800), graph.IntAttr("is_bidirectional", 1))[0]
				ql := b.proj(x, fbHidden)
				gated := b.dop("com.microsoft", "GatedRelativePositionBias", []*graph.Value{ql, b.weight(fbHidden), rel, b.weight(fbHD, 8), b.weight(8), b.weight(1, fbHeads, 1, 1)}, 1,
					graph.IntAttr("num_heads", fbHeads))[0]
				a := b.dop("com.microsoft", "Attention", []*graph.Value{x, b.weight(fbHidden, 3*fbHidden), b.weight(3 * fbHidden), nil, nil, gated}, 1, graph.IntAttr("num_heads", fbHeads))[0]
				b.output(b.op("Add", []*graph.Value{x, b.proj(a, fbHidden)}))
				return b.m
			},
			layers: []string{"t5_relative_bias"},
			want: []wantFinding{{scheme: "t5_relative_bias", layers: []int{0}, fused: true, params: map[string]any{
				"num_buckets": 320, "max_distance": 800, "bidirectional": true, "num_heads": fbHeads, "shared_across_layers": false, "scaled_scores": true},
				note: "gated per token"}},
		},
		{
			// onnxpe's own ALiBiBias as the float mask of the opset-23
			// Attention, slopes of 6 heads (not a power of two).
			name: "attention23_alibibias",
			build: func() *graph.Model {
				b := newFub(onnx(23), graph.Opset{Domain: "ai.onnxpe", Version: 1})
				ids := b.ids()
				x := b.embed(ids)
				s := b.seqLen(ids)
				slopes := make([]float32, 6)
				for i := range slopes {
					slopes[i] = float32(math.Pow(2, -8*float64(i+1)/6))
				}
				bias := b.dop("ai.onnxpe", "ALiBiBias", []*graph.Value{b.f32([]int64{6}, slopes), s, s}, 1)[0]
				q, k, v := b.proj(x, 6*8), b.proj(x, 6*8), b.proj(x, 6*8)
				a := b.op("Attention", []*graph.Value{q, k, v, bias}, graph.IntAttr("q_num_heads", 6), graph.IntAttr("kv_num_heads", 6), graph.IntAttr("is_causal", 1))
				y := b.op("MatMul", []*graph.Value{a, b.weight(6*8, fbHidden)})
				b.output(b.op("Add", []*graph.Value{x, y}))
				return b.m
			},
			layers: []string{"alibi"},
			want: []wantFinding{{scheme: "alibi", layers: []int{0}, fused: true, params: map[string]any{
				"num_heads": 6, "symmetric": false, "positions": "key_offset_from_end"}}},
		},
		{
			// EmbedLayerNormalization whose position table holds exactly
			// sinusoidal rows, read by position_ids, then com.microsoft
			// Attention layers.
			name: "embedlayernorm_sinusoidal_table",
			build: func() *graph.Model {
				b := newFub(onnx(17), ms())
				ids, pos := b.ids(), b.posIDs()
				rows := 40
				tab := make([]float32, rows*fbHidden)
				for p := 0; p < rows; p++ {
					for i := 0; i < fbHidden/2; i++ {
						a := float64(p) / math.Pow(10000, 2*float64(i)/fbHidden)
						tab[p*fbHidden+2*i], tab[p*fbHidden+2*i+1] = float32(math.Sin(a)), float32(math.Cos(a))
					}
				}
				i32 := func(v *graph.Value) *graph.Value {
					return b.op("Cast", []*graph.Value{v}, graph.IntAttr("to", int64(graph.Int32)))
				}
				outs := b.dop("com.microsoft", "EmbedLayerNormalization", []*graph.Value{i32(ids), nil, b.weight(fbVocab, fbHidden), b.f32([]int64{int64(rows), fbHidden}, tab), nil,
					b.weight(fbHidden), b.weight(fbHidden), nil, i32(pos)}, 3)
				x := outs[0]
				for l := 0; l < 2; l++ {
					a := b.dop("com.microsoft", "Attention", []*graph.Value{x, b.weight(fbHidden, 3*fbHidden), b.weight(3 * fbHidden), outs[1]}, 1, graph.IntAttr("num_heads", fbHeads))[0]
					x = b.op("Add", []*graph.Value{x, b.proj(a, fbHidden)})
				}
				b.output(x)
				return b.m
			},
			layers: []string{"sinusoidal", "sinusoidal"},
			want: []wantFinding{{scheme: "sinusoidal", layers: []int{0, 1}, fused: true, params: map[string]any{
				"layout": "interleaved", "base": 10000, "dim": fbHidden, "computed": false, "max_positions": 40, "freq_denominator": "d/2", "position_offset": 0}}},
		},
		{
			// EmbedLayerNormalization with a learned table and no position_ids
			// (positions 0..S-1 by the op's contract).
			name: "embedlayernorm_learned",
			build: func() *graph.Model {
				b := newFub(onnx(17), ms())
				ids := b.ids()
				i32 := b.op("Cast", []*graph.Value{ids}, graph.IntAttr("to", int64(graph.Int32)))
				outs := b.dop("com.microsoft", "EmbedLayerNormalization", []*graph.Value{i32, nil, b.weight(fbVocab, fbHidden), b.weight(96, fbHidden), nil,
					b.weight(fbHidden), b.weight(fbHidden)}, 3)
				a := b.dop("com.microsoft", "Attention", []*graph.Value{outs[0], b.weight(fbHidden, 3*fbHidden), b.weight(3 * fbHidden)}, 1, graph.IntAttr("num_heads", fbHeads))[0]
				b.output(b.op("Add", []*graph.Value{outs[0], b.proj(a, fbHidden)}))
				return b.m
			},
			layers: []string{"learned_absolute"},
			want: []wantFinding{{scheme: "learned_absolute", layers: []int{0}, fused: true, params: map[string]any{
				"max_positions": 96, "dim": fbHidden, "position_offset": 0}}},
		},
		{
			// com.microsoft RotaryEmbedding whose caches are graph inputs: the
			// sizes come from the shapes, base and scaling are null.
			name: "ms_rotary_caches_as_inputs",
			build: func() *graph.Model {
				b := newFub(onnx(17), ms())
				ids, pos := b.ids(), b.posIDs()
				cos := b.g.AddInput("cos_cache", graph.TensorType(graph.Float, graph.Dims(300, fbHD/2)))
				sin := b.g.AddInput("sin_cache", graph.TensorType(graph.Float, graph.Dims(300, fbHD/2)))
				x := b.embed(ids)
				q, k, v := b.proj(x, fbHidden), b.proj(x, fbHidden), b.proj(x, fbHidden)
				q = b.dop("com.microsoft", "RotaryEmbedding", []*graph.Value{q, pos, cos, sin}, 1, graph.IntAttr("num_heads", fbHeads))[0]
				k = b.dop("com.microsoft", "RotaryEmbedding", []*graph.Value{k, pos, cos, sin}, 1, graph.IntAttr("num_heads", fbHeads))[0]
				a := b.dop("com.microsoft", "MultiHeadAttention", []*graph.Value{q, k, v}, 1, graph.IntAttr("num_heads", fbHeads))[0]
				b.output(b.op("Add", []*graph.Value{x, b.proj(a, fbHidden)}))
				return b.m
			},
			layers: []string{"rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0}, fused: true, params: map[string]any{
				"layout": "half_split", "head_dim": 16, "rotary_dim": 16, "num_heads": fbHeads, "num_kv_heads": fbHeads, "max_positions": 300},
				null: []string{"base", "scaling", "factor"}, note: "graph inputs"}},
		},
		{
			// FlexAttention whose score_mod adds per-head ALiBi slopes.
			name: "flexattention_alibi_score_mod",
			build: func() *graph.Model {
				b := newFub(onnx(26), graph.Opset{Domain: "ai.onnx.preview", Version: 1})
				ids := b.ids()
				x := b.embed(ids)
				q, k, v := b.heads4(b.proj(x, fbHidden), fbHeads), b.heads4(b.proj(x, fbHidden), fbHeads), b.heads4(b.proj(x, fbHidden), fbHeads)
				sm := b.g.NewSubgraph("score_mod")
				sc := sm.AddInput("scores", graph.TensorType(graph.Float, []graph.Dim{{Param: "B"}, {Param: "H"}, {Param: "L"}, {Param: "S"}}))
				c := func(name string, dims []int64, v any, dt graph.DataType) *graph.Value {
					t, _ := graph.NewTensor(name, dt, dims, v)
					return sm.AddInitializer(t)
				}
				shape := sm.Op("Shape", []*graph.Value{sc}, 1)[0]
				sLen := sm.Op("Gather", []*graph.Value{shape, c("three", nil, []int64{3}, graph.Int64)}, 1, graph.IntAttr("axis", 0))[0]
				kr := sm.Op("Cast", []*graph.Value{sm.Op("Range", []*graph.Value{c("zero", nil, []int64{0}, graph.Int64), sLen, c("onei", nil, []int64{1}, graph.Int64)}, 1)[0]}, 1, graph.IntAttr("to", int64(graph.Float)))[0]
				sl := c("slopes", []int64{fbHeads, 1, 1}, []float32{0.5, 0.25, 0.125, 0.0625}, graph.Float)
				out := sm.Op("Add", []*graph.Value{sc, sm.Op("Mul", []*graph.Value{sl, kr}, 1)[0]}, 1)[0]
				sm.AddOutput(out)
				a := b.dop("ai.onnx.preview", "FlexAttention", []*graph.Value{q, k, v}, 1, graph.GraphAttr("score_mod", sm))[0]
				b.output(b.op("Add", []*graph.Value{x, b.proj(b.merge3(a), fbHidden)}))
				return b.m
			},
			layers: []string{"alibi"},
			want: []wantFinding{{scheme: "alibi", layers: []int{0}, fused: true, params: map[string]any{
				"num_heads": fbHeads, "slopes": []float64{0.5, 0.25, 0.125, 0.0625}, "positions": "key_index"}}},
		},
	}
}

// sub is a builder of a graph nested in b's (an attribute of a node).
func (b *fub) sub(name string) *fub {
	return &fub{m: b.m, g: b.g.NewSubgraph(name), rng: b.rng, n: b.n + 1000}
}

// msRopeLayer is one layer of com.microsoft RotaryEmbedding on q and k
// feeding MultiHeadAttention.
func (b *fub) msRopeLayer(x, pos, cos, sin *graph.Value) *graph.Value {
	q, k, v := b.proj(x, fbHidden), b.proj(x, fbHidden), b.proj(x, fbHidden)
	q = b.dop("com.microsoft", "RotaryEmbedding", []*graph.Value{q, pos, cos, sin}, 1, graph.IntAttr("num_heads", fbHeads))[0]
	k = b.dop("com.microsoft", "RotaryEmbedding", []*graph.Value{k, pos, cos, sin}, 1, graph.IntAttr("num_heads", fbHeads))[0]
	a := b.dop("com.microsoft", "MultiHeadAttention", []*graph.Value{q, k, v}, 1, graph.IntAttr("num_heads", fbHeads))[0]
	return b.op("Add", []*graph.Value{x, b.proj(a, fbHidden)})
}

// subgraphCases hold their attention in graphs nested in nodes: If
// branches, a Loop body, the encoder and decoder of BeamSearch.
func subgraphCases() []fusedCase {
	return []fusedCase{
		{
			// An unfused NoPE block, then BeamSearch whose encoder carries a
			// T5 bias (RelativePositionBias) and whose decoder rotates q and k
			// with RotaryEmbedding in two layers: numbered 0, 1, 2-3.
			name: "beamsearch_encoder_decoder",
			build: func() *graph.Model {
				b := newFub(onnx(17), ms())
				ids := b.ids()
				x := b.embed(ids)
				q, k, v := b.heads4(b.proj(x, fbHidden), fbHeads), b.heads4(b.proj(x, fbHidden), fbHeads), b.heads4(b.proj(x, fbHidden), fbHeads)
				b.output(b.op("Add", []*graph.Value{x, b.proj(b.merge3(b.softmaxAttention(q, k, v)), fbHidden)}))

				enc := b.sub("encoder")
				eids := enc.g.AddInput("encoder_input_ids", graph.TensorType(graph.Int32, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
				ex := enc.embed(eids)
				es := enc.seqLen(eids)
				bias := enc.dop("com.microsoft", "RelativePositionBias", []*graph.Value{enc.weight(32, fbHeads), es, es}, 1,
					graph.IntAttr("max_distance", 128), graph.IntAttr("is_bidirectional", 1))[0]
				eq, ek, ev := enc.proj(ex, fbHidden), enc.proj(ex, fbHidden), enc.proj(ex, fbHidden)
				ea := enc.dop("com.microsoft", "MultiHeadAttention", []*graph.Value{eq, ek, ev, nil, nil, bias}, 1, graph.IntAttr("num_heads", fbHeads), graph.FloatAttr("scale", 1))[0]
				enc.g.AddOutput(enc.op("Add", []*graph.Value{ex, enc.proj(ea, fbHidden)}))

				dec := b.sub("decoder")
				dids := dec.g.AddInput("input_ids", graph.TensorType(graph.Int32, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
				dpos := dec.g.AddInput("position_ids", graph.TensorType(graph.Int32, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
				dx := dec.embed(dids)
				cos, sin := dec.caches(512, fbHD, 10000, one, 1)
				for l := 0; l < 2; l++ {
					dx = dec.msRopeLayer(dx, dpos, cos, sin)
				}
				dec.g.AddOutput(dec.op("MatMul", []*graph.Value{dx, dec.weight(fbHidden, fbVocab)}))

				i32 := b.op("Cast", []*graph.Value{ids}, graph.IntAttr("to", int64(graph.Int32)))
				ml, _ := graph.NewTensor("max_length", graph.Int32, []int64{1}, []int32{20})
				gen := b.dop("com.microsoft", "BeamSearch", []*graph.Value{i32, b.g.AddInitializer(ml)}, 1,
					graph.GraphAttr("decoder", dec.g), graph.GraphAttr("encoder", enc.g), graph.IntAttr("model_type", 1),
					graph.IntAttr("eos_token_id", 2), graph.IntAttr("pad_token_id", 0))[0]
				b.g.AddOutput(gen)
				return b.m
			},
			layers: []string{"nope", "t5_relative_bias", "rope", "rope"},
			want: []wantFinding{
				{scheme: "nope", layers: []int{0}},
				{scheme: "t5_relative_bias", layers: []int{1}, fused: true, subgraph: "BeamSearch/encoder", params: map[string]any{
					"num_buckets": 32, "max_distance": 128, "bidirectional": true, "num_heads": fbHeads, "scaled_scores": false}},
				{scheme: "rope", layers: []int{2, 3}, fused: true, subgraph: "BeamSearch/decoder", params: map[string]any{
					"layout": "half_split", "head_dim": 16, "rotary_dim": 16, "num_heads": fbHeads, "num_kv_heads": fbHeads,
					"base": 10000, "scaling": "none", "max_positions": 512}},
			},
		},
		{
			// An If choosing between two layers by the sequence length: a
			// short cache (base 10000) and a long one (linear factor 8), as
			// builders of long-context models do.
			name: "if_branches_rotary",
			build: func() *graph.Model {
				b := newFub(onnx(17), ms())
				ids, pos := b.ids(), b.posIDs()
				x := b.embed(ids)
				cond := b.op("Greater", []*graph.Value{b.seqLen(ids), b.i64s(32)})
				then, els := b.sub("then"), b.sub("else")
				cs, ss := then.caches(64, fbHD, 10000, func(int) float64 { return 8 }, 1)
				then.g.AddOutput(then.msRopeLayer(x, pos, cs, ss))
				cl, sl := els.caches(32, fbHD, 10000, one, 1)
				els.g.AddOutput(els.msRopeLayer(x, pos, cl, sl))
				y := b.op("If", []*graph.Value{cond}, graph.GraphAttr("then_branch", then.g), graph.GraphAttr("else_branch", els.g))
				b.output(y)
				return b.m
			},
			layers: []string{"rope", "rope"},
			want: []wantFinding{
				{scheme: "rope", layers: []int{0}, fused: true, params: map[string]any{"base": 10000, "scaling": "linear", "factor": 8, "max_positions": 64}},
				{scheme: "rope", layers: []int{1}, fused: true, params: map[string]any{"base": 10000, "scaling": "none", "max_positions": 32}},
			},
		},
		{
			// A Loop running one decoder layer per iteration over the hidden
			// state it carries, with unfused RoPE from the outer position_ids.
			name: "loop_body_layers",
			build: func() *graph.Model {
				b := newFub(onnx(17))
				ids, pos := b.ids(), b.posIDs()
				x := b.embed(ids)
				body := b.sub("body")
				body.g.AddInput("iter", graph.TensorType(graph.Int64, nil))
				cin := body.g.AddInput("cond_in", graph.TensorType(graph.Bool, nil))
				xin := body.g.AddInput("x_in", graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: fbHidden, Known: true}}))
				q := body.ropeUnfused(body.heads4(body.proj(xin, fbHidden), fbHeads), pos, 10000)
				k := body.ropeUnfused(body.heads4(body.proj(xin, fbHidden), fbHeads), pos, 10000)
				v := body.heads4(body.proj(xin, fbHidden), fbHeads)
				xo := body.op("Add", []*graph.Value{xin, body.proj(body.merge3(body.softmaxAttention(q, k, v)), fbHidden)})
				body.g.AddOutput(body.op("Identity", []*graph.Value{cin}))
				body.g.AddOutput(xo)
				tc, _ := graph.NewTensor("trips", graph.Int64, nil, []int64{3})
				ct, _ := graph.NewTensor("cond", graph.Bool, nil, []bool{true})
				y := b.op("Loop", []*graph.Value{b.g.AddInitializer(tc), b.g.AddInitializer(ct), x}, graph.GraphAttr("body", body.g))
				b.output(y)
				return b.m
			},
			layers: []string{"rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0}, fused: false, params: map[string]any{
				"layout": "half_split", "head_dim": 16, "num_heads": fbHeads, "base": 10000, "scaling": "none"}}},
		},
	}
}

// TestSubgraphForms audits models whose attention lives in nested graphs.
func TestSubgraphForms(t *testing.T) {
	s := schema(t)
	for _, tc := range subgraphCases() {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx, err := audit.AuditModel(tc.build(), tc.name, passes.Options{Trace: true})
			if err != nil {
				t.Fatal(err)
			}
			validate(t, s, r)
			checkReport(t, r, tc.layers, tc.want)
			if t.Failed() || os.Getenv("FUSED_SHOW") != "" {
				b, _ := json.MarshalIndent(r, "", " ")
				t.Logf("report: %s", b)
				for _, m := range ctx.Trace() {
					t.Logf("trace: %s at %s: %s", m.Rule, m.At, m.Reason)
				}
			}
		})
	}
}

// TestFusedForms audits every fused deployment form built in Go.
func TestFusedForms(t *testing.T) {
	s := schema(t)
	for _, tc := range fusedCases() {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx, err := audit.AuditModel(tc.build(), tc.name, passes.Options{Trace: true})
			if err != nil {
				t.Fatal(err)
			}
			validate(t, s, r)
			checkReport(t, r, tc.layers, tc.want)
			if t.Failed() || os.Getenv("FUSED_SHOW") != "" {
				b, _ := json.MarshalIndent(r, "", " ")
				t.Logf("report: %s", b)
				for _, m := range ctx.Trace() {
					t.Logf("trace: %s at %s: %s", m.Rule, m.At, m.Reason)
				}
			}
		})
	}
}

// checkReport compares the layers and findings of a report with what a
// test wants: every wanted finding present with its layers, fused flag,
// params and null params; no other findings.
func checkReport(t *testing.T, r *passes.Report, layers []string, want []wantFinding) {
	t.Helper()
	var got []string
	for _, l := range r.Layers {
		got = append(got, l.Scheme)
	}
	if strings.Join(got, ",") != strings.Join(layers, ",") {
		t.Errorf("layers %v, want %v", got, layers)
	}
	if len(r.Findings) != len(want) {
		t.Errorf("%d findings, want %d", len(r.Findings), len(want))
	}
	for _, wf := range want {
		var f *passes.Finding
		for _, g := range r.Findings {
			if g.Scheme == wf.scheme && fmt.Sprint(g.Layers) == fmt.Sprint(wf.layers) && g.Subgraph == wf.subgraph {
				f = g
			}
		}
		if f == nil {
			t.Errorf("no %s finding for layers %v in %q", wf.scheme, wf.layers, wf.subgraph)
			continue
		}
		if f.Fused != wf.fused {
			t.Errorf("%s %v: fused %v, want %v", wf.scheme, wf.layers, f.Fused, wf.fused)
		}
		gp := jsonParams(f)
		keys := make([]string, 0, len(wf.params))
		for k := range wf.params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			w := normJSON(wf.params[k])
			if !closeEnough(w, gp[k]) {
				t.Errorf("%s %v: %s = %v, want %v", wf.scheme, wf.layers, k, gp[k], wf.params[k])
			}
		}
		for _, k := range wf.null {
			if v, ok := gp[k]; !ok || v != nil {
				t.Errorf("%s %v: %s = %v, want null", wf.scheme, wf.layers, k, v)
			}
		}
		if wf.note != "" && !strings.Contains(strings.Join(f.Notes, "\n"), wf.note) {
			t.Errorf("%s %v: no note saying %q in %q", wf.scheme, wf.layers, wf.note, f.Notes)
		}
	}
}

// normJSON turns a Go value into what encoding/json decodes it to.
func normJSON(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// TestDeployForms audits the deployment forms testmodels builds (ONNX
// Runtime GenAI's GroupQueryAttention with do_rotary, its int4 variant,
// RotaryEmbedding + MultiHeadAttention, EmbedLayerNormalization +
// Attention, opset-24 Attention with TensorScatter) and compares with
// their truth: every finding fused, every truth param.
func TestDeployForms(t *testing.T) {
	s := schema(t)
	if len(testmodels.DeployForms) < 5 {
		t.Fatalf("only %d deployment forms", len(testmodels.DeployForms))
	}
	type deployCase struct {
		form  testmodels.DeployForm
		dtype graph.DataType
	}
	var cases []deployCase
	for _, form := range testmodels.DeployForms {
		cases = append(cases, deployCase{form, graph.Float})
	}
	// GenAI's fp16 (and bf16) builds: GroupQueryAttention with do_rotary
	// on float16 q/k/v and past caches, float16 cos/sin caches.
	cases = append(cases, deployCase{testmodels.FormGenAIGQA, graph.Float16}, deployCase{testmodels.FormGenAIGQA, graph.BFloat16})
	// GenAI's fp16 int4 build: MatMulNBits on float16 activations with
	// float16 scales.
	cases = append(cases, deployCase{testmodels.FormGenAIInt4, graph.Float16})
	for _, dc := range cases {
		form := dc.form
		name := string(form)
		if dc.dtype != graph.Float {
			name += "_" + dc.dtype.String()
		}
		t.Run(name, func(t *testing.T) {
			cfg := testmodels.DefaultDeploy
			cfg.DType = dc.dtype
			truth := testmodels.DeployTruth(form, cfg)
			m := testmodels.BuildDeploy(form, cfg)
			if dc.dtype != graph.Float { // the caches, past inputs and weights are half
				for _, v := range append(m.Graph.Initializers, m.Graph.Inputs...) {
					dt := v.Type.ElemType()
					if v.Const != nil {
						dt = v.Const.DataType()
					}
					if dt.IsFloat() && dt != dc.dtype {
						t.Fatalf("%s is %v, want %v", v.Name, dt, dc.dtype)
					}
				}
			}
			r, ctx, err := audit.AuditModel(m, name, passes.Options{Trace: true})
			if err != nil {
				t.Fatal(err)
			}
			validate(t, s, r)
			if fmt.Sprint(r.Schemes) != fmt.Sprint(truth.Schemes) {
				t.Errorf("schemes %v, want %v", r.Schemes, truth.Schemes)
			}
			if len(r.Layers) != len(truth.Layers) {
				t.Errorf("%d layers, want %d", len(r.Layers), len(truth.Layers))
			}
			compareTruth(t, string(form), truth, r, implemented)
			for _, f := range r.Findings {
				if !f.Fused {
					t.Errorf("%s finding %v is not fused", f.Scheme, f.Layers)
				}
			}
			if t.Failed() || os.Getenv("FUSED_SHOW") != "" {
				b, _ := json.MarshalIndent(r, "", " ")
				t.Logf("report: %s", b)
				for _, m := range ctx.Trace() {
					t.Logf("trace: %s at %s: %s", m.Rule, m.At, m.Reason)
				}
			}
		})
	}
}

// TestFusedCachesInAbsentExternalData: a model whose cos/sin caches (and
// weights) are in an external-data file that is absent still audits: the
// sizes from the shapes, base and scaling null with a note.
func TestFusedCachesInAbsentExternalData(t *testing.T) {
	var tc fusedCase
	for _, c := range fusedCases() {
		if c.name == "ms_rotary_infer_attention23" {
			tc = c
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "model.onnx")
	if err := tc.build().Save(p, graph.SaveOptions{External: graph.ExternalizeLarge, Threshold: 1024}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p + ".data"); err != nil {
		t.Fatal(err)
	}
	m, err := graph.LoadWith(p, graph.LoadOptions{AllowMissingExternal: true})
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := audit.AuditModel(m, "absent", passes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	validate(t, schema(t), r)
	checkReport(t, r, []string{"rope", "rope"}, []wantFinding{{scheme: "rope", layers: []int{0, 1}, fused: true,
		params: map[string]any{"layout": "half_split", "head_dim": 16, "rotary_dim": 16, "num_heads": fbHeads, "num_kv_heads": fbKV, "max_positions": 256},
		null:   []string{"base", "scaling", "factor"}, note: "external data"}})
}
