package kernels

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

// The newer relatives of attention in ONNX 1.23's set: LinearAttention
// (opset 27: linear, gated, delta and gated-delta recurrences with a
// carried state), CausalConvWithState (opset 27: a depthwise causal
// convolution with a carried left context), SwiGLU (opset 28) and
// ai.onnx.preview's FlexAttention (scaled dot-product attention whose
// scores and probabilities pass through model-supplied subgraphs).
// All compute in float64 and round once to the output type.

// linearAttention runs, for each batch and key/value head h and each
// step t, with state S (d_k x d_v, zero or past_state):
//
//	gated:  S *= exp(g_t)                      (decay, per head or per key dim)
//	delta:  v_t = beta_t * (v_t - Sᵀ k_t)
//	        S += k_t ⊗ v_t
//	        o_t = scale * Sᵀ q_t               (for each query head of h's group)
//
// and returns o (B, T, H_q*d_v) and the final state.
func linearAttention(c *Call, in []*Tensor) ([]*Tensor, error) {
	q, k, v := in[0], in[1], in[2]
	past, decay, beta := optIn(in, 3), optIn(in, 4), optIn(in, 5)
	rule := c.String("update_rule", "gated_delta")
	gating := rule == "gated" || rule == "gated_delta"
	delta := rule == "delta" || rule == "gated_delta"
	if !gating && !delta && rule != "linear" {
		return nil, fmt.Errorf("update_rule %q", rule)
	}
	if gating != (decay != nil) || delta != (beta != nil) {
		return nil, fmt.Errorf("update_rule %q: decay given %v, beta given %v", rule, decay != nil, beta != nil)
	}
	hq, hkv := int(c.Int("q_num_heads", 0)), int(c.Int("kv_num_heads", 0))
	if hq <= 0 || hkv <= 0 || hq%hkv != 0 {
		return nil, fmt.Errorf("q_num_heads %d must be a positive multiple of kv_num_heads %d", hq, hkv)
	}
	if len(q.Shape) != 3 || len(k.Shape) != 3 || len(v.Shape) != 3 {
		return nil, fmt.Errorf("query %v, key %v, value %v must be (B, T, H*D)", q.Shape, k.Shape, v.Shape)
	}
	b, t := q.Shape[0], q.Shape[1]
	if q.Shape[2]%hq != 0 || v.Shape[2]%hkv != 0 {
		return nil, fmt.Errorf("query %v and value %v do not split into %d and %d heads", q.Shape, v.Shape, hq, hkv)
	}
	dk, dv := q.Shape[2]/hq, v.Shape[2]/hkv
	if !equalShape(k.Shape, []int{b, t, hkv * dk}) || v.Shape[0] != b || v.Shape[1] != t {
		return nil, fmt.Errorf("key %v and value %v do not fit query %v", k.Shape, v.Shape, q.Shape)
	}
	var ds, bs []float64
	perDim := false
	if decay != nil {
		switch {
		case equalShape(decay.Shape, []int{b, t, hkv}):
		case equalShape(decay.Shape, []int{b, t, hkv * dk}):
			perDim = true
		default:
			return nil, fmt.Errorf("decay %v: want (%d, %d, %d) or (%d, %d, %d)", decay.Shape, b, t, hkv, b, t, hkv*dk)
		}
		ds = decay.Float64s()
	}
	bw := 0
	if beta != nil {
		if len(beta.Shape) != 3 || beta.Shape[0] != b || beta.Shape[1] != t || (beta.Shape[2] != hkv && beta.Shape[2] != 1) {
			return nil, fmt.Errorf("beta %v: want (%d, %d, %d or 1)", beta.Shape, b, t, hkv)
		}
		bs, bw = beta.Float64s(), beta.Shape[2]
	}
	stateType := q.DType
	state := make([]float64, b*hkv*dk*dv)
	if past != nil {
		if !equalShape(past.Shape, []int{b, hkv, dk, dv}) {
			return nil, fmt.Errorf("past_state %v: want %v", past.Shape, []int{b, hkv, dk, dv})
		}
		copy(state, past.Float64s())
		stateType = past.DType
	}
	scale := float64(c.Float("scale", 0))
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(dk))
	}
	qs, ks, vs := q.Float64s(), k.Float64s(), v.Float64s()
	out := make([]float64, b*t*hq*dv)
	group := hq / hkv
	vt := make([]float64, dv)
	for bi := range b {
		for h := range hkv {
			S := state[(bi*hkv+h)*dk*dv : (bi*hkv+h+1)*dk*dv]
			for ti := range t {
				kt := ks[(bi*t+ti)*hkv*dk+h*dk:][:dk]
				copy(vt, vs[(bi*t+ti)*hkv*dv+h*dv:][:dv])
				if gating {
					for d := range dk {
						g := ds[(bi*t+ti)*hkv+h]
						if perDim {
							g = ds[(bi*t+ti)*hkv*dk+h*dk+d]
						}
						e := math.Exp(g)
						row := S[d*dv : (d+1)*dv]
						for m := range row {
							row[m] *= e
						}
					}
				}
				if delta {
					bt := bs[(bi*t+ti)*bw+min(h, bw-1)]
					for m := range dv {
						var r float64
						for d := range dk {
							r += S[d*dv+m] * kt[d]
						}
						vt[m] = bt * (vt[m] - r)
					}
				}
				for d := range dk {
					row := S[d*dv : (d+1)*dv]
					for m := range row {
						row[m] += kt[d] * vt[m]
					}
				}
				for g := range group {
					hh := h*group + g
					qt := qs[(bi*t+ti)*hq*dk+hh*dk:][:dk]
					o := out[(bi*t+ti)*hq*dv+hh*dv:][:dv]
					for m := range o {
						var r float64
						for d := range dk {
							r += qt[d] * S[d*dv+m]
						}
						o[m] = scale * r
					}
				}
			}
		}
	}
	y := c.alloc(q.DType, b, t, hq*dv)
	fromFloat64(y, out)
	st := c.alloc(stateType, b, hkv, dk, dv)
	fromFloat64(st, state)
	return []*Tensor{y, st}, nil
}

