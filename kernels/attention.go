package kernels

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

// The attention family of the ONNX domain: Attention (opsets 23 and 24),
// RMSNormalization (23) and TensorScatter (24).

// onnxMask is Attention's attn_mask, broadcast to (B, Nq, S, T): bool
// (true attends) or additive float; keys past its last dimension (which
// may be shorter than T) are masked.
type onnxMask struct {
	f              []float32
	b              []bool
	dB, dN, dS, mT int // the mask's dimensions, 1 where broadcast
}

func newONNXMask(m *Tensor, B, N, S, T int) (*onnxMask, error) {
	if m == nil {
		return nil, nil
	}
	if len(m.Shape) < 1 || len(m.Shape) > 4 {
		return nil, fmt.Errorf("attn_mask must have rank 1 to 4, got %v", m.Shape)
	}
	d := append(make([]int, 4-len(m.Shape)), m.Shape...)
	for i := range 4 - len(m.Shape) {
		d[i] = 1
	}
	for i, want := range []int{B, N, S} {
		if d[i] != 1 && d[i] != want {
			return nil, fmt.Errorf("attn_mask %v does not broadcast to (%d, %d, %d, %d)", m.Shape, B, N, S, T)
		}
	}
	if d[3] > T {
		return nil, fmt.Errorf("attn_mask %v has more than the %d keys", m.Shape, T)
	}
	om := &onnxMask{dB: d[0], dN: d[1], dS: d[2], mT: d[3]}
	switch m.DType {
	case graph.Bool:
		om.b = Data[bool](m)
	case graph.Float:
		om.f = Data[float32](m)
	default:
		return nil, fmt.Errorf("attn_mask must be bool or of Q's float type, got %v", m.DType)
	}
	return om, nil
}

// add adds row (b, n, s) of the mask to x (x[j] for key j): -Inf where a
// bool mask is false and past the mask's keys.
func (m *onnxMask) add(x []float32, b, n, s int) {
	bi, ni, si := b, n, s
	if m.dB == 1 {
		bi = 0
	}
	if m.dN == 1 {
		ni = 0
	}
	if m.dS == 1 {
		si = 0
	}
	o := ((bi*m.dN+ni)*m.dS + si) * m.mT
	n0 := min(len(x), m.mT)
	if m.b != nil {
		row := m.b[o : o+m.mT]
		for j := range n0 {
			if !row[j] {
				x[j] = float32(math.Inf(-1))
			}
		}
	} else {
		row := m.f[o : o+m.mT]
		for j := range n0 {
			x[j] += row[j]
		}
	}
	for j := n0; j < len(x); j++ {
		x[j] = float32(math.Inf(-1))
	}
}

