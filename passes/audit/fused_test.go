package audit_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/testmodels"
)

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

// fusedCases are the fused deployment forms the audit must read.
func fusedCases() []fusedCase {
	return []fusedCase{
		{
			// com.microsoft RotaryEmbedding on 3-D q and k with num_heads = 0
			// and rotary_embedding_dim = 0 (sizes from the cache width), linear
			// scaling in the caches, feeding the opset-23 Attention (GQA).
			name: "ms_rotary_infer_attention23",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(23), schemetest.MS())
				ids, pos := b.IDs(), b.PosIDs()
				x := b.Embed(ids)
				cos, sin := b.Caches(256, schemetest.HeadDim, 10000, func(int) float64 { return 4 }, 1)
				for l := 0; l < 2; l++ {
					q, k, v := b.Proj(x, schemetest.Heads*schemetest.HeadDim), b.Proj(x, schemetest.KVHeads*schemetest.HeadDim), b.Proj(x, schemetest.KVHeads*schemetest.HeadDim)
					q = b.Dop("com.microsoft", "RotaryEmbedding", []*graph.Value{q, pos, cos, sin}, 1)[0]
					k = b.Dop("com.microsoft", "RotaryEmbedding", []*graph.Value{k, pos, cos, sin}, 1)[0]
					a := b.Op("Attention", []*graph.Value{q, k, v}, graph.IntAttr("q_num_heads", schemetest.Heads), graph.IntAttr("kv_num_heads", schemetest.KVHeads), graph.IntAttr("is_causal", 1))
					x = b.Op("Add", []*graph.Value{x, b.Proj(a, schemetest.Hidden)})
				}
				b.Output(x)
				return b.M
			},
			layers: []string{"rope", "rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0, 1}, fused: true, params: map[string]any{
				"layout": "half_split", "head_dim": 16, "rotary_dim": 16, "num_heads": schemetest.Heads, "num_kv_heads": schemetest.KVHeads,
				"base": 10000, "scaling": "linear", "factor": 4, "max_positions": 256}}},
		},
		{
			// ONNX RotaryEmbedding (opset 23) on 4-D q and k, interleaved,
			// num_heads = 0 and rotary_embedding_dim = 0, position_ids given;
			// base 500000; MultiHeadAttention reads them back in 3-D.
			name: "onnx_rotary_infer_mha",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(23), schemetest.MS())
				ids, pos := b.IDs(), b.PosIDs()
				x := b.Embed(ids)
				cos, sin := b.Caches(64, schemetest.HeadDim, 500000, schemetest.One, 1)
				q, k, v := b.Proj(x, schemetest.Heads*schemetest.HeadDim), b.Proj(x, schemetest.Heads*schemetest.HeadDim), b.Proj(x, schemetest.Heads*schemetest.HeadDim)
				rot := func(t *graph.Value) *graph.Value {
					return b.Op("RotaryEmbedding", []*graph.Value{b.Heads4(t, schemetest.Heads), cos, sin, pos}, graph.IntAttr("interleaved", 1))
				}
				q, k = b.Merge3(rot(q)), b.Merge3(rot(k))
				a := b.Dop("com.microsoft", "MultiHeadAttention", []*graph.Value{q, k, v}, 1, graph.IntAttr("num_heads", schemetest.Heads), graph.IntAttr("unidirectional", 1))[0]
				b.Output(b.Op("Add", []*graph.Value{x, b.Proj(a, schemetest.Hidden)}))
				return b.M
			},
			layers: []string{"rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0}, fused: true, params: map[string]any{
				"layout": "interleaved", "head_dim": 16, "rotary_dim": 16, "num_heads": schemetest.Heads, "num_kv_heads": schemetest.Heads,
				"base": 500000, "scaling": "none", "factor": 1, "max_positions": 64}}},
		},
		{
			// GroupQueryAttention with do_rotary and cos/sin caches (ONNX
			// Runtime GenAI), partial rotary (8 of 16), no position_ids: the
			// positions continue the KV cache.
			name: "gqa_do_rotary",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(21), schemetest.MS())
				ids := b.IDs()
				mask := b.G.AddInput("attention_mask", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "total"}}))
				x := b.Embed(ids)
				cos, sin := b.Caches(128, 8, 10000, schemetest.One, 1)
				sum := b.Op("ReduceSum", []*graph.Value{mask, b.I64(1)}, graph.IntAttr("keepdims", 0))
				seqlens := b.Op("Cast", []*graph.Value{b.Op("Sub", []*graph.Value{sum, b.I64s(1)})}, graph.IntAttr("to", int64(graph.Int32)))
				total := b.Op("Cast", []*graph.Value{b.Op("Gather", []*graph.Value{b.Op("Shape", []*graph.Value{mask}), b.I64s(1)})}, graph.IntAttr("to", int64(graph.Int32)))
				for l := 0; l < 2; l++ {
					pk := b.G.AddInput(fmt.Sprintf("past_key_%d", l), graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Value: schemetest.KVHeads, Known: true}, {Param: "past"}, {Value: schemetest.HeadDim, Known: true}}))
					pv := b.G.AddInput(fmt.Sprintf("past_value_%d", l), graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Value: schemetest.KVHeads, Known: true}, {Param: "past"}, {Value: schemetest.HeadDim, Known: true}}))
					q, k, v := b.Proj(x, schemetest.Heads*schemetest.HeadDim), b.Proj(x, schemetest.KVHeads*schemetest.HeadDim), b.Proj(x, schemetest.KVHeads*schemetest.HeadDim)
					outs := b.Dop("com.microsoft", "GroupQueryAttention", []*graph.Value{q, k, v, pk, pv, seqlens, total, cos, sin}, 3,
						graph.IntAttr("num_heads", schemetest.Heads), graph.IntAttr("kv_num_heads", schemetest.KVHeads), graph.IntAttr("do_rotary", 1))
					x = b.Op("Add", []*graph.Value{x, b.Proj(outs[0], schemetest.Hidden)})
				}
				b.Output(x)
				return b.M
			},
			layers: []string{"rope", "rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0, 1}, fused: true, params: map[string]any{
				"layout": "half_split", "head_dim": 16, "rotary_dim": 8, "num_heads": schemetest.Heads, "num_kv_heads": schemetest.KVHeads,
				"base": 10000, "scaling": "none", "factor": 1, "max_positions": 128, "position_source": "past_length"}}},
		},
		{
			// GroupQueryAttention whose cos/sin caches an If chooses by the
			// total length (ONNX Runtime GenAI's LongRoPE models): short
			// factors up to 64 positions, long ones beyond, both scaled by
			// sqrt(1 + ln 4 / ln 64).
			name: "gqa_longrope_if_caches",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(21), schemetest.MS())
				ids := b.IDs()
				mask := b.G.AddInput("attention_mask", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "total"}}))
				x := b.Embed(ids)
				short := []float64{1, 1.02, 1.05, 1.1, 1.2, 1.4, 1.7, 2}
				long := []float64{1, 1.1, 1.3, 1.7, 2.3, 3, 3.6, 4}
				amp := math.Sqrt(1 + math.Log(4)/math.Log(64))
				cs, ss := b.Caches(256, schemetest.HeadDim, 10000, func(k int) float64 { return short[k] }, amp)
				cl, sl := b.Caches(256, schemetest.HeadDim, 10000, func(k int) float64 { return long[k] }, amp)
				totalI := b.Op("Gather", []*graph.Value{b.Op("Shape", []*graph.Value{mask}), b.I64s(1)})
				cond := b.Op("Greater", []*graph.Value{totalI, b.I64s(64)})
				branch := func(name string, c, s *graph.Value) *graph.Graph {
					g := b.G.NewSubgraph(name)
					g.AddOutput(g.Op("Identity", []*graph.Value{c}, 1)[0])
					g.AddOutput(g.Op("Identity", []*graph.Value{s}, 1)[0])
					return g
				}
				sel := b.G.Op("If", []*graph.Value{cond}, 2, graph.GraphAttr("then_branch", branch("long", cl, sl)), graph.GraphAttr("else_branch", branch("short", cs, ss)))
				sum := b.Op("ReduceSum", []*graph.Value{mask, b.I64(1)}, graph.IntAttr("keepdims", 0))
				seqlens := b.Op("Cast", []*graph.Value{b.Op("Sub", []*graph.Value{sum, b.I64s(1)})}, graph.IntAttr("to", int64(graph.Int32)))
				total := b.Op("Cast", []*graph.Value{totalI}, graph.IntAttr("to", int64(graph.Int32)))
				q, k, v := b.Proj(x, schemetest.Heads*schemetest.HeadDim), b.Proj(x, schemetest.KVHeads*schemetest.HeadDim), b.Proj(x, schemetest.KVHeads*schemetest.HeadDim)
				outs := b.Dop("com.microsoft", "GroupQueryAttention", []*graph.Value{q, k, v, nil, nil, seqlens, total, sel[0], sel[1]}, 3,
					graph.IntAttr("num_heads", schemetest.Heads), graph.IntAttr("kv_num_heads", schemetest.KVHeads), graph.IntAttr("do_rotary", 1))
				b.Output(b.Op("Add", []*graph.Value{x, b.Proj(outs[0], schemetest.Hidden)}))
				return b.M
			},
			layers: []string{"rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0}, fused: true, params: map[string]any{
				"layout": "half_split", "head_dim": 16, "rotary_dim": 16, "num_heads": schemetest.Heads, "num_kv_heads": schemetest.KVHeads,
				"scaling": "longrope", "original_max_positions": 64, "factor": 4, "max_positions": 256,
				"attention_factor": math.Sqrt(1 + math.Log(4)/math.Log(64))},
				null: []string{"base"}, note: "chosen by an If"}},
		},
		{
			// GroupQueryAttention with packed QKV and interleaved do_rotary.
			name: "gqa_packed_interleaved",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(21), schemetest.MS())
				ids := b.IDs()
				x := b.Embed(ids)
				cos, sin := b.Caches(100, schemetest.HeadDim, 1e6, schemetest.One, 1)
				sl := b.Op("Cast", []*graph.Value{b.Op("Sub", []*graph.Value{b.SeqLen(ids), b.I64s(1)})}, graph.IntAttr("to", int64(graph.Int32)))
				seqlens := b.Op("Expand", []*graph.Value{sl, b.I64(1)})
				total := b.Op("Cast", []*graph.Value{b.SeqLen(ids)}, graph.IntAttr("to", int64(graph.Int32)))
				qkv := b.Proj(x, (schemetest.Heads+2*schemetest.KVHeads)*schemetest.HeadDim)
				outs := b.Dop("com.microsoft", "GroupQueryAttention", []*graph.Value{qkv, nil, nil, nil, nil, seqlens, total, cos, sin}, 3,
					graph.IntAttr("num_heads", schemetest.Heads), graph.IntAttr("kv_num_heads", schemetest.KVHeads), graph.IntAttr("do_rotary", 1), graph.IntAttr("rotary_interleaved", 1))
				b.Output(b.Op("Add", []*graph.Value{x, b.Proj(outs[0], schemetest.Hidden)}))
				return b.M
			},
			layers: []string{"rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0}, fused: true, params: map[string]any{
				"layout": "interleaved", "head_dim": 16, "rotary_dim": 16, "num_heads": schemetest.Heads, "num_kv_heads": schemetest.KVHeads,
				"base": 1e6, "scaling": "none", "max_positions": 100}}},
		},
		{
			// com.microsoft Attention with do_rotary: the op computes its cos
			// and sin inside; the graph gives sizes, not frequencies.
			name: "attention_do_rotary_without_caches",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(17), schemetest.MS())
				ids := b.IDs()
				x := b.Embed(ids)
				a := b.Dop("com.microsoft", "Attention", []*graph.Value{x, b.Weight(schemetest.Hidden, 3*schemetest.Hidden), b.Weight(3 * schemetest.Hidden)}, 1,
					graph.IntAttr("num_heads", schemetest.Heads), graph.IntAttr("do_rotary", 1), graph.IntAttr("unidirectional", 1))[0]
				b.Output(b.Op("Add", []*graph.Value{x, b.Proj(a, schemetest.Hidden)}))
				return b.M
			},
			layers: []string{"rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0}, fused: true, params: map[string]any{
				"head_dim": 16, "rotary_dim": 16, "num_heads": schemetest.Heads, "num_kv_heads": schemetest.Heads},
				null: []string{"layout", "base", "scaling", "factor"}, note: "computes inside"}},
		},
		{
			// ONNX RotaryEmbedding without position_ids: caches of one row
			// per token, gathered upstream from stored tables (llama3 rule).
			name: "onnx_rotary_per_token_caches",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(23))
				ids, pos := b.IDs(), b.PosIDs()
				x := b.Embed(ids)
				// llama3: factor 8, low 1, high 4, original 128, base 10000.
				scale := func(k int) float64 {
					inv := math.Pow(10000, -2*float64(k)/schemetest.HeadDim)
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
				ct, st := b.Caches(512, schemetest.HeadDim, 10000, scale, 1)
				cos, sin := b.Op("Gather", []*graph.Value{ct, pos}), b.Op("Gather", []*graph.Value{st, pos})
				q, k, v := b.Heads4(b.Proj(x, schemetest.Hidden), schemetest.Heads), b.Heads4(b.Proj(x, schemetest.Hidden), schemetest.Heads), b.Heads4(b.Proj(x, schemetest.Hidden), schemetest.Heads)
				q = b.Op("RotaryEmbedding", []*graph.Value{q, cos, sin})
				k = b.Op("RotaryEmbedding", []*graph.Value{k, cos, sin})
				a := b.Op("Attention", []*graph.Value{q, k, v}, graph.IntAttr("is_causal", 1))
				b.Output(b.Op("Add", []*graph.Value{x, b.Proj(b.Merge3(a), schemetest.Hidden)}))
				return b.M
			},
			layers: []string{"rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0}, fused: true, params: map[string]any{
				"layout": "half_split", "head_dim": 16, "rotary_dim": 16, "num_heads": schemetest.Heads, "num_kv_heads": schemetest.Heads,
				"base": 10000, "scaling": "llama3", "factor": 8, "max_positions": 512},
				// Only original/low and original/high are in the frequencies.
				note: "so the graph fixes none of them"}},
		},
		{
			// GroupQueryAttention without do_rotary: a NoPE block, even with
			// cos/sin caches lying around in the file.
			name: "gqa_no_rotary",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(21), schemetest.MS())
				ids := b.IDs()
				x := b.Embed(ids)
				sl := b.Op("Cast", []*graph.Value{b.Op("Sub", []*graph.Value{b.SeqLen(ids), b.I64s(1)})}, graph.IntAttr("to", int64(graph.Int32)))
				seqlens := b.Op("Expand", []*graph.Value{sl, b.I64(1)})
				total := b.Op("Cast", []*graph.Value{b.SeqLen(ids)}, graph.IntAttr("to", int64(graph.Int32)))
				q, k, v := b.Proj(x, schemetest.Heads*schemetest.HeadDim), b.Proj(x, schemetest.KVHeads*schemetest.HeadDim), b.Proj(x, schemetest.KVHeads*schemetest.HeadDim)
				outs := b.Dop("com.microsoft", "GroupQueryAttention", []*graph.Value{q, k, v, nil, nil, seqlens, total}, 3,
					graph.IntAttr("num_heads", schemetest.Heads), graph.IntAttr("kv_num_heads", schemetest.KVHeads))
				b.Output(b.Op("Add", []*graph.Value{x, b.Proj(outs[0], schemetest.Hidden)}))
				return b.M
			},
			layers: []string{"nope"},
			want:   []wantFinding{{scheme: "nope", layers: []int{0}}},
		},
		{
			// The opset-23 Attention fed by unfused RoPE: the unfused detector
			// sees through the fused attention op.
			name: "attention23_unfused_rope",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(23))
				ids, pos := b.IDs(), b.PosIDs()
				x := b.Embed(ids)
				for l := 0; l < 2; l++ {
					q := b.RopeUnfused(b.Heads4(b.Proj(x, schemetest.Heads*schemetest.HeadDim), schemetest.Heads), pos, 10000)
					k := b.RopeUnfused(b.Heads4(b.Proj(x, schemetest.KVHeads*schemetest.HeadDim), schemetest.KVHeads), pos, 10000)
					v := b.Heads4(b.Proj(x, schemetest.KVHeads*schemetest.HeadDim), schemetest.KVHeads)
					a := b.Op("Attention", []*graph.Value{q, k, v}, graph.IntAttr("is_causal", 1))
					x = b.Op("Add", []*graph.Value{x, b.Proj(b.Merge3(a), schemetest.Hidden)})
				}
				b.Output(x)
				return b.M
			},
			layers: []string{"rope", "rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0, 1}, fused: false, params: map[string]any{
				"layout": "half_split", "head_dim": 16, "rotary_dim": 16, "num_heads": schemetest.Heads, "num_kv_heads": schemetest.KVHeads,
				"base": 10000, "scaling": "none", "factor": 1}}},
		},
		{
			// MultiHeadAttention with an attention-bias input computed upstream
			// by unfused ALiBi (slopes · (j - i) plus a causal mask): fused,
			// the op applies the bias.
			name: "mha_alibi_bias",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(17), schemetest.MS())
				ids := b.IDs()
				x := b.Embed(ids)
				s := b.SeqLen(ids)
				r := b.Op("Cast", []*graph.Value{b.Op("Range", []*graph.Value{b.I64s(0), s, b.I64s(1)})}, graph.IntAttr("to", int64(graph.Float)))
				dist := b.Op("Sub", []*graph.Value{b.Op("Unsqueeze", []*graph.Value{r, b.I64(0)}), b.Op("Unsqueeze", []*graph.Value{r, b.I64(1)})})
				slopes := b.F32([]int64{schemetest.Heads, 1, 1}, []float32{0.25, 0.0625, 0.015625, 0.00390625})
				causal := b.Op("Mul", []*graph.Value{b.Op("Cast", []*graph.Value{b.Op("Greater", []*graph.Value{dist, b.Scalar(0)})}, graph.IntAttr("to", int64(graph.Float))), b.Scalar(-1e9)})
				bias := b.Op("Unsqueeze", []*graph.Value{b.Op("Add", []*graph.Value{b.Op("Mul", []*graph.Value{slopes, dist}), causal}), b.I64(0)})
				for l := 0; l < 2; l++ {
					q, k, v := b.Proj(x, schemetest.Hidden), b.Proj(x, schemetest.Hidden), b.Proj(x, schemetest.Hidden)
					a := b.Dop("com.microsoft", "MultiHeadAttention", []*graph.Value{q, k, v, nil, nil, bias}, 1, graph.IntAttr("num_heads", schemetest.Heads))[0]
					x = b.Op("Add", []*graph.Value{x, b.Proj(a, schemetest.Hidden)})
				}
				b.Output(x)
				return b.M
			},
			layers: []string{"alibi", "alibi"},
			want: []wantFinding{{scheme: "alibi", layers: []int{0, 1}, fused: true, params: map[string]any{
				"num_heads": schemetest.Heads, "slopes": []float64{0.25, 0.0625, 0.015625, 0.00390625}, "symmetric": false, "alibi_bias_max": 8}}},
		},
		{
			// RelativePositionBias (T5 buckets) shared by two MultiHeadAttention
			// blocks (scale 1, as T5 does not scale).
			name: "mha_relative_position_bias",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(17), schemetest.MS())
				ids := b.IDs()
				x := b.Embed(ids)
				s := b.SeqLen(ids)
				bias := b.Dop("com.microsoft", "RelativePositionBias", []*graph.Value{b.Weight(32, schemetest.Heads), s, s}, 1,
					graph.IntAttr("max_distance", 128), graph.IntAttr("is_bidirectional", 1))[0]
				for l := 0; l < 2; l++ {
					q, k, v := b.Proj(x, schemetest.Hidden), b.Proj(x, schemetest.Hidden), b.Proj(x, schemetest.Hidden)
					a := b.Dop("com.microsoft", "MultiHeadAttention", []*graph.Value{q, k, v, nil, nil, bias}, 1, graph.IntAttr("num_heads", schemetest.Heads), graph.FloatAttr("scale", 1))[0]
					x = b.Op("Add", []*graph.Value{x, b.Proj(a, schemetest.Hidden)})
				}
				b.Output(x)
				return b.M
			},
			layers: []string{"t5_relative_bias", "t5_relative_bias"},
			want: []wantFinding{{scheme: "t5_relative_bias", layers: []int{0, 1}, fused: true, params: map[string]any{
				"num_buckets": 32, "max_distance": 128, "bidirectional": true, "num_heads": schemetest.Heads, "shared_across_layers": true, "scaled_scores": false}}},
		},
		{
			// GatedRelativePositionBias (WavLM) gating a RelativePositionBias,
			// feeding the attention_bias of com.microsoft Attention.
			name: "attention_gated_relative_position_bias",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(17), schemetest.MS())
				ids := b.IDs()
				x := b.Embed(ids)
				s := b.SeqLen(ids)
				rel := b.Dop("com.microsoft", "RelativePositionBias", []*graph.Value{b.Weight(320, schemetest.Heads), s, s}, 1,
					graph.IntAttr("max_distance", 800), graph.IntAttr("is_bidirectional", 1))[0]
				ql := b.Proj(x, schemetest.Hidden)
				gated := b.Dop("com.microsoft", "GatedRelativePositionBias", []*graph.Value{ql, b.Weight(schemetest.Hidden), rel, b.Weight(schemetest.HeadDim, 8), b.Weight(8), b.Weight(1, schemetest.Heads, 1, 1)}, 1,
					graph.IntAttr("num_heads", schemetest.Heads))[0]
				a := b.Dop("com.microsoft", "Attention", []*graph.Value{x, b.Weight(schemetest.Hidden, 3*schemetest.Hidden), b.Weight(3 * schemetest.Hidden), nil, nil, gated}, 1, graph.IntAttr("num_heads", schemetest.Heads))[0]
				b.Output(b.Op("Add", []*graph.Value{x, b.Proj(a, schemetest.Hidden)}))
				return b.M
			},
			layers: []string{"t5_relative_bias"},
			want: []wantFinding{{scheme: "t5_relative_bias", layers: []int{0}, fused: true, params: map[string]any{
				"num_buckets": 320, "max_distance": 800, "bidirectional": true, "num_heads": schemetest.Heads, "shared_across_layers": false, "scaled_scores": true},
				note: "gated per token"}},
		},
		{
			// onnxpe's own ALiBiBias as the float mask of the opset-23
			// Attention, slopes of 6 heads (not a power of two).
			name: "attention23_alibibias",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(23), graph.Opset{Domain: "ai.onnxpe", Version: 1})
				ids := b.IDs()
				x := b.Embed(ids)
				s := b.SeqLen(ids)
				slopes := make([]float32, 6)
				for i := range slopes {
					slopes[i] = float32(math.Pow(2, -8*float64(i+1)/6))
				}
				bias := b.Dop("ai.onnxpe", "ALiBiBias", []*graph.Value{b.F32([]int64{6}, slopes), s, s}, 1)[0]
				q, k, v := b.Proj(x, 6*8), b.Proj(x, 6*8), b.Proj(x, 6*8)
				a := b.Op("Attention", []*graph.Value{q, k, v, bias}, graph.IntAttr("q_num_heads", 6), graph.IntAttr("kv_num_heads", 6), graph.IntAttr("is_causal", 1))
				y := b.Op("MatMul", []*graph.Value{a, b.Weight(6*8, schemetest.Hidden)})
				b.Output(b.Op("Add", []*graph.Value{x, y}))
				return b.M
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
				b := schemetest.NewNet(schemetest.ONNX(17), schemetest.MS())
				ids, pos := b.IDs(), b.PosIDs()
				rows := 40
				tab := make([]float32, rows*schemetest.Hidden)
				for p := 0; p < rows; p++ {
					for i := 0; i < schemetest.Hidden/2; i++ {
						a := float64(p) / math.Pow(10000, 2*float64(i)/schemetest.Hidden)
						tab[p*schemetest.Hidden+2*i], tab[p*schemetest.Hidden+2*i+1] = float32(math.Sin(a)), float32(math.Cos(a))
					}
				}
				i32 := func(v *graph.Value) *graph.Value {
					return b.Op("Cast", []*graph.Value{v}, graph.IntAttr("to", int64(graph.Int32)))
				}
				outs := b.Dop("com.microsoft", "EmbedLayerNormalization", []*graph.Value{i32(ids), nil, b.Weight(schemetest.Vocab, schemetest.Hidden), b.F32([]int64{int64(rows), schemetest.Hidden}, tab), nil,
					b.Weight(schemetest.Hidden), b.Weight(schemetest.Hidden), nil, i32(pos)}, 3)
				x := outs[0]
				for l := 0; l < 2; l++ {
					a := b.Dop("com.microsoft", "Attention", []*graph.Value{x, b.Weight(schemetest.Hidden, 3*schemetest.Hidden), b.Weight(3 * schemetest.Hidden), outs[1]}, 1, graph.IntAttr("num_heads", schemetest.Heads))[0]
					x = b.Op("Add", []*graph.Value{x, b.Proj(a, schemetest.Hidden)})
				}
				b.Output(x)
				return b.M
			},
			layers: []string{"sinusoidal", "sinusoidal"},
			want: []wantFinding{{scheme: "sinusoidal", layers: []int{0, 1}, fused: true, params: map[string]any{
				"layout": "interleaved", "base": 10000, "dim": schemetest.Hidden, "computed": false, "max_positions": 40, "freq_denominator": "d/2", "position_offset": 0}}},
		},
		{
			// EmbedLayerNormalization with a learned table and no position_ids
			// (positions 0..S-1 by the op's contract).
			name: "embedlayernorm_learned",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(17), schemetest.MS())
				ids := b.IDs()
				i32 := b.Op("Cast", []*graph.Value{ids}, graph.IntAttr("to", int64(graph.Int32)))
				outs := b.Dop("com.microsoft", "EmbedLayerNormalization", []*graph.Value{i32, nil, b.Weight(schemetest.Vocab, schemetest.Hidden), b.Weight(96, schemetest.Hidden), nil,
					b.Weight(schemetest.Hidden), b.Weight(schemetest.Hidden)}, 3)
				a := b.Dop("com.microsoft", "Attention", []*graph.Value{outs[0], b.Weight(schemetest.Hidden, 3*schemetest.Hidden), b.Weight(3 * schemetest.Hidden)}, 1, graph.IntAttr("num_heads", schemetest.Heads))[0]
				b.Output(b.Op("Add", []*graph.Value{outs[0], b.Proj(a, schemetest.Hidden)}))
				return b.M
			},
			layers: []string{"learned_absolute"},
			want: []wantFinding{{scheme: "learned_absolute", layers: []int{0}, fused: true, params: map[string]any{
				"max_positions": 96, "dim": schemetest.Hidden, "position_offset": 0}}},
		},
		{
			// com.microsoft RotaryEmbedding whose caches are graph inputs: the
			// sizes come from the shapes, base and scaling are null.
			name: "ms_rotary_caches_as_inputs",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(17), schemetest.MS())
				ids, pos := b.IDs(), b.PosIDs()
				cos := b.G.AddInput("cos_cache", graph.TensorType(graph.Float, graph.Dims(300, schemetest.HeadDim/2)))
				sin := b.G.AddInput("sin_cache", graph.TensorType(graph.Float, graph.Dims(300, schemetest.HeadDim/2)))
				x := b.Embed(ids)
				q, k, v := b.Proj(x, schemetest.Hidden), b.Proj(x, schemetest.Hidden), b.Proj(x, schemetest.Hidden)
				q = b.Dop("com.microsoft", "RotaryEmbedding", []*graph.Value{q, pos, cos, sin}, 1, graph.IntAttr("num_heads", schemetest.Heads))[0]
				k = b.Dop("com.microsoft", "RotaryEmbedding", []*graph.Value{k, pos, cos, sin}, 1, graph.IntAttr("num_heads", schemetest.Heads))[0]
				a := b.Dop("com.microsoft", "MultiHeadAttention", []*graph.Value{q, k, v}, 1, graph.IntAttr("num_heads", schemetest.Heads))[0]
				b.Output(b.Op("Add", []*graph.Value{x, b.Proj(a, schemetest.Hidden)}))
				return b.M
			},
			layers: []string{"rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0}, fused: true, params: map[string]any{
				"layout": "half_split", "head_dim": 16, "rotary_dim": 16, "num_heads": schemetest.Heads, "num_kv_heads": schemetest.Heads, "max_positions": 300},
				null: []string{"base", "scaling", "factor"}, note: "graph inputs"}},
		},
		{
			// FlexAttention whose score_mod adds per-head ALiBi slopes.
			name: "flexattention_alibi_score_mod",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(26), graph.Opset{Domain: "ai.onnx.preview", Version: 1})
				ids := b.IDs()
				x := b.Embed(ids)
				q, k, v := b.Heads4(b.Proj(x, schemetest.Hidden), schemetest.Heads), b.Heads4(b.Proj(x, schemetest.Hidden), schemetest.Heads), b.Heads4(b.Proj(x, schemetest.Hidden), schemetest.Heads)
				sm := b.G.NewSubgraph("score_mod")
				sc := sm.AddInput("scores", graph.TensorType(graph.Float, []graph.Dim{{Param: "B"}, {Param: "H"}, {Param: "L"}, {Param: "S"}}))
				c := func(name string, dims []int64, v any, dt graph.DataType) *graph.Value {
					t, _ := graph.NewTensor(name, dt, dims, v)
					return sm.AddInitializer(t)
				}
				shape := sm.Op("Shape", []*graph.Value{sc}, 1)[0]
				sLen := sm.Op("Gather", []*graph.Value{shape, c("three", nil, []int64{3}, graph.Int64)}, 1, graph.IntAttr("axis", 0))[0]
				kr := sm.Op("Cast", []*graph.Value{sm.Op("Range", []*graph.Value{c("zero", nil, []int64{0}, graph.Int64), sLen, c("onei", nil, []int64{1}, graph.Int64)}, 1)[0]}, 1, graph.IntAttr("to", int64(graph.Float)))[0]
				sl := c("slopes", []int64{schemetest.Heads, 1, 1}, []float32{0.5, 0.25, 0.125, 0.0625}, graph.Float)
				out := sm.Op("Add", []*graph.Value{sc, sm.Op("Mul", []*graph.Value{sl, kr}, 1)[0]}, 1)[0]
				sm.AddOutput(out)
				a := b.Dop("ai.onnx.preview", "FlexAttention", []*graph.Value{q, k, v}, 1, graph.GraphAttr("score_mod", sm))[0]
				b.Output(b.Op("Add", []*graph.Value{x, b.Proj(b.Merge3(a), schemetest.Hidden)}))
				return b.M
			},
			layers: []string{"alibi"},
			want: []wantFinding{{scheme: "alibi", layers: []int{0}, fused: true, params: map[string]any{
				"num_heads": schemetest.Heads, "slopes": []float64{0.5, 0.25, 0.125, 0.0625}, "positions": "key_index"}}},
		},
	}
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
				b := schemetest.NewNet(schemetest.ONNX(17), schemetest.MS())
				ids := b.IDs()
				x := b.Embed(ids)
				q, k, v := b.Heads4(b.Proj(x, schemetest.Hidden), schemetest.Heads), b.Heads4(b.Proj(x, schemetest.Hidden), schemetest.Heads), b.Heads4(b.Proj(x, schemetest.Hidden), schemetest.Heads)
				b.Output(b.Op("Add", []*graph.Value{x, b.Proj(b.Merge3(b.SoftmaxAttention(q, k, v)), schemetest.Hidden)}))

				enc := b.Sub("encoder")
				eids := enc.G.AddInput("encoder_input_ids", graph.TensorType(graph.Int32, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
				ex := enc.Embed(eids)
				es := enc.SeqLen(eids)
				bias := enc.Dop("com.microsoft", "RelativePositionBias", []*graph.Value{enc.Weight(32, schemetest.Heads), es, es}, 1,
					graph.IntAttr("max_distance", 128), graph.IntAttr("is_bidirectional", 1))[0]
				eq, ek, ev := enc.Proj(ex, schemetest.Hidden), enc.Proj(ex, schemetest.Hidden), enc.Proj(ex, schemetest.Hidden)
				ea := enc.Dop("com.microsoft", "MultiHeadAttention", []*graph.Value{eq, ek, ev, nil, nil, bias}, 1, graph.IntAttr("num_heads", schemetest.Heads), graph.FloatAttr("scale", 1))[0]
				enc.G.AddOutput(enc.Op("Add", []*graph.Value{ex, enc.Proj(ea, schemetest.Hidden)}))

				dec := b.Sub("decoder")
				dids := dec.G.AddInput("input_ids", graph.TensorType(graph.Int32, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
				dpos := dec.G.AddInput("position_ids", graph.TensorType(graph.Int32, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
				dx := dec.Embed(dids)
				cos, sin := dec.Caches(512, schemetest.HeadDim, 10000, schemetest.One, 1)
				for l := 0; l < 2; l++ {
					dx = dec.MSRopeLayer(dx, dpos, cos, sin)
				}
				dec.G.AddOutput(dec.Op("MatMul", []*graph.Value{dx, dec.Weight(schemetest.Hidden, schemetest.Vocab)}))

				i32 := b.Op("Cast", []*graph.Value{ids}, graph.IntAttr("to", int64(graph.Int32)))
				ml, _ := graph.NewTensor("max_length", graph.Int32, []int64{1}, []int32{20})
				gen := b.Dop("com.microsoft", "BeamSearch", []*graph.Value{i32, b.G.AddInitializer(ml)}, 1,
					graph.GraphAttr("decoder", dec.G), graph.GraphAttr("encoder", enc.G), graph.IntAttr("model_type", 1),
					graph.IntAttr("eos_token_id", 2), graph.IntAttr("pad_token_id", 0))[0]
				b.G.AddOutput(gen)
				return b.M
			},
			layers: []string{"nope", "t5_relative_bias", "rope", "rope"},
			want: []wantFinding{
				{scheme: "nope", layers: []int{0}},
				{scheme: "t5_relative_bias", layers: []int{1}, fused: true, subgraph: "BeamSearch/encoder", params: map[string]any{
					"num_buckets": 32, "max_distance": 128, "bidirectional": true, "num_heads": schemetest.Heads, "scaled_scores": false}},
				{scheme: "rope", layers: []int{2, 3}, fused: true, subgraph: "BeamSearch/decoder", params: map[string]any{
					"layout": "half_split", "head_dim": 16, "rotary_dim": 16, "num_heads": schemetest.Heads, "num_kv_heads": schemetest.Heads,
					"base": 10000, "scaling": "none", "max_positions": 512}},
			},
		},
		{
			// An If choosing between two layers by the sequence length: a
			// short cache (base 10000) and a long one (linear factor 8), as
			// builders of long-context models do.
			name: "if_branches_rotary",
			build: func() *graph.Model {
				b := schemetest.NewNet(schemetest.ONNX(17), schemetest.MS())
				ids, pos := b.IDs(), b.PosIDs()
				x := b.Embed(ids)
				cond := b.Op("Greater", []*graph.Value{b.SeqLen(ids), b.I64s(32)})
				then, els := b.Sub("then"), b.Sub("else")
				cs, ss := then.Caches(64, schemetest.HeadDim, 10000, func(int) float64 { return 8 }, 1)
				then.G.AddOutput(then.MSRopeLayer(x, pos, cs, ss))
				cl, sl := els.Caches(32, schemetest.HeadDim, 10000, schemetest.One, 1)
				els.G.AddOutput(els.MSRopeLayer(x, pos, cl, sl))
				y := b.Op("If", []*graph.Value{cond}, graph.GraphAttr("then_branch", then.G), graph.GraphAttr("else_branch", els.G))
				b.Output(y)
				return b.M
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
				b := schemetest.NewNet(schemetest.ONNX(17))
				ids, pos := b.IDs(), b.PosIDs()
				x := b.Embed(ids)
				body := b.Sub("body")
				body.G.AddInput("iter", graph.TensorType(graph.Int64, nil))
				cin := body.G.AddInput("cond_in", graph.TensorType(graph.Bool, nil))
				xin := body.G.AddInput("x_in", graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: schemetest.Hidden, Known: true}}))
				q := body.RopeUnfused(body.Heads4(body.Proj(xin, schemetest.Hidden), schemetest.Heads), pos, 10000)
				k := body.RopeUnfused(body.Heads4(body.Proj(xin, schemetest.Hidden), schemetest.Heads), pos, 10000)
				v := body.Heads4(body.Proj(xin, schemetest.Hidden), schemetest.Heads)
				xo := body.Op("Add", []*graph.Value{xin, body.Proj(body.Merge3(body.SoftmaxAttention(q, k, v)), schemetest.Hidden)})
				body.G.AddOutput(body.Op("Identity", []*graph.Value{cin}))
				body.G.AddOutput(xo)
				tc, _ := graph.NewTensor("trips", graph.Int64, nil, []int64{3})
				ct, _ := graph.NewTensor("cond", graph.Bool, nil, []bool{true})
				y := b.Op("Loop", []*graph.Value{b.G.AddInitializer(tc), b.G.AddInitializer(ct), x}, graph.GraphAttr("body", body.G))
				b.Output(y)
				return b.M
			},
			layers: []string{"rope"},
			want: []wantFinding{{scheme: "rope", layers: []int{0}, fused: false, params: map[string]any{
				"layout": "half_split", "head_dim": 16, "num_heads": schemetest.Heads, "base": 10000, "scaling": "none"}}},
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
		gp := schemetest.JSONParams(f)
		keys := make([]string, 0, len(wf.params))
		for k := range wf.params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			w := schemetest.NormJSON(wf.params[k])
			if !schemetest.Agree(w, gp[k]) {
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
		params: map[string]any{"layout": "half_split", "head_dim": 16, "rotary_dim": 16, "num_heads": schemetest.Heads, "num_kv_heads": schemetest.KVHeads, "max_positions": 256},
		null:   []string{"base", "scaling", "factor"}, note: "external data"}})
}