// causalConvWithState is a depthwise 1-D convolution of input (B, C, L)
// by weight (C, 1, k) over the input prefixed with its last k-1 positions
// of context (past_state, or zeros): output (B, C, L) with an optional
// SiLU, and present_state the last k-1 positions of the prefixed input.
func causalConvWithState(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, w := in[0], in[1]
	bias, past := optIn(in, 2), optIn(in, 3)
	if len(x.Shape) != 3 || len(w.Shape) != 3 || w.Shape[1] != 1 || w.Shape[0] != x.Shape[1] || w.Shape[2] < 1 {
		return nil, fmt.Errorf("input %v and weight %v: want (B, C, L) and (C, 1, k)", x.Shape, w.Shape)
	}
	act := c.String("activation", "none")
	if act != "none" && act != "silu" && act != "swish" {
		return nil, fmt.Errorf("activation %q", act)
	}
	b, ch, l, k := x.Shape[0], x.Shape[1], x.Shape[2], w.Shape[2]
	ctx := k - 1
	pl := l + ctx
	xs, ws := x.Float64s(), w.Float64s()
	padded := make([]float64, b*ch*pl)
	if past != nil {
		if !equalShape(past.Shape, []int{b, ch, ctx}) {
			return nil, fmt.Errorf("past_state %v: want %v", past.Shape, []int{b, ch, ctx})
		}
		ps := past.Float64s()
		for r := range b * ch {
			copy(padded[r*pl:r*pl+ctx], ps[r*ctx:(r+1)*ctx])
		}
	}
	for r := range b * ch {
		copy(padded[r*pl+ctx:(r+1)*pl], xs[r*l:(r+1)*l])
	}
	var bs []float64
	if bias != nil {
		if bias.Len() != ch {
			return nil, fmt.Errorf("bias %v: want %d values", bias.Shape, ch)
		}
		bs = bias.Float64s()
	}
	out := make([]float64, b*ch*l)
	for r := range b * ch {
		cc := r % ch
		for i := range l {
			var s float64
			for j := range k {
				s += padded[r*pl+i+j] * ws[cc*k+j]
			}
			if bs != nil {
				s += bs[cc]
			}
			if act != "none" {
				s *= sigmoid(s)
			}
			out[r*l+i] = s
		}
	}
	state := make([]float64, b*ch*ctx)
	for r := range b * ch {
		copy(state[r*ctx:(r+1)*ctx], padded[(r+1)*pl-ctx:(r+1)*pl])
	}
	y := c.alloc(x.DType, b, ch, l)
	storeRounded(c, y, out)
	st := c.alloc(x.DType, b, ch, ctx)
	storeRounded(c, st, state)
	return []*Tensor{y, st}, nil
}

// swiGLU is a * sigmoid(alpha * a) * b for a and b of the same shape.
func swiGLU(c *Call, in []*Tensor) ([]*Tensor, error) {
	a, b := in[0], in[1]
	if !equalShape(a.Shape, b.Shape) || a.DType != b.DType {
		return nil, fmt.Errorf("A %v and B %v must have the same shape and type", a, b)
	}
	alpha := float64(c.Float("alpha", 1))
	as, bs := a.Float64s(), b.Float64s()
	for i, x := range as {
		as[i] = x * sigmoid(alpha*x) * bs[i]
	}
	y := c.alloc(a.DType, a.Shape...)
	storeRounded(c, y, as)
	return []*Tensor{y}, nil
}