// attentionONNX is Attention of the ONNX domain (opsets 23 and 24).
//
// Q, K, V are (B, N, S, H) or (B, S, N*H) with the q_num_heads and
// kv_num_heads attributes; key/value head n/(Nq/Nkv) serves query head n.
// past_key and past_value (B, Nkv, P, H) come before K and V in
// present_key and present_value. Scores are scale * Q.K^T (scale
// 1/sqrt(H) by default), softcapped (softcap * tanh(x/softcap)) when
// softcap > 0, plus attn_mask (bool: false is -Inf; a last dimension
// shorter than the keys masks the rest), with is_causal masking key j for
// query s unless j <= s + offset (offset: P with a past; nonpad_kv_seqlen[b]
// - S with nonpad_kv_seqlen and no past; else 0), and nonpad_kv_seqlen
// (opset 24) masking keys j >= nonpad_kv_seqlen[b]. A query row with every
// key masked gives zeros. qk_matmul_output is, by qk_matmul_output_mode,
// in the order of the computation: 0 the scaled Q.K^T, 1 after softcap,
// 2 after the masks, 3 the softmax.
func attentionONNX(c *Call, in []*Tensor) ([]*Tensor, error) {
	q, k, v := in[0], in[1], in[2]
	maskT, pastK, pastV := optIn(in, 3), optIn(in, 4), optIn(in, 5)
	nonpadT := optIn(in, 6)
	if nonpadT != nil && c.Opset < 24 {
		return nil, fmt.Errorf("nonpad_kv_seqlen needs opset 24")
	}
	if len(q.Shape) != len(k.Shape) || len(q.Shape) != len(v.Shape) || (len(q.Shape) != 3 && len(q.Shape) != 4) {
		return nil, fmt.Errorf("Q, K and V must all be 3-D or all 4-D, got %v, %v and %v", q.Shape, k.Shape, v.Shape)
	}
	B := q.Shape[0]
	var Nq, Nkv, S, L, Hq, Hk, Hv int
	var qr, kr, vr rowsOf
	threeD := len(q.Shape) == 3
	if threeD {
		Nq, Nkv = int(c.Int("q_num_heads", 0)), int(c.Int("kv_num_heads", 0))
		if Nq <= 0 || Nkv <= 0 {
			return nil, fmt.Errorf("3-D inputs need the q_num_heads and kv_num_heads attributes")
		}
		S, L = q.Shape[1], k.Shape[1]
		if q.Shape[2]%Nq != 0 || k.Shape[2]%Nkv != 0 || v.Shape[2]%Nkv != 0 {
			return nil, fmt.Errorf("hidden sizes %d, %d, %d are not multiples of q_num_heads %d / kv_num_heads %d", q.Shape[2], k.Shape[2], v.Shape[2], Nq, Nkv)
		}
		Hq, Hk, Hv = q.Shape[2]/Nq, k.Shape[2]/Nkv, v.Shape[2]/Nkv
		if v.Shape[1] != L {
			return nil, fmt.Errorf("K %v and V %v differ in sequence length", k.Shape, v.Shape)
		}
		qr, kr, vr = bsnh(Data[float32](q), Nq, S, Hq), bsnh(Data[float32](k), Nkv, L, Hk), bsnh(Data[float32](v), Nkv, L, Hv)
	} else {
		Nq, S, Hq = q.Shape[1], q.Shape[2], q.Shape[3]
		Nkv, L, Hk = k.Shape[1], k.Shape[2], k.Shape[3]
		if v.Shape[1] != Nkv || v.Shape[2] != L {
			return nil, fmt.Errorf("K %v and V %v differ in heads or sequence length", k.Shape, v.Shape)
		}
		Hv = v.Shape[3]
		qr, kr, vr = bnsh(Data[float32](q), Nq, S, Hq), bnsh(Data[float32](k), Nkv, L, Hk), bnsh(Data[float32](v), Nkv, L, Hv)
	}
	if k.Shape[0] != B || v.Shape[0] != B {
		return nil, fmt.Errorf("Q, K and V differ in batch size")
	}
	if Hq != Hk {
		return nil, fmt.Errorf("Q head size %d differs from K's %d", Hq, Hk)
	}
	if Nkv <= 0 || Nq%Nkv != 0 {
		return nil, fmt.Errorf("query heads %d are not a multiple of key/value heads %d", Nq, Nkv)
	}
	P := 0
	if (pastK == nil) != (pastV == nil) {
		return nil, fmt.Errorf("past_key and past_value must be both present or both absent")
	}
	if pastK != nil {
		if len(pastK.Shape) != 4 || len(pastV.Shape) != 4 || pastK.Shape[0] != B || pastK.Shape[1] != Nkv || pastK.Shape[3] != Hk ||
			pastV.Shape[0] != B || pastV.Shape[1] != Nkv || pastV.Shape[3] != Hv || pastK.Shape[2] != pastV.Shape[2] {
			return nil, fmt.Errorf("past_key %v and past_value %v must be (%d, %d, P, %d) and (%d, %d, P, %d)", pastK.Shape, pastV.Shape, B, Nkv, Hk, B, Nkv, Hv)
		}
		P = pastK.Shape[2]
	}
	T := P + L
	var presK, presV *Tensor
	if pastK != nil || c.HasOutput(1) || c.HasOutput(2) {
		presK, presV = c.alloc(graph.Float, B, Nkv, T, Hk), c.alloc(graph.Float, B, Nkv, T, Hv)
		var pk, pv []float32
		if pastK != nil {
			pk, pv = Data[float32](pastK), Data[float32](pastV)
		}
		concatKV(Data[float32](presK), pk, kr, B, Nkv, P, L, Hk)
		concatKV(Data[float32](presV), pv, vr, B, Nkv, P, L, Hv)
		kr, vr = bnsh(Data[float32](presK), Nkv, T, Hk), bnsh(Data[float32](presV), Nkv, T, Hv)
	}
	mask, err := newONNXMask(maskT, B, Nq, S, T)
	if err != nil {
		return nil, err
	}
	var nonpad []int64
	if nonpadT != nil {
		if nonpadT.Len() != B {
			return nil, fmt.Errorf("nonpad_kv_seqlen must have %d elements, got %v", B, nonpadT.Shape)
		}
		nonpad = nonpadT.Int64s()
		for b, n := range nonpad {
			if n < 0 || n > int64(T) {
				return nil, fmt.Errorf("nonpad_kv_seqlen[%d] = %d is outside [0, %d]", b, n, T)
			}
		}
	}
	causal := c.Int("is_causal", 0) == 1
	// limit is the number of leading keys row (b, s) may attend to.
	limit := func(b, s int) int {
		hi := T
		if causal {
			off := 0
			switch {
			case pastK != nil:
				off = P
			case nonpad != nil:
				off = int(nonpad[b]) - S
			}
			hi = min(hi, max(s+off+1, 0))
		}
		if nonpad != nil {
			hi = min(hi, int(nonpad[b]))
		}
		return hi
	}
	scale := c.Float("scale", 0)
	if a := c.Attr("scale"); a == nil {
		scale = 1 / float32(math.Sqrt(float64(Hq)))
	}
	softcap := c.Float("softcap", 0)
	mode := c.Int("qk_matmul_output_mode", 0)
	if mode < 0 || mode > 3 {
		return nil, fmt.Errorf("qk_matmul_output_mode %d (0 to 3)", mode)
	}
	var qk *Tensor
	var qkd []float32
	if c.HasOutput(3) {
		qk = c.alloc(graph.Float, B, Nq, S, T)
		qkd = Data[float32](qk)
	}
	qkRow := func(b, n, s int) []float32 {
		o := ((b*Nq+n)*S + s) * T
		return qkd[o : o+T]
	}
	out := c.alloc(graph.Float, B, S, Nq*Hv)
	outRows := bsnh(Data[float32](out), Nq, S, Hv)
	if !threeD {
		out = out.Reshaped(B, Nq, S, Hv)
		outRows = bnsh(Data[float32](out), Nq, S, Hv)
	}
	inf := float32(math.Inf(-1))
	j := &attnJob{B: B, Nq: Nq, Nkv: Nkv, S: S, T: T, Hk: Hk, Hv: Hv, q: qr, k: kr, v: vr, out: outRows,
		scale: scale, maskedZero: true,
		row: func(sc []float32, b, n, s int) (int, int) {
			if qkd != nil && mode == 0 {
				copy(qkRow(b, n, s), sc)
			}
			if softcap > 0 {
				softcapRow(sc, softcap)
			}
			if qkd != nil && mode == 1 {
				copy(qkRow(b, n, s), sc)
			}
			if mask != nil {
				mask.add(sc, b, n, s)
			}
			hi := min(limit(b, s), len(sc))
			for i := hi; i < len(sc); i++ {
				sc[i] = inf
			}
			if qkd != nil && mode == 2 {
				copy(qkRow(b, n, s), sc)
			}
			return 0, max(hi, 0)
		},
	}
	if qkd == nil {
		j.keys = limit
	}
	if qkd != nil && mode == 3 {
		j.probs = func(p []float32, b, n, s int) { copy(qkRow(b, n, s), p) }
	}
	j.run(c)
	return []*Tensor{out, presK, presV, qk}, nil
}

