package audit_test

import (
	"math"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/x448/float16"
)

// This file holds the forms other people's exporters write positional
// encodings in (ONNX Runtime GenAI's builder, ORT's optimizer, torch.onnx
// TorchScript and dynamo, keras2onnx/tf2onnx, onnxscript): each variant is
// one attention block whose encoding is a plausible export of a known model,
// written differently from the corpus and from formSpec's forms (operand
// orders, opset forms of Split, frequencies by MatMul, Reciprocal or Div,
// float16 caches, run-time ALiBi slopes, another bucket function). The audit
// must report the scheme and the params the math gives.

// ---- positions, as exporters compute them ----

// ---- cos/sin ----

// ---- rotations ----

// ---- sinusoidal tables ----

// ---- ALiBi slopes at run time ----

// ---- T5 buckets ----

func exporterForms() []schemetest.ExporterForm {
	ropeHalf := func(base float64, hd, heads int) map[string]any {
		return map[string]any{"layout": "half_split", "base": base, "rotary_dim": hd, "head_dim": hd, "num_heads": heads, "scaling": "none"}
	}
	return []schemetest.ExporterForm{
		{
			// HF Llama by TorchScript at opset 13 after constant folding:
			// inv_freq stored, MatMul of positions, rotate_half by Split with
			// sizes as an input and the Neg folded into a sign vector.
			Name: "rope_split13_sign_vector", Opset: 13, Heads: 2, HD: 16,
			Rope: func(e *schemetest.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := schemetest.HalfCosSin(e, schemetest.FreqsMatMul(e, e.RangeS(), 10000, 16, "table"))
				return schemetest.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.Op("Add", nil, e.Op("Mul", nil, x, cos), e.Op("Mul", nil, schemetest.RotSplit13SignMul(e, x, 16), sin))
				})
			},
			Scheme: "rope", Want: ropeHalf(10000, 16, 2),
		},
		{
			// dynamo at opset 18: Split by num_outputs, the Muls and the Add
			// commuted (rot·sin first, cos·x second); inv_freq by Reciprocal.
			Name: "rope_split18_commuted_reciprocal", Opset: 18, Heads: 2, HD: 32,
			Rope: func(e *schemetest.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := schemetest.HalfCosSin(e, schemetest.FreqsMatMul(e, e.RangeS(), 500000, 32, "reciprocal"))
				return schemetest.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.Op("Add", nil, e.Op("Mul", nil, schemetest.RotSplit18(e, x), sin), e.Op("Mul", nil, cos, x))
				})
			},
			Scheme: "rope", Want: ropeHalf(500000, 32, 2),
		},
		{
			// HF with left padding: positions cumsum(mask)-1 masked_fill,
			// [B,S]; inv_freq via Div(1, base^x); cos/sin [B,1,S,d]; the Neg
			// taken before the half is sliced out.
			Name: "rope_hf_padding_div_negfirst", Heads: 2, HD: 16,
			Rope: func(e *schemetest.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := schemetest.HalfCosSin(e, schemetest.FreqsMatMul(e, schemetest.PosHFPadding(e), 10000, 16, "div"))
				cos, sin = e.Op("Unsqueeze", nil, cos, e.Ints(1)), e.Op("Unsqueeze", nil, sin, e.Ints(1))
				return schemetest.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.Op("Add", nil, e.Op("Mul", nil, x, cos), e.Op("Mul", nil, schemetest.RotNegThenSlice(e, x, 16), sin))
				})
			},
			Scheme: "rope", Want: ropeHalf(10000, 16, 2),
		},
		{
			// KV-cache decoder: positions Range(past, past+S); float16 cos/sin
			// caches gathered and cast to float32 at use (ORT GenAI's fp16
			// builds).
			Name: "rope_fp16_cache_past_range", Heads: 2, HD: 16,
			Rope:   schemetest.RopeFP16CachePastRange(nil),
			Opset:  18,
			Scheme: "rope", Want: map[string]any{"layout": "half_split", "base": 10000.0, "rotary_dim": 16, "max_positions": 128},
		},
		{
			// GPT-J by dynamo: rotate_every_two as Reshape [.., d/2, 2] and
			// Gather of index 0/1; cos/sin by repeat_interleave (Unsqueeze,
			// Expand, Reshape); positions by NonZero.
			Name: "rope_pairs_reshape_gather", Heads: 2, HD: 16,
			Rope: func(e *schemetest.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := schemetest.InterleavedCosSin(e, schemetest.FreqsMatMul(e, schemetest.PosNonZero(e), 10000, 16, "table"), 16)
				return schemetest.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.Op("Add", nil, e.Op("Mul", nil, x, cos), e.Op("Mul", nil, schemetest.RotPairsReshapeGather(e, x, 16), sin))
				})
			},
			Scheme: "rope", Want: map[string]any{"layout": "interleaved", "base": 10000.0, "rotary_dim": 16, "head_dim": 16},
		},
		{
			// rotate_every_two as Reshape [.., d/2, 2] and Slices that keep
			// the pair axis, Concat(-x2, x1); commuted Add.
			Name: "rope_pairs_reshape_slice", Heads: 2, HD: 16,
			Rope: func(e *schemetest.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := schemetest.InterleavedCosSin(e, schemetest.FreqsMatMul(e, e.RangeS(), 50000, 16, "reciprocal"), 16)
				return schemetest.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.Op("Add", nil, e.Op("Mul", nil, sin, schemetest.RotPairsSliceKeep(e, x, 16)), e.Op("Mul", nil, x, cos))
				})
			},
			Scheme: "rope", Want: map[string]any{"layout": "interleaved", "base": 50000.0, "rotary_dim": 16, "head_dim": 16},
		},
		{
			// the opset-23 RotaryEmbedding function body written out (as
			// onnxscript inlines it): half-width stored caches gathered at
			// position_ids given as an input, explicit x1·cos - x2·sin.
			Name: "rope_explicit_half_width_caches", Heads: 2, HD: 16,
			Rope: func(e *schemetest.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				pin := e.G.AddInput("position_ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
				cc, sc := schemetest.HalfWidthCaches(e, 10000, 96, 16)
				cos := e.Op("Unsqueeze", nil, e.Op("Gather", nil, cc, pin), e.Ints(1))
				sin := e.Op("Unsqueeze", nil, e.Op("Gather", nil, sc, pin), e.Ints(1))
				return schemetest.ApplyRope(q, k, func(x *graph.Value) *graph.Value { return schemetest.RotExplicitHalf(e, x, cos, sin, 16) })
			},
			Scheme: "rope", Want: map[string]any{"layout": "half_split", "base": 10000.0, "rotary_dim": 16, "head_dim": 16, "max_positions": 96},
		},
		{
			// the interleaved function body: pairs by Reshape and Gather,
			// half-width frequencies computed, explicit products stacked.
			Name: "rope_explicit_pairs_computed", Heads: 2, HD: 16,
			Rope: func(e *schemetest.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				fr := schemetest.FreqsMatMul(e, e.RangeS(), 10000, 16, "div")
				cos, sin := e.Op("Cos", nil, fr), e.Op("Sin", nil, fr)
				return schemetest.ApplyRope(q, k, func(x *graph.Value) *graph.Value { return schemetest.RotExplicitPairs(e, x, cos, sin, 16) })
			},
			Scheme: "rope", Want: map[string]any{"layout": "interleaved", "base": 10000.0, "rotary_dim": 16, "head_dim": 16},
		},
		{
			// RoPE applied before the heads are transposed ([B,S,H,d], cos
			// [S,1,d]), linear scaling written as positions / 4.
			Name: "rope_bshd_linear_by_position_div", Heads: 2, HD: 16,
			Rope: func(e *schemetest.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				pos := e.Op("Div", nil, e.ToFloat(e.RangeS()), e.F0(4))
				cos, sin := schemetest.HalfCosSin(e, schemetest.FreqsMatMul(e, pos, 10000, 16, "table"))
				cos, sin = e.Op("Unsqueeze", nil, cos, e.Ints(1)), e.Op("Unsqueeze", nil, sin, e.Ints(1))
				perm := []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}
				return schemetest.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
					xt := e.Op("Transpose", perm, x) // back to [B,S,H,d]
					y := e.Op("Add", nil, e.Op("Mul", nil, xt, cos), e.Op("Mul", nil, schemetest.RotSplit13SignMul(e, xt, 16), sin))
					return e.Op("Transpose", perm, y)
				})
			},
			Scheme: "rope", Want: map[string]any{"layout": "half_split", "base": 10000.0, "rotary_dim": 16, "scaling": "linear", "factor": 4.0},
		},
		{
			// tensor2tensor's get_timing_signal_1d computed in the graph:
			// inv_timescales = Exp(-log(1e4)/(d/2-1) · i), concat [sin, cos].
			Name: "sinusoidal_t2t_exp_computed", Heads: 2, HD: 16,
			Abs: func(e *schemetest.Env, x *graph.Value) *graph.Value {
				n := e.D / 2
				inc := math.Log(10000) / float64(n-1)
				i := e.ToFloat(e.Op("Range", nil, e.Int0(0), e.Int0(int64(n)), e.Int0(1)))
				inv := e.Op("Exp", nil, e.Op("Mul", nil, i, e.F0(float32(-inc))))
				st := e.Op("Mul", nil, e.Op("Unsqueeze", nil, e.ToFloat(e.RangeS()), e.Ints(1)), e.Op("Unsqueeze", nil, inv, e.Ints(0)))
				pe := e.Op("Concat", e.Axis(1), e.Op("Sin", nil, st), e.Op("Cos", nil, st))
				return e.Op("Add", nil, x, e.Op("Unsqueeze", nil, pe, e.Ints(0)))
			},
			Scheme: "sinusoidal", Want: map[string]any{"layout": "concat_sin_cos", "base": 10000.0, "dim": 32, "computed": true, "freq_denominator": "d/2-1"},
		},
		{
			// symmetric ALiBi (encoder) with the distance's Abs on integers
			// before the Cast, slopes stored, -slope·|i-j| as Mul by the
			// negated slopes.
			Name: "alibi_symmetric_int_abs", Heads: 4, HD: 8,
			Bias: func(e *schemetest.Env, scores *graph.Value) *graph.Value {
				r := e.RangeS()
				d := e.ToFloat(e.Op("Abs", nil, e.Op("Sub", nil, e.Op("Unsqueeze", nil, r, e.Ints(1)), e.Op("Unsqueeze", nil, r, e.Ints(0)))))
				neg := []float32{-0.25, -0.0625, -0.015625, -0.00390625}
				return e.Op("Add", nil, scores, e.Op("Mul", nil, d, e.Floats([]int64{4, 1, 1}, neg)))
			},
			Scheme: "alibi", Want: map[string]any{"num_heads": 4, "slopes": []any{0.25, 0.0625, 0.015625, 0.00390625}, "symmetric": true},
		},
		{
			// HF dynamic NTK written with Max instead of the Python branch:
			// base' = base·(f·max(S, L)/L - (f-1))^(d/(d-2)) at run time, GQA
			// with 4 query heads over 2 key/value heads (repeat_kv by Expand).
			Name: "rope_dynamic_ntk_max_gqa", Heads: 4, KVHeads: 2, HD: 16,
			Rope: func(e *schemetest.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				const L, fac, d = 32, 2.0, 16
				m := e.Op("Max", nil, e.ToFloat(e.Seq), e.F0(L))
				t := e.Op("Sub", nil, e.Op("Div", nil, e.Op("Mul", nil, m, e.F0(fac)), e.F0(L)), e.F0(fac-1))
				base := e.Op("Mul", nil, e.F0(10000), e.Op("Pow", nil, t, e.F0(float32(d)/float32(d-2))))
				ar := e.ToFloat(e.Op("Range", nil, e.Int0(0), e.Int0(d), e.Int0(2)))
				inv := e.Op("Reciprocal", nil, e.Op("Pow", nil, base, e.Op("Div", nil, ar, e.F0(d))))
				fr := e.Op("Mul", nil, e.Op("Unsqueeze", nil, e.ToFloat(e.RangeS()), e.Ints(1)), e.Op("Unsqueeze", nil, inv, e.Ints(0)))
				cos, sin := schemetest.HalfCosSin(e, fr)
				return schemetest.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.Op("Add", nil, e.Op("Mul", nil, x, cos), e.Op("Mul", nil, schemetest.RotSplit18(e, x), sin))
				})
			},
			Opset:  18,
			Scheme: "rope", Want: map[string]any{"layout": "half_split", "base": 10000.0, "scaling": "ntk", "factor": 2.0, "original_max_positions": 32, "num_heads": 4, "num_kv_heads": 2},
		},
		{
			// tf-style: frequencies by Einsum "i,j->ij" of int32 position_ids
			// cast to float, cos/sin by Tile(freqs, [1, 2]).
			Name: "rope_int32_positions_einsum_tile", Heads: 2, HD: 16,
			Rope: func(e *schemetest.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				pin := e.G.AddInput("position_ids", graph.TensorType(graph.Int32, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
				row := e.Op("Squeeze", nil, e.Op("Slice", nil, pin, e.Ints(0), e.Ints(1), e.Ints(0)), e.Ints(0))
				fr := e.Op("Einsum", []*graph.Attr{graph.StringAttr("equation", "i,j->ij")}, e.ToFloat(row), e.F32(schemetest.InvFreq(1e6, 16)...))
				emb := e.Op("Tile", nil, fr, e.Ints(1, 2))
				cos, sin := e.Op("Cos", nil, emb), e.Op("Sin", nil, emb)
				return schemetest.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.Op("Add", nil, e.Op("Mul", nil, x, cos), e.Op("Mul", nil, schemetest.RotSplit18(e, x), sin))
				})
			},
			Opset:  18,
			Scheme: "rope", Want: map[string]any{"layout": "half_split", "base": 1e6, "rotary_dim": 16, "head_dim": 16},
		},
		{
			// older HF Llama: cos_cached[:seq_len] by a Slice whose end is
			// the sequence length, then indexed by position_ids.
			Name: "rope_cache_sliced_then_gathered", Heads: 2, HD: 16,
			Rope: func(e *schemetest.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				pin := e.G.AddInput("position_ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
				const n, rd = 64, 16
				inv := schemetest.InvFreq(10000, rd)
				cv, sv := make([]float32, n*rd), make([]float32, n*rd)
				for p := 0; p < n; p++ {
					for c := 0; c < rd; c++ {
						a := float64(p) * float64(inv[c%(rd/2)])
						cv[p*rd+c], sv[p*rd+c] = float32(math.Cos(a)), float32(math.Sin(a))
					}
				}
				end := e.Op("Unsqueeze", nil, e.Seq, e.Ints(0))
				cs := e.Op("Slice", nil, e.Floats([]int64{1, 1, n, rd}, cv), e.Ints(0), end, e.Ints(2))
				ss := e.Op("Slice", nil, e.Floats([]int64{1, 1, n, rd}, sv), e.Ints(0), end, e.Ints(2))
				sq := func(v *graph.Value) *graph.Value { return e.Op("Squeeze", nil, v, e.Ints(0, 1)) }
				cos := e.Op("Unsqueeze", nil, e.Op("Gather", nil, sq(cs), pin), e.Ints(1))
				sin := e.Op("Unsqueeze", nil, e.Op("Gather", nil, sq(ss), pin), e.Ints(1))
				return schemetest.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.Op("Add", nil, e.Op("Mul", nil, x, cos), e.Op("Mul", nil, schemetest.RotNegThenSlice(e, x, rd), sin))
				})
			},
			Scheme: "rope", Want: map[string]any{"layout": "half_split", "base": 10000.0, "rotary_dim": 16, "max_positions": 64},
		},
		{
			// tf.range over floats and an interleaved sinusoid stacked and
			// flattened (Flatten, not Reshape).
			Name: "sinusoidal_float_range_stack_flatten", Heads: 2, HD: 16,
			Abs: func(e *schemetest.Env, x *graph.Value) *graph.Value {
				pos := e.Op("Range", nil, e.F0(0), e.ToFloat(e.Seq), e.F0(1))
				ang := e.Op("Mul", nil, e.Op("Unsqueeze", nil, pos, e.Ints(1)), e.F32(schemetest.InvFreq(10000, e.D)...))
				st := e.Op("Concat", e.Axis(2), e.Op("Unsqueeze", nil, e.Op("Sin", nil, ang), e.Ints(2)), e.Op("Unsqueeze", nil, e.Op("Cos", nil, ang), e.Ints(2)))
				pe := e.Op("Flatten", []*graph.Attr{graph.IntAttr("axis", 1)}, st)
				return e.Op("Add", nil, x, pe)
			},
			Scheme: "sinusoidal", Want: map[string]any{"layout": "interleaved", "base": 10000.0, "dim": 32, "computed": true, "freq_denominator": "d/2"},
		},
		{
			// BERT's TPU path: positions one-hot encoded and multiplied with
			// the table (OneHot + MatMul instead of Gather).
			Name: "learned_onehot_matmul", Heads: 2, HD: 16,
			Abs: func(e *schemetest.Env, x *graph.Value) *graph.Value {
				oh := e.Op("OneHot", []*graph.Attr{graph.IntAttr("axis", -1)}, e.RangeS(), e.Int0(72), e.F32(0, 1))
				return e.Op("Add", nil, x, e.Op("MatMul", nil, oh, e.Weight(72, e.D)))
			},
			Scheme: "learned_absolute", Want: map[string]any{"max_positions": 72, "dim": 32, "position_offset": 0},
		},
		{
			// T5 by tf2onnx: everything in int32 (TF's default int).
			Name: "t5_int32_bucket", Heads: 4, HD: 8,
			Bias: func(e *schemetest.Env, scores *graph.Value) *graph.Value {
				r := e.Op("Cast", []*graph.Attr{graph.IntAttr("to", int64(graph.Int32))}, e.RangeS())
				rel := e.Op("Sub", nil, e.Op("Unsqueeze", nil, r, e.Ints(0)), e.Op("Unsqueeze", nil, r, e.Ints(1)))
				i32 := func(v int64) *graph.Value {
					t, _ := graph.NewTensor("s", graph.Int32, nil, []int32{int32(v)})
					return e.G.AddInitializer(t)
				}
				to32 := func(v *graph.Value) *graph.Value {
					return e.Op("Cast", []*graph.Attr{graph.IntAttr("to", int64(graph.Int32))}, v)
				}
				const nb, exact, maxd = 16, 8, 128
				ret := e.Op("Mul", nil, to32(e.Op("Greater", nil, rel, i32(0))), i32(nb))
				n := e.Op("Abs", nil, rel)
				lf := e.Op("Div", nil, e.Op("Log", nil, e.Op("Div", nil, e.ToFloat(n), e.F0(exact))), e.F0(float32(math.Log(maxd/exact))))
				large := e.Op("Min", nil, e.Op("Add", nil, to32(e.Op("Mul", nil, lf, e.F0(nb-exact))), i32(exact)), i32(nb-1))
				bk := e.Op("Add", nil, e.Op("Where", nil, e.Op("Less", nil, n, i32(exact)), n, large), ret)
				emb := e.Op("Gather", nil, e.Weight(32, e.Heads), bk)
				bias := e.Op("Unsqueeze", nil, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 2, 0, 1)}, emb), e.Ints(0))
				return e.Op("Add", nil, scores, bias)
			},
			Scheme: "t5_relative_bias", Want: map[string]any{"num_buckets": 32, "max_distance": 128, "bidirectional": true, "num_heads": 4},
		},
		{
			// transformers >= 4.38 Llama: inv_freq[None, :, None] expanded to
			// the batch, MatMul with position_ids[:, None, :] as floats,
			// transposed, Concat(freqs, freqs), cos·attention_scaling (1.0),
			// Cast to the model's dtype.
			Name: "rope_hf438_expand_matmul_transpose", Heads: 2, HD: 16,
			Rope: func(e *schemetest.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				pin := e.G.AddInput("position_ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
				b := e.Op("Slice", nil, e.Op("Shape", nil, pin), e.Ints(0), e.Ints(1), e.Ints(0))
				inv := e.Floats([]int64{1, 8, 1}, schemetest.InvFreq(10000, 16))
				invE := e.Op("Expand", nil, inv, e.Op("Concat", e.Axis(0), b, e.Ints(1, 1)))
				pe := e.ToFloat(e.Op("Unsqueeze", nil, pin, e.Ints(1)))
				fr := e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1)}, e.Op("MatMul", nil, invE, pe))
				emb := e.Op("Concat", e.Axis(-1), fr, fr)
				cos := e.ToFloat(e.Op("Mul", nil, e.Op("Cos", nil, emb), e.F0(1)))
				sin := e.ToFloat(e.Op("Mul", nil, e.Op("Sin", nil, emb), e.F0(1)))
				cos, sin = e.Op("Unsqueeze", nil, cos, e.Ints(1)), e.Op("Unsqueeze", nil, sin, e.Ints(1))
				return schemetest.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.Op("Add", nil, e.Op("Mul", nil, x, cos), e.Op("Mul", nil, schemetest.RotSplit13SignMul(e, x, 16), sin))
				})
			},
			Scheme: "rope", Want: ropeHalf(10000, 16, 2),
		},
		{
			// BLOOM as exported: slopes·((cumsum(mask) - 1)·mask) [B·H, 1, T]
			// added by baddbmm to 3-D scores [B·H, S, T], viewed back to
			// [B, H, S, T]; slopes as Exp(-k·(8/n)·ln 2).
			Name: "alibi_bloom_baddbmm_3d_exp_slopes", Heads: 4, HD: 8,
			Bias: func(e *schemetest.Env, scores *graph.Value) *graph.Value {
				k := e.ToFloat(e.Op("Range", nil, e.Int0(1), e.Int0(5), e.Int0(1)))
				sl := e.Op("Exp", nil, e.Op("Mul", nil, k, e.F0(float32(-2*math.Ln2))))
				m := e.Op("Mul", nil, e.Op("Sub", nil, e.Op("CumSum", nil, e.Mask, e.Int0(-1)), e.Int0(1)), e.Mask)
				al := e.Op("Mul", nil, e.Op("Unsqueeze", nil, sl, e.Ints(0, 2)), e.Op("Unsqueeze", nil, e.ToFloat(m), e.Ints(1))) // [B,H,T]
				sh := e.Op("Shape", nil, scores)
				st := e.Op("Slice", nil, sh, e.Ints(2), e.Ints(4), e.Ints(0)) // [S, T]
				t := e.Op("Slice", nil, sh, e.Ints(3), e.Ints(4), e.Ints(0))
				al = e.Op("Reshape", nil, al, e.Op("Concat", e.Axis(0), e.Ints(-1, 1), t)) // [B·H,1,T]
				s3 := e.Op("Reshape", nil, scores, e.Op("Concat", e.Axis(0), e.Ints(-1), st))
				s3 = e.Op("Add", nil, al, s3)
				return schemetest.CausalWhere(e, e.Op("Reshape", nil, s3, sh))
			},
			Scheme: "alibi", Want: map[string]any{"num_heads": 4, "slopes": []any{0.25, 0.0625, 0.015625, 0.00390625}, "symmetric": false},
		},
		{
			// an fp16 export: the learned position table in float16, cast
			// to float32 where it is added.
			Name: "learned_fp16_table_cast", Heads: 2, HD: 16,
			Abs: func(e *schemetest.Env, x *graph.Value) *graph.Value {
				v := make([]float16.Float16, 40*e.D)
				for i := range v {
					v[i] = float16.Fromfloat32(float32(e.Rng.NormFloat64() * 0.02))
				}
				t, _ := graph.NewTensor("wpe", graph.Float16, []int64{40, int64(e.D)}, v)
				return e.Op("Add", nil, x, e.ToFloat(e.Op("Gather", nil, e.G.AddInitializer(t), e.RangeS())))
			},
			Scheme: "learned_absolute", Want: map[string]any{"max_positions": 40, "dim": 32, "position_offset": 0},
		},
		{
			// a float16 sinusoidal table (concat layout), sliced and cast.
			Name: "sinusoidal_fp16_table_cast", Heads: 2, HD: 16,
			Abs: func(e *schemetest.Env, x *graph.Value) *graph.Value {
				d := e.D
				v := make([]float16.Float16, 48*d)
				for p := 0; p < 48; p++ {
					for i := 0; i < d/2; i++ {
						a := float64(p) * math.Pow(10000, -float64(i)/float64(d/2))
						v[p*d+i], v[p*d+d/2+i] = float16.Fromfloat32(float32(math.Sin(a))), float16.Fromfloat32(float32(math.Cos(a)))
					}
				}
				t, _ := graph.NewTensor("pe", graph.Float16, []int64{48, int64(d)}, v)
				pe := e.Op("Slice", nil, e.G.AddInitializer(t), e.Ints(0), e.Op("Unsqueeze", nil, e.Seq, e.Ints(0)), e.Ints(0))
				return e.Op("Add", nil, x, e.ToFloat(pe))
			},
			Scheme: "sinusoidal", Want: map[string]any{"layout": "concat_sin_cos", "base": 10000.0, "dim": 32, "computed": false, "max_positions": 48, "freq_denominator": "d/2", "position_offset": 0},
		},
		{
			// RoBERTa: positions from the token ids, cumsum(ids != pad)·mask +
			// pad (padding_idx 1), so the first token reads row 2.
			Name: "learned_roberta_positions_from_ids", Heads: 2, HD: 16,
			Abs: func(e *schemetest.Env, x *graph.Value) *graph.Value {
				m := e.ToInt(e.Op("Not", nil, e.Op("Equal", nil, e.IDs, e.Int0(1))))
				pos := e.Op("Add", nil, e.Op("Mul", nil, e.Op("CumSum", nil, m, e.Int0(1)), m), e.Int0(1))
				return e.Op("Add", nil, x, e.Op("Gather", nil, e.Weight(66, e.D), pos))
			},
			Scheme: "learned_absolute", Want: map[string]any{"max_positions": 66, "dim": 32, "position_offset": 2},
		},
		{
			// MQA: one key/value head for 4 query heads.
			Name: "rope_mqa_one_kv_head", Heads: 4, KVHeads: 1, HD: 16,
			Rope: func(e *schemetest.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := schemetest.HalfCosSin(e, schemetest.FreqsMatMul(e, e.RangeS(), 10000, 16, "table"))
				return schemetest.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.Op("Add", nil, e.Op("Mul", nil, x, cos), e.Op("Mul", nil, schemetest.RotSplit18(e, x), sin))
				})
			},
			Opset:  18,
			Scheme: "rope", Want: map[string]any{"layout": "half_split", "base": 10000.0, "num_heads": 4, "num_kv_heads": 1},
		},
		{
			// the original Mesh TensorFlow bucket (as tf2onnx exports T5):
			// n = -(j - i); ret = (n < 0)·nb; n = |n|; Where(n < exact, n,
			// Min(large, nb - 1)).
			Name: "t5_mesh_tf_negated", Heads: 4, HD: 8,
			Bias: func(e *schemetest.Env, scores *graph.Value) *graph.Value {
				r := e.RangeS()
				n := e.Op("Neg", nil, e.Op("Sub", nil, e.Op("Unsqueeze", nil, r, e.Ints(0)), e.Op("Unsqueeze", nil, r, e.Ints(1))))
				const nb, exact, maxd = 16, 8, 128
				ret := e.Op("Mul", nil, e.ToInt(e.Op("Less", nil, n, e.Int0(0))), e.Int0(nb))
				n = e.Op("Abs", nil, n)
				lf := e.Op("Mul", nil, e.Op("Div", nil, e.Op("Log", nil, e.Op("Div", nil, e.ToFloat(n), e.F0(exact))), e.F0(float32(math.Log(maxd/exact)))), e.F0(nb-exact))
				large := e.Op("Min", nil, e.Op("Add", nil, e.Int0(exact), e.ToInt(lf)), e.Int0(nb-1))
				bk := e.Op("Add", nil, ret, e.Op("Where", nil, e.Op("Less", nil, n, e.Int0(exact)), n, large))
				emb := e.Op("Gather", nil, e.Weight(32, e.Heads), bk)
				bias := e.Op("Unsqueeze", nil, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 2, 0, 1)}, emb), e.Ints(0))
				return e.Op("Add", nil, scores, bias)
			},
			Scheme: "t5_relative_bias", Want: map[string]any{"num_buckets": 32, "max_distance": 128, "bidirectional": true, "num_heads": 4},
		},
		{
			// 12 heads: 8 slopes of 2^(-k) and 4 extra odd powers of 2^(-1/2),
			// computed at run time; keys-only bias.
			Name: "alibi_runtime_slopes_12_heads", Heads: 12, HD: 4,
			Bias: func(e *schemetest.Env, scores *graph.Value) *graph.Value {
				r := e.Op("Unsqueeze", nil, e.ToFloat(e.RangeS()), e.Ints(0))
				return e.Op("Add", nil, schemetest.CausalWhere(e, scores), e.Op("Mul", nil, schemetest.RuntimeSlopes(e, 12), r))
			},
			Scheme: "alibi", Want: map[string]any{"num_heads": 12, "slopes": schemetest.BloomSlopes(12), "symmetric": false},
		},
		{
			// Gemma: the queries scaled (query_pre_attn_scalar) before the
			// rotation, base 10000, head_dim 32 of 2 heads.
			Name: "rope_gemma_scaled_queries", Heads: 2, HD: 32,
			Rope: func(e *schemetest.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := schemetest.HalfCosSin(e, schemetest.FreqsMatMul(e, e.RangeS(), 10000, 32, "div"))
				q = e.Op("Mul", nil, q, e.F0(0.0625))
				return schemetest.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.Op("Add", nil, e.Op("Mul", nil, x, cos), e.Op("Mul", nil, schemetest.RotNegThenSlice(e, x, 32), sin))
				})
			},
			Scheme: "rope", Want: ropeHalf(10000, 32, 2),
		},
		{
			// q and k rotated together: Concat on the head axis, one
			// rotation, Split back (a packed form).
			Name: "rope_qk_packed_one_rotation", Heads: 2, KVHeads: 1, HD: 16,
			Rope: func(e *schemetest.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := schemetest.HalfCosSin(e, schemetest.FreqsMatMul(e, e.RangeS(), 10000, 16, "table"))
				qk := e.Op("Concat", e.Axis(1), q, k)
				y := e.Op("Add", nil, e.Op("Mul", nil, qk, cos), e.Op("Mul", nil, schemetest.RotSplit18(e, qk), sin))
				o := e.G.Op("Split", []*graph.Value{y, e.Ints(2, 1)}, 2, graph.IntAttr("axis", 1))
				return o[0], o[1]
			},
			Opset:  18,
			Scheme: "rope", Want: map[string]any{"layout": "half_split", "base": 10000.0, "num_heads": 2, "num_kv_heads": 1},
		},
		{
			// Phi-2's partial rotation: the first 16 of 40 dims sliced out,
			// rotated (Split at opset 13, Neg folded into a sign vector),
			// concatenated back with the rest.
			Name: "rope_phi2_partial_slice", Heads: 2, HD: 40, Opset: 13,
			Rope: func(e *schemetest.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := schemetest.HalfCosSin(e, schemetest.FreqsMatMul(e, e.RangeS(), 10000, 16, "table"))
				return schemetest.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
					xr := e.Op("Slice", nil, x, e.Ints(0), e.Ints(16), e.Ints(-1))
					xp := e.Op("Slice", nil, x, e.Ints(16), e.Ints(math.MaxInt64), e.Ints(-1))
					y := e.Op("Add", nil, e.Op("Mul", nil, xr, cos), e.Op("Mul", nil, schemetest.RotSplit13SignMul(e, xr, 16), sin))
					return e.Op("Concat", e.Axis(-1), y, xp)
				})
			},
			Scheme: "rope", Want: map[string]any{"layout": "half_split", "base": 10000.0, "rotary_dim": 16, "head_dim": 40},
		},
		{
			// the T5 decoder with a KV cache: queries at Range(past, past+S),
			// keys at Range(0, past+S), causal buckets.
			Name: "t5_decoder_with_cache", Heads: 4, HD: 8, Cache: true,
			Bias: func(e *schemetest.Env, scores *graph.Value) *graph.Value {
				pl := e.PastLen()
				tot := e.Op("Add", nil, pl, e.Seq)
				ctx := e.Op("Range", nil, pl, tot, e.Int0(1))
				mem := e.Op("Range", nil, e.Int0(0), tot, e.Int0(1))
				rel := e.Op("Sub", nil, e.Op("Unsqueeze", nil, mem, e.Ints(0)), e.Op("Unsqueeze", nil, ctx, e.Ints(1)))
				bk := schemetest.T5Bucket(e, rel, 32, 128, false)
				emb := e.Op("Gather", nil, e.Weight(32, e.Heads), bk)
				bias := e.Op("Unsqueeze", nil, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 2, 0, 1)}, emb), e.Ints(0))
				return e.Op("Add", nil, scores, bias)
			},
			Scheme: "t5_relative_bias", Want: map[string]any{"num_buckets": 32, "max_distance": 128, "bidirectional": false, "num_heads": 4},
		},
		{
			// keras: angle_rates = 1 / 10000^(2i/d) by Pow then Div, angles by
			// MatMul, concat [sin, cos], added to the embeddings.
			Name: "sinusoidal_keras_concat_computed", Heads: 2, HD: 16,
			Abs: func(e *schemetest.Env, x *graph.Value) *graph.Value {
				d := e.D
				i := e.ToFloat(e.Op("Range", nil, e.Int0(0), e.Int0(int64(d/2)), e.Int0(1)))
				ex := e.Op("Div", nil, e.Op("Mul", nil, i, e.F0(2)), e.F0(float32(d)))
				rates := e.Op("Div", nil, e.F0(1), e.Op("Pow", nil, e.F0(10000), ex))
				ang := e.Op("MatMul", nil, e.Op("Unsqueeze", nil, e.ToFloat(e.RangeS()), e.Ints(1)), e.Op("Unsqueeze", nil, rates, e.Ints(0)))
				pe := e.Op("Concat", e.Axis(-1), e.Op("Sin", nil, ang), e.Op("Cos", nil, ang))
				return e.Op("Add", nil, x, pe)
			},
			Scheme: "sinusoidal", Want: map[string]any{"layout": "concat_sin_cos", "base": 10000.0, "dim": 32, "computed": true, "freq_denominator": "d/2"},
		},
		{
			// the same with the rates as (1/10000)^(2i/d) and positions scaled
			// after: Mul(rates, pos) with pos [S,1] on the right.
			Name: "sinusoidal_keras_pow_of_reciprocal", Heads: 2, HD: 16,
			Abs: func(e *schemetest.Env, x *graph.Value) *graph.Value {
				d := e.D
				i := e.ToFloat(e.Op("Range", nil, e.Int0(0), e.Int0(int64(d)), e.Int0(2)))
				rates := e.Op("Pow", nil, e.Op("Reciprocal", nil, e.F0(10000)), e.Op("Div", nil, i, e.F0(float32(d))))
				ang := e.Op("Mul", nil, e.Op("Unsqueeze", nil, rates, e.Ints(0)), e.Op("Unsqueeze", nil, e.ToFloat(e.RangeS()), e.Ints(1)))
				pe := e.Op("Concat", e.Axis(1), e.Op("Sin", nil, ang), e.Op("Cos", nil, ang))
				return e.Op("Add", nil, pe, x)
			},
			Scheme: "sinusoidal", Want: map[string]any{"layout": "concat_sin_cos", "base": 10000.0, "dim": 32, "computed": true, "freq_denominator": "d/2"},
		},
		{
			// tf2onnx: the keras tutorial's precomputed interleaved table
			// sliced by a dynamic Slice whose end comes from Shape(x).
			Name: "sinusoidal_tf2onnx_sliced_table", Heads: 2, HD: 16,
			Abs: func(e *schemetest.Env, x *graph.Value) *graph.Value {
				tab := e.Floats([]int64{64, int64(e.D)}, schemetest.SinTableInterleaved(64, e.D))
				end := e.Op("Slice", nil, e.Op("Shape", nil, x), e.Ints(1), e.Ints(2), e.Ints(0))
				pe := e.Op("Slice", nil, tab, e.Ints(0), end, e.Ints(0))
				return e.Op("Add", nil, x, e.Op("Unsqueeze", nil, pe, e.Ints(0)))
			},
			Scheme: "sinusoidal", Want: map[string]any{"layout": "interleaved", "base": 10000.0, "dim": 32, "computed": false, "max_positions": 64, "freq_denominator": "d/2", "position_offset": 0},
		},
		{
			// GPT-2 with a KV cache: Gather of wpe at Range(0,S) + past length.
			Name: "learned_gather_past_offset", Heads: 2, HD: 16,
			Abs: func(e *schemetest.Env, x *graph.Value) *graph.Value {
				pos := e.Op("Add", nil, e.RangeS(), e.PastLen())
				return e.Op("Add", nil, x, e.Op("Gather", nil, e.Weight(96, e.D), pos))
			},
			Scheme: "learned_absolute", Want: map[string]any{"max_positions": 96, "dim": 32, "position_offset": 0},
		},
		{
			// a sliced table expanded to the batch: Slice(wpe, 0, S), Expand.
			Name: "learned_slice_expand", Heads: 2, HD: 16,
			Abs: func(e *schemetest.Env, x *graph.Value) *graph.Value {
				sl := e.Op("Slice", nil, e.Weight(80, e.D), e.Ints(0), e.Op("Unsqueeze", nil, e.Seq, e.Ints(0)), e.Ints(0))
				ex := e.Op("Expand", nil, e.Op("Unsqueeze", nil, sl, e.Ints(0)), e.Op("Shape", nil, x))
				return e.Op("Add", nil, ex, x)
			},
			Scheme: "learned_absolute", Want: map[string]any{"max_positions": 80, "dim": 32, "position_offset": 0},
		},
		{
			// a learned table stored transposed, [dim, positions] (a
			// checkpoint laid out for x·Wᵀ), read with Gather on axis 1 and
			// transposed back to [S, dim].
			Name: "learned_transposed_gather_axis1", Heads: 2, HD: 16,
			Abs: func(e *schemetest.Env, x *graph.Value) *graph.Value {
				g := e.Op("Gather", e.Axis(1), e.Weight(e.D, 72), e.RangeS()) // [D, S]
				return e.Op("Add", nil, x, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 1, 0)}, g))
			},
			Scheme: "learned_absolute", Want: map[string]any{"max_positions": 72, "dim": 32, "position_offset": 0},
		},
		{
			// RoBERTa's positions (padding_idx 1: ids != 1 counted, plus 1)
			// reading a transposed [dim, positions] table with Gather on
			// axis 1: [D, B, S], transposed to [B, S, D].
			Name: "learned_transposed_gather_axis1_offset", Heads: 2, HD: 16,
			Abs: func(e *schemetest.Env, x *graph.Value) *graph.Value {
				m := e.ToInt(e.Op("Not", nil, e.Op("Equal", nil, e.IDs, e.Int0(1))))
				pos := e.Op("Add", nil, e.Op("Mul", nil, e.Op("CumSum", nil, m, e.Int0(1)), m), e.Int0(1))
				g := e.Op("Gather", e.Axis(1), e.Weight(e.D, 66), pos)
				return e.Op("Add", nil, x, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 1, 2, 0)}, g))
			},
			Scheme: "learned_absolute", Want: map[string]any{"max_positions": 66, "dim": 32, "position_offset": 2},
		},
		{
			// the transposed table read by a product with a one-hot of the
			// positions on axis 0: [D, 72]·[72, S], transposed.
			Name: "learned_transposed_onehot_matmul", Heads: 2, HD: 16,
			Abs: func(e *schemetest.Env, x *graph.Value) *graph.Value {
				oh := e.Op("OneHot", []*graph.Attr{graph.IntAttr("axis", 0)}, e.RangeS(), e.Int0(72), e.F32(0, 1))
				pe := e.Op("MatMul", nil, e.Weight(e.D, 72), oh)
				return e.Op("Add", nil, x, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 1, 0)}, pe))
			},
			Scheme: "learned_absolute", Want: map[string]any{"max_positions": 72, "dim": 32, "position_offset": 0},
		},
		{
			// the transposed table sliced on axis 1 to the sequence,
			// transposed and expanded to the batch.
			Name: "learned_transposed_slice_axis1", Heads: 2, HD: 16,
			Abs: func(e *schemetest.Env, x *graph.Value) *graph.Value {
				sl := e.Op("Slice", nil, e.Weight(e.D, 80), e.Ints(0), e.Op("Unsqueeze", nil, e.Seq, e.Ints(0)), e.Ints(1))
				tr := e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 1, 0)}, sl)
				return e.Op("Add", nil, x, tr)
			},
			Scheme: "learned_absolute", Want: map[string]any{"max_positions": 80, "dim": 32, "position_offset": 0},
		},
		{
			// BLOOM-like with 6 heads: slopes computed at run time from the
			// head count (the extra odd powers concatenated), bias slope·(j-i)
			// added to Where-masked scores.
			Name: "alibi_runtime_slopes_6_heads_where", Heads: 6, HD: 8,
			Bias: func(e *schemetest.Env, scores *graph.Value) *graph.Value {
				r := e.ToFloat(e.RangeS())
				rel := e.Op("Sub", nil, e.Op("Unsqueeze", nil, r, e.Ints(0)), e.Op("Unsqueeze", nil, r, e.Ints(1)))
				return e.Op("Add", nil, schemetest.CausalWhere(e, scores), e.Op("Mul", nil, rel, schemetest.RuntimeSlopes(e, 6)))
			},
			Scheme: "alibi", Want: map[string]any{"num_heads": 6, "slopes": schemetest.BloomSlopes(6), "symmetric": false},
		},
		{
			// MPT-like with 8 heads: run-time slopes times the key positions
			// only (shift-invariant along a row), Where-masked scores.
			Name: "alibi_runtime_slopes_8_heads_keys", Heads: 8, HD: 4,
			Bias: func(e *schemetest.Env, scores *graph.Value) *graph.Value {
				r := e.Op("Unsqueeze", nil, e.ToFloat(e.RangeS()), e.Ints(0)) // [1, S]
				return e.Op("Add", nil, e.Op("Mul", nil, schemetest.RuntimeSlopes(e, 8), r), schemetest.CausalWhere(e, scores))
			},
			Scheme: "alibi", Want: map[string]any{"num_heads": 8, "slopes": schemetest.BloomSlopes(8), "symmetric": false},
		},
		{
			// T5 encoder bias with the bucket function in another order.
			Name: "t5_bidirectional_reordered", Heads: 4, HD: 8,
			Bias: func(e *schemetest.Env, scores *graph.Value) *graph.Value {
				return schemetest.T5Bias(e, scores, 32, 128, true)
			},
			Scheme: "t5_relative_bias", Want: map[string]any{"num_buckets": 32, "max_distance": 128, "bidirectional": true, "num_heads": 4},
		},
		{
			// T5 decoder (causal) bias, -min(rel, 0) as Relu(-rel).
			Name: "t5_causal_relu", Heads: 4, HD: 8,
			Bias: func(e *schemetest.Env, scores *graph.Value) *graph.Value {
				return schemetest.T5Bias(e, scores, 32, 64, false)
			},
			Scheme: "t5_relative_bias", Want: map[string]any{"num_buckets": 32, "max_distance": 64, "bidirectional": false, "num_heads": 4},
		},
	}
}

// TestExporterForms audits each variant and checks the scheme, that it
// reaches the block, and every expected param.
func TestExporterForms(t *testing.T) {
	s := schema(t)
	for _, f := range exporterForms() {
		t.Run(f.Name, func(t *testing.T) {
			m := schemetest.BuildExporterForm(f)
			r, ctx, err := audit.AuditModel(m, f.Name, passes.Options{Trace: true})
			if err != nil {
				t.Fatal(err)
			}
			validate(t, s, r)
			if len(r.Schemes) != 1 || r.Schemes[0] != f.Scheme || len(r.Layers) != 1 || len(r.Findings) != 1 {
				t.Fatalf("schemes %v, layers %v, %d findings; want one %s layer (trace %v)", r.Schemes, r.Layers, len(r.Findings), f.Scheme, ctx.Trace())
			}
			got := schemetest.JSONParams(r.Findings[0])
			for k, w := range f.Want {
				if !schemetest.Agree(w, got[k]) {
					t.Errorf("%s = %v, want %v (params %v)", k, got[k], w, got)
				}
			}
		})
	}
}