// flexAttention is softmax(prob_mod(softmax(score_mod(Q Kᵀ * scale))))
// · V per batch and head (key/value heads shared by groups of query
// heads), the scores in float32 (float64 for double inputs) as the
// subgraphs see them.
func flexAttention(c *Call, in []*Tensor) ([]*Tensor, error) {
	q, k, v := in[0], in[1], in[2]
	if len(q.Shape) != 4 || len(k.Shape) != 4 || len(v.Shape) != 4 {
		return nil, fmt.Errorf("Q %v, K %v, V %v must be rank 4", q.Shape, k.Shape, v.Shape)
	}
	b, hq, l, e := q.Shape[0], q.Shape[1], q.Shape[2], q.Shape[3]
	hkv, s := k.Shape[1], k.Shape[2]
	ev := v.Shape[3]
	if k.Shape[0] != b || v.Shape[0] != b || k.Shape[3] != e || v.Shape[1] != hkv || v.Shape[2] != s || hkv <= 0 || hq%hkv != 0 {
		return nil, fmt.Errorf("Q %v, K %v, V %v do not fit", q.Shape, k.Shape, v.Shape)
	}
	scale := 1 / math.Sqrt(float64(e))
	if c.Attr("scale") != nil {
		scale = float64(c.Float("scale", 0))
	}
	ct := graph.Float
	if q.DType == graph.Double {
		ct = graph.Double
	}
	if p := c.Int("softmax_precision", 0); p != 0 {
		ct = graph.DataType(p)
		if ct != graph.Float && ct != graph.Double {
			return nil, fmt.Errorf("softmax_precision %v: %w", ct, ErrUnsupportedType)
		}
	}
	qs, ks, vs := q.Float64s(), k.Float64s(), v.Float64s()
	group := hq / hkv
	scores := make([]float64, b*hq*l*s)
	for bi := range b {
		for h := range hq {
			kh := h / group
			for i := range l {
				qr := qs[((bi*hq+h)*l+i)*e:][:e]
				for j := range s {
					kr := ks[((bi*hkv+kh)*s+j)*e:][:e]
					var d float64
					for x := range e {
						d += qr[x] * kr[x]
					}
					scores[((bi*hq+h)*l+i)*s+j] = d * scale
				}
			}
		}
	}
	mod := func(name string, v []float64) ([]float64, error) {
		if c.Attr(name) == nil {
			return v, nil
		}
		t := c.alloc(ct, b, hq, l, s)
		fromFloat64(t, v)
		outs, err := c.runSub(name, []*Tensor{t})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(outs) != 1 || outs[0] == nil || !equalShape(outs[0].Shape, t.Shape) {
			return nil, fmt.Errorf("%s must return one tensor of shape %v", name, t.Shape)
		}
		return outs[0].Float64s(), nil
	}
	scores, err := mod("score_mod", scores)
	if err != nil {
		return nil, err
	}
	for r := range b * hq * l {
		row := scores[r*s : (r+1)*s]
		m := math.Inf(-1)
		for _, x := range row {
			m = math.Max(m, x)
		}
		var sum float64
		for j, x := range row {
			row[j] = math.Exp(x - m)
			sum += row[j]
		}
		for j := range row {
			row[j] /= sum
		}
	}
	probs, err := mod("prob_mod", scores)
	if err != nil {
		return nil, err
	}
	out := make([]float64, b*hq*l*ev)
	for bi := range b {
		for h := range hq {
			kh := h / group
			for i := range l {
				p := probs[((bi*hq+h)*l+i)*s:][:s]
				o := out[((bi*hq+h)*l+i)*ev:][:ev]
				for j, pj := range p {
					vr := vs[((bi*hkv+kh)*s+j)*ev:][:ev]
					for x := range o {
						o[x] += pj * vr[x]
					}
				}
			}
		}
	}
	y := c.alloc(v.DType, b, hq, l, ev)
	storeRounded(c, y, out)
	return []*Tensor{y}, nil
}

// DomainPreview is the domain of ONNX's preview ops.
const DomainPreview = "ai.onnx.preview"

func init() {
	Register("", "LinearAttention", 27, 0, linearAttention, Native)
	reg("CausalConvWithState", 27, 0, causalConvWithState)
	reg("SwiGLU", 28, 0, swiGLU)
	Register(DomainPreview, "FlexAttention", 1, 0, flexAttention, 0)
}