// rmsNormalization is RMSNormalization (opset 23): x / sqrt(mean(x^2) +
// epsilon) * scale over the dimensions from axis on.
func rmsNormalization(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	axis, err := normAxis(c.Int("axis", -1), len(x.Shape))
	if err != nil {
		return nil, err
	}
	if _, err := stashType(c); err != nil {
		return nil, err
	}
	y, _, _, err := normalize(c, x, in[1], nil, axis, float64(c.Float("epsilon", 1e-5)), true, graph.Float)
	if err != nil {
		return nil, err
	}
	return []*Tensor{y}, nil
}

// tensorScatter is TensorScatter (opset 24): a copy of past_cache with
// update written along axis at write_indices[b] for batch entry b (0
// without write_indices); mode "circular" wraps the positions around the
// cache's length, "linear" (default) requires them to fit.
func tensorScatter(c *Call, in []*Tensor) ([]*Tensor, error) {
	cache, upd, idxT := in[0], in[1], optIn(in, 2)
	r := len(cache.Shape)
	if r < 2 || len(upd.Shape) != r || upd.DType != cache.DType {
		return nil, fmt.Errorf("past_cache %v and update %v must have the same rank (at least 2) and type", cache, upd)
	}
	axis := c.Int("axis", -2)
	if axis < 0 {
		axis += int64(r)
	}
	if axis < 1 || axis >= int64(r) {
		return nil, fmt.Errorf("axis %d must be a dimension after the batch one of rank %d", c.Int("axis", -2), r)
	}
	ax := int(axis)
	for i := range r {
		if i != ax && upd.Shape[i] != cache.Shape[i] {
			return nil, fmt.Errorf("update %v differs from past_cache %v outside axis %d", upd.Shape, cache.Shape, ax)
		}
	}
	circular := false
	switch m := c.String("mode", "linear"); m {
	case "linear":
	case "circular":
		circular = true
	default:
		return nil, fmt.Errorf("mode %q (linear or circular)", m)
	}
	B, M, U := cache.Shape[0], cache.Shape[ax], upd.Shape[ax]
	if U > M {
		return nil, fmt.Errorf("update has %d positions along axis %d, the cache %d", U, ax, M)
	}
	starts := make([]int64, B)
	if idxT != nil {
		if idxT.Len() != B {
			return nil, fmt.Errorf("write_indices must have %d elements, got %v", B, idxT.Shape)
		}
		copy(starts, idxT.Int64s())
	}
	for b, s := range starts {
		// Circular mode takes the index modulo the axis (ONNX's
		// definition; ONNX Runtime does the same).
		if s < 0 || (!circular && s+int64(U) > int64(M)) {
			return nil, fmt.Errorf("write_indices[%d] = %d: %d positions do not fit the %d of axis %d", b, s, U, M, ax)
		}
	}
	out := c.clone(cache)
	// Each batch entry is (outer, M or U, inner) around the axis.
	inner := shapeSize(cache.Shape[ax+1:])
	outer := shapeSize(cache.Shape[1:ax])
	for b := range B {
		for o := range outer {
			for u := range U {
				p := (int(starts[b]%int64(M)) + u) % M
				dst := ((b*outer+o)*M + p) * inner
				src := ((b*outer+o)*U + u) * inner
				copyAny(out, dst, upd, src, inner)
			}
		}
	}
	return []*Tensor{out}, nil
}

func init() {
	reg("Attention", 23, 0, float32Kernel(attentionONNX))
	reg("RMSNormalization", 23, 0, rmsNormalization)
	Register("", "TensorScatter", 24, 0, tensorScatter, Native)
}
