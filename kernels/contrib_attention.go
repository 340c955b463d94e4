package kernels

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

// ONNX Runtime's attention contrib ops (domain com.microsoft), as its CPU
// provider computes them: GroupQueryAttention (the op of ONNX Runtime
// GenAI's model builder), MultiHeadAttention, Attention and QAttention
// (the ops of its transformer optimizer). All run on the shared attention
// of attention_core.go; float16 and bfloat16 are computed in float32.

// attnScale is the softmax scale: the attribute, or 1/sqrt(head size)
// computed in float32 as ONNX Runtime does.
func attnScale(attr float32, headSize int) float32 {
	if attr != 0 {
		return attr
	}
	return 1 / float32(math.Sqrt(float64(headSize)))
}

// softcapRow applies cap*tanh(x/cap) in place (cap > 0).
func softcapRow(x []float32, cap float32) {
	c := float64(cap)
	for i, v := range x {
		x[i] = float32(c * math.Tanh(float64(v/cap)))
	}
}

// dims3 checks that t is 3-D and returns its dimensions.
func dims3(t *Tensor, name string) (int, int, int, error) {
	if len(t.Shape) != 3 {
		return 0, 0, 0, fmt.Errorf("%s must be 3-D, got %v", name, t.Shape)
	}
	return t.Shape[0], t.Shape[1], t.Shape[2], nil
}

// scalarInt reads a one-element integer tensor.
// scalarFloat is the value of a one-element input.
func scalarFloat(t *Tensor, name string) (float64, error) {
	if t.Len() != 1 {
		return 0, fmt.Errorf("%s must have one element, got %v", name, t.Shape)
	}
	return t.Float64s()[0], nil
}

func scalarInt(t *Tensor, name string) (int64, error) {
	if t.Len() != 1 {
		return 0, fmt.Errorf("%s must have one element, got %v", name, t.Shape)
	}
	return t.Int64s()[0], nil
}

// biasRows describes an additive attention bias of shape (B or 1, N or 1,
// S, T): row (b, n, s) is at off(b, n, s), T wide.
type biasRows struct {
	d            []float32
	bb, bn, S, T int
}

func newBiasRows(t *Tensor, b, n, s, total int, name string) (*biasRows, error) {
	if t == nil {
		return nil, nil
	}
	if len(t.Shape) != 4 || (t.Shape[0] != b && t.Shape[0] != 1) || (t.Shape[1] != n && t.Shape[1] != 1) ||
		t.Shape[2] != s || t.Shape[3] != total {
		return nil, fmt.Errorf("%s %v must be (%d or 1, %d or 1, %d, %d)", name, t.Shape, b, n, s, total)
	}
	return &biasRows{d: Data[float32](t), bb: t.Shape[0], bn: t.Shape[1], S: s, T: total}, nil
}

func (r *biasRows) row(b, n, s int) []float32 {
	if r.bb == 1 {
		b = 0
	}
	if r.bn == 1 {
		n = 0
	}
	o := ((b*r.bn+n)*r.S + s) * r.T
	return r.d[o : o+r.T]
}

// addRow adds the bias over x (len(x) <= T).
func addRow(x, bias []float32) {
	bias = bias[:len(x)]
	for i := range x {
		x[i] += bias[i]
	}
}

// ---------------------------------------------------------------------
// GroupQueryAttention

// gqaRotate applies rotary embedding to heads [h0, h1) of every token of
// x, laid out (B, S, heads, H), in place: the first rd elements of each
// head, half-split or interleaved, at position pos(b, s) of the cos/sin
// caches (rows of rd/2).
func gqaRotate(x []float32, B, S, heads, h0, h1, H, rd int, interleaved bool, cosC, sinC []float32, pos func(b, s int) int) {
	half := rd / 2
	for b := range B {
		for s := range S {
			p := pos(b, s)
			cr, sr := cosC[p*half:p*half+half], sinC[p*half:p*half+half]
			for h := h0; h < h1; h++ {
				o := ((b*S+s)*heads + h) * H
				xv := x[o : o+rd]
				for i := range half {
					i1, i2 := i, i+half
					if interleaved {
						i1, i2 = 2*i, 2*i+1
					}
					a, c := xv[i1], xv[i2]
					xv[i1] = a*cr[i] - c*sr[i]
					xv[i2] = a*sr[i] + c*cr[i]
				}
			}
		}
	}
}

// groupQueryAttention is com.microsoft GroupQueryAttention.
//
// Inputs: query (B, S, Nq*H), or (B, S, (Nq+2*Nkv)*H) with Q, K and V
// packed when key and value are absent; key, value (B, S, Nkv*H);
// past_key, past_value (B, Nkv, P, H); seqlens_k (B) int32, the valid
// length of each sequence minus one; total_sequence_length (int32
// scalar); cos_cache, sin_cache (max_position, rotary_dim/2) for
// do_rotary; position_ids (B, S) int64 (on a first prompt only its first
// element counts: row b's token s is at position_ids[0, 0] + s, as ONNX
// Runtime 1.30's CPU kernel reads them); attention_bias (B|1, Nq|1, S,
// total); head_sink (Nq).
//
// Outputs: output (B, S, Nq*H); present_key, present_value (B, Nkv,
// max(total, P), H); output_qk (B, Nq, S, total) when qk_output is 1
// (scores before softmax) or 2 (probabilities).
//
// A call is the first prompt when S equals total_sequence_length: batch
// entry b then holds seqlens_k[b]+1 valid tokens at the start (right
// padding) and no past. Otherwise entry b's past holds seqlens_k[b]+1-S
// tokens and the S new ones follow them. Query row s attends causally to
// the tokens up to its own (and, with local_window_size w >= 0, to the
// last w of them); rows past a sequence's end (padding) attend to all its
// tokens.
func groupQueryAttention(c *Call, in []*Tensor) ([]*Tensor, error) {
	query, key, value := in[0], optIn(in, 1), optIn(in, 2)
	pastK, pastV := optIn(in, 3), optIn(in, 4)
	if len(in) < 7 || in[5] == nil || in[6] == nil {
		return nil, fmt.Errorf("seqlens_k and total_sequence_length are required")
	}
	seqlensT, totalT := in[5], in[6]
	cosC, sinC := optIn(in, 7), optIn(in, 8)
	posIDs, biasT, sinkT := optIn(in, 9), optIn(in, 10), optIn(in, 11)
	nq, nkv := int(c.Int("num_heads", 0)), int(c.Int("kv_num_heads", 0))
	if nq <= 0 || nkv <= 0 || nq%nkv != 0 {
		return nil, fmt.Errorf("num_heads %d and kv_num_heads %d: both must be positive, num_heads a multiple of kv_num_heads", nq, nkv)
	}
	if c.String("k_quant_type", "NONE") != "NONE" || c.String("v_quant_type", "NONE") != "NONE" {
		return nil, fmt.Errorf("quantized KV caches (k_quant_type/v_quant_type): %w", ErrUnsupportedOp)
	}
	B, S, hid, err := dims3(query, "query")
	if err != nil {
		return nil, err
	}
	packed := key == nil
	var H int
	if packed {
		if value != nil {
			return nil, fmt.Errorf("key and value must be both present or both absent (packed QKV)")
		}
		if hid%(nq+2*nkv) != 0 {
			return nil, fmt.Errorf("packed QKV hidden size %d is not a multiple of num_heads + 2*kv_num_heads = %d", hid, nq+2*nkv)
		}
		H = hid / (nq + 2*nkv)
	} else {
		if value == nil {
			return nil, fmt.Errorf("key and value must be both present or both absent (packed QKV)")
		}
		if hid%nq != 0 {
			return nil, fmt.Errorf("query hidden size %d is not a multiple of num_heads %d", hid, nq)
		}
		H = hid / nq
		for _, t := range []*Tensor{key, value} {
			if len(t.Shape) != 3 || t.Shape[0] != B || t.Shape[1] != S || t.Shape[2] != nkv*H {
				return nil, fmt.Errorf("key and value must be (%d, %d, %d), got %v and %v", B, S, nkv*H, key.Shape, value.Shape)
			}
		}
	}
	P := 0
	if (pastK == nil) != (pastV == nil) {
		return nil, fmt.Errorf("past_key and past_value must be both present or both absent")
	}
	if pastK != nil {
		for _, t := range []*Tensor{pastK, pastV} {
			if len(t.Shape) != 4 || t.Shape[0] != B || t.Shape[1] != nkv || t.Shape[3] != H {
				return nil, fmt.Errorf("past_key and past_value must be (%d, %d, P, %d), got %v and %v", B, nkv, H, pastK.Shape, pastV.Shape)
			}
		}
		if pastK.Shape[2] != pastV.Shape[2] {
			return nil, fmt.Errorf("past_key %v and past_value %v differ", pastK.Shape, pastV.Shape)
		}
		P = pastK.Shape[2]
	}
	if seqlensT.Len() != B {
		return nil, fmt.Errorf("seqlens_k must have batch size %d elements, got %v", B, seqlensT.Shape)
	}
	total64, err := scalarInt(totalT, "total_sequence_length")
	if err != nil {
		return nil, err
	}
	total := int(total64)
	if total < 1 || total64 > math.MaxInt32 {
		return nil, fmt.Errorf("total_sequence_length %d", total64)
	}
	firstPrompt := S == total
	if !firstPrompt && S > 1 && B != 1 {
		return nil, fmt.Errorf("batch size must be 1 when sequence length %d > 1 and differs from total_sequence_length %d", S, total)
	}
	Tp := max(total, P)
	seqlens := seqlensT.Int64s()
	totals := make([]int, B) // valid tokens of each entry
	pasts := make([]int, B)  // of them, in the past
	for b, v := range seqlens {
		t := int(v) + 1
		if v < 0 || t > Tp {
			return nil, fmt.Errorf("seqlens_k[%d] = %d is outside [0, %d)", b, v, Tp)
		}
		totals[b] = t
		if !firstPrompt && pastK != nil {
			pasts[b] = t - S
			if pasts[b] < 0 {
				return nil, fmt.Errorf("seqlens_k[%d] = %d is shorter than the %d new tokens", b, v, S)
			}
			if pasts[b] > P {
				return nil, fmt.Errorf("seqlens_k[%d] = %d needs %d past tokens, past_key holds %d", b, v, pasts[b], P)
			}
		}
	}
	heads := nq
	if packed {
		heads = nq + 2*nkv
	}
	// Q, and the new K and V, as (B, S, heads, H) rows; rotated copies
	// with do_rotary.
	qd := Data[float32](query)
	var kd, vd []float32
	kHeads := nkv
	if !packed {
		kd, vd = Data[float32](key), Data[float32](value)
	}
	if c.Int("do_rotary", 0) == 1 {
		if cosC == nil || sinC == nil {
			return nil, fmt.Errorf("do_rotary needs cos_cache and sin_cache")
		}
		if len(cosC.Shape) != 2 || !equalShape(cosC.Shape, sinC.Shape) {
			return nil, fmt.Errorf("cos_cache %v and sin_cache %v must be the same 2-D shape", cosC.Shape, sinC.Shape)
		}
		rd := 2 * cosC.Shape[1]
		if rd > H || rd == 0 {
			return nil, fmt.Errorf("cos_cache has %d columns: rotary dimension %d for head size %d", cosC.Shape[1], rd, H)
		}
		maxPos := cosC.Shape[0]
		var pos func(b, s int) int
		switch {
		case posIDs != nil:
			if len(posIDs.Shape) != 2 || posIDs.Shape[0] != B || posIDs.Shape[1] < S {
				return nil, fmt.Errorf("position_ids %v must be (%d, >= %d)", posIDs.Shape, B, S)
			}
			p, w := posIDs.Int64s(), posIDs.Shape[1]
			for b := range B {
				for s := range S {
					if v := p[b*w+s]; v < 0 || v >= int64(maxPos) {
						return nil, fmt.Errorf("position_ids[%d, %d] = %d is outside the cos/sin cache of %d rows", b, s, v, maxPos)
					}
				}
			}
			pos = func(b, s int) int { return int(p[b*w+s]) }
			if firstPrompt {
				// ONNX Runtime 1.30 (CPU) reads one first position on a
				// prompt, position_ids[0, 0], and numbers every row's
				// tokens from it; per token only after a past.
				if p[0]+int64(S) > int64(maxPos) {
					return nil, fmt.Errorf("positions %d..%d exceed the cos/sin cache of %d rows", p[0], p[0]+int64(S)-1, maxPos)
				}
				pos = func(_, s int) int { return int(p[0]) + s }
			}
		case firstPrompt:
			if S > maxPos {
				return nil, fmt.Errorf("%d positions exceed the cos/sin cache of %d rows", S, maxPos)
			}
			pos = func(_, s int) int { return s }
		default:
			for b := range B {
				if totals[b]-1 >= maxPos {
					return nil, fmt.Errorf("position %d is outside the cos/sin cache of %d rows", totals[b]-1, maxPos)
				}
			}
			pos = func(b, s int) int { return totals[b] - S + s }
		}
		cs, sn := Data[float32](cosC), Data[float32](sinC)
		il := c.Int("rotary_interleaved", 0) == 1
		if packed {
			qr := c.alloc(graph.Float, len(qd))
			copy(Data[float32](qr), qd)
			qd = Data[float32](qr)
			gqaRotate(qd, B, S, heads, 0, nq+nkv, H, rd, il, cs, sn, pos)
		} else {
			qr, kr := c.alloc(graph.Float, len(qd)), c.alloc(graph.Float, len(kd))
			copy(Data[float32](qr), qd)
			copy(Data[float32](kr), kd)
			qd, kd = Data[float32](qr), Data[float32](kr)
			gqaRotate(qd, B, S, nq, 0, nq, H, rd, il, cs, sn, pos)
			gqaRotate(kd, B, S, nkv, 0, nkv, H, rd, il, cs, sn, pos)
		}
	}
	newK := bsnh(kd, kHeads, S, H)
	newV := bsnh(vd, kHeads, S, H)
	if packed {
		newK = bsnh(qd[nq*H:], heads, S, H)
		newV = bsnh(qd[(nq+nkv)*H:], heads, S, H)
	}
	// The present caches: each entry's past tokens, then its new ones,
	// then zeros.
	presK := c.zeros(graph.Float, B, nkv, Tp, H)
	presV := c.zeros(graph.Float, B, nkv, Tp, H)
	pk, pv := Data[float32](presK), Data[float32](presV)
	for b := range B {
		for h := range nkv {
			dst := (b*nkv + h) * Tp * H
			if pastK != nil && pasts[b] > 0 {
				src := (b*nkv + h) * P * H
				copy(pk[dst:dst+pasts[b]*H], Data[float32](pastK)[src:])
				copy(pv[dst:dst+pasts[b]*H], Data[float32](pastV)[src:])
			}
			for s := range S {
				if pasts[b]+s >= Tp {
					break
				}
				o := dst + (pasts[b]+s)*H
				ko, vo := newK.at(b, h, s), newV.at(b, h, s)
				copy(pk[o:o+H], newK.d[ko:ko+H])
				copy(pv[o:o+H], newV.d[vo:vo+H])
			}
		}
	}
	bias, err := newBiasRows(biasT, B, nq, S, total, "attention_bias")
	if err != nil {
		return nil, err
	}
	smooth := c.Int("smooth_softmax", 0) == 1
	var sinks []float32
	if sinkT != nil {
		if smooth {
			return nil, fmt.Errorf("head_sink is not allowed with smooth_softmax")
		}
		if len(sinkT.Shape) != 1 || sinkT.Shape[0] != nq {
			return nil, fmt.Errorf("head_sink must be (%d), got %v", nq, sinkT.Shape)
		}
		sinks = Data[float32](sinkT)
	}
	qkMode := c.Int("qk_output", 0)
	if qkMode < 0 || qkMode > 2 {
		return nil, fmt.Errorf("qk_output %d (0, 1 or 2)", qkMode)
	}
	var qk *Tensor
	if c.HasOutput(3) {
		qk = c.zeros(graph.Float, B, nq, S, total)
	}
	if qkMode != 0 && qk == nil {
		return nil, fmt.Errorf("qk_output %d needs the output_qk output", qkMode)
	}
	out := c.alloc(graph.Float, B, S, nq*H)
	softcap := c.Float("softcap", 0)
	window := int(c.Int("local_window_size", -1))
	// causalPast is the number of entry b's tokens before the new ones.
	causalPast := func(b int) int {
		if !firstPrompt && pastK != nil {
			return pasts[b]
		}
		return 0
	}
	qkRow := func(b, n, s int) []float32 {
		o := ((b*nq+n)*S + s) * total
		return Data[float32](qk)[o : o+total]
	}
	j := &attnJob{B: B, Nq: nq, Nkv: nkv, S: S, T: Tp, Hk: H, Hv: H,
		q: bsnh(qd, heads, S, H), k: bnsh(pk, nkv, Tp, H), v: bnsh(pv, nkv, Tp, H), out: bsnh(Data[float32](out), nq, S, H),
		scale: attnScale(c.Float("scale", 0), H),
		// Row s attends causally to the tokens up to its own: the
		// scores past them are not computed.
		keys: func(b, s int) int { return min(causalPast(b)+s+1, totals[b]) },
		row: func(sc []float32, b, n, s int) (int, int) {
			hi := min(causalPast(b)+s+1, totals[b])
			lo := 0
			if window >= 0 && hi > window {
				lo = hi - window
			}
			w := sc[lo:hi]
			if softcap > 0 {
				softcapRow(w, softcap)
			}
			if bias != nil {
				addRow(w, bias.row(b, n, s)[lo:hi])
			}
			if qkMode == 1 {
				copy(qkRow(b, n, s)[lo:], w)
			}
			return lo, hi
		},
	}
	switch {
	case sinks != nil:
		j.sink = func(n int) float32 { return sinks[n] }
	case smooth:
		j.sink = func(int) float32 { return 0 }
	}
	if qkMode == 2 {
		j.probs = func(p []float32, b, n, s int) { copy(qkRow(b, n, s), p) }
	}
	j.run(c)
	return []*Tensor{out, presK, presV, qk}, nil
}

// ---------------------------------------------------------------------
// MultiHeadAttention, Attention, QAttention

// maskRows turns ONNX Runtime's mask_index forms into additive mask rows
// (0 or mask_filter_value per key), and adds the causal mask of
// unidirectional attention, as its CPU provider prepares them:
//
//	(B)           keys at or after mask[b] are masked (right padding)
//	(2B)          also keys before mask[B+b] (left padding)
//	(B, T)        key j of entry b is masked where mask[b, j] == 0
//	(B, S, T)     key j of query row s where mask[b, s, j] == 0
//
// With causal, keys after P+s (P the past length) are masked too (their
// filter values add up with a padding mask's).
type maskRows struct {
	B, S, T, P int
	filter     float32
	causal     bool
	kind       int     // 0 none, 1 end positions, 2 end and start, 3 (B, T), 4 (B, S, T)
	idx        []int64 // the mask
}

func newMaskRows(m *Tensor, B, S, T, P int, filter float32, causal bool) (*maskRows, error) {
	r := &maskRows{B: B, S: S, T: T, P: P, filter: filter, causal: causal}
	if m == nil {
		if !causal {
			return nil, nil
		}
		return r, nil
	}
	r.idx = m.Int64s()
	switch {
	case len(m.Shape) == 1 && m.Shape[0] == B:
		r.kind = 1
	case len(m.Shape) == 1 && m.Shape[0] == 2*B:
		r.kind = 2
	case len(m.Shape) == 2 && m.Shape[0] == B && m.Shape[1] == T:
		r.kind = 3
	case len(m.Shape) == 3 && m.Shape[0] == B && m.Shape[1] == S && m.Shape[2] == T:
		r.kind = 4
	default:
		return nil, fmt.Errorf("mask %v: expected (%d), (%d), (%d, %d) or (%d, %d, %d): %w", m.Shape, B, 2*B, B, T, B, S, T, ErrUnsupportedOp)
	}
	return r, nil
}

// add adds the mask of row (b, s) to x (len(x) == T).
func (r *maskRows) add(x []float32, b, s int) {
	f := r.filter
	switch r.kind {
	case 1, 2:
		end := int(min(max(r.idx[b], 0), int64(r.T)))
		for j := end; j < r.T; j++ {
			x[j] += f
		}
		if r.kind == 2 {
			start := int(min(max(r.idx[r.B+b], 0), int64(r.T)))
			for j := range start {
				x[j] += f
			}
		}
	case 3, 4:
		row := r.idx[b*r.T : (b+1)*r.T]
		if r.kind == 4 {
			row = r.idx[(b*r.S+s)*r.T : (b*r.S+s+1)*r.T]
		}
		for j, v := range row {
			if v <= 0 {
				x[j] += f
			}
		}
	}
	if r.causal {
		for j := r.P + s + 1; j < r.T; j++ {
			x[j] += f
		}
	}
}

// classicAttn is the attention of MultiHeadAttention, Attention and
// QAttention: scores scale*Q.K^T, plus attention_bias, plus the mask
// rows, softmax over all keys.
type classicAttn struct {
	B, N, S, T, Hk, Hv int
	q, k, v            rowsOf
	scale              float32
	bias               *biasRows
	mask               *maskRows
	qk                 []float32 // (B, N, S, T) scores before softmax, or nil
}

func (a *classicAttn) run(c *Call, out []float32) {
	j := &attnJob{B: a.B, Nq: a.N, Nkv: a.N, S: a.S, T: a.T, Hk: a.Hk, Hv: a.Hv,
		q: a.q, k: a.k, v: a.v, out: bsnh(out, a.N, a.S, a.Hv), scale: a.scale}
	if a.bias != nil || a.mask != nil || a.qk != nil {
		j.row = func(sc []float32, b, n, s int) (int, int) {
			if a.bias != nil {
				addRow(sc, a.bias.row(b, n, s))
			}
			if a.mask != nil {
				a.mask.add(sc, b, s)
			}
			if a.qk != nil {
				o := ((b*a.N+n)*a.S + s) * a.T
				copy(a.qk[o:o+a.T], sc)
			}
			return 0, len(sc)
		}
	}
	j.run(c)
}

// concatKV writes past (B, N, P, H) rows then the new rows into a (B, N,
// P+L, H) present buffer.
func concatKV(dst []float32, past []float32, nw rowsOf, B, N, P, L, H int) {
	T := P + L
	for b := range B {
		for h := range N {
			o := (b*N + h) * T * H
			if P > 0 {
				copy(dst[o:o+P*H], past[(b*N+h)*P*H:])
			}
			for s := range L {
				src := nw.at(b, h, s)
				copy(dst[o+(P+s)*H:o+(P+s+1)*H], nw.d[src:src+H])
			}
		}
	}
}

// withBias copies rows of (B, heads, L, H) x with bias[off+h*H:] added
// into a new (B, L, heads*H) buffer.
func withBias(c *Call, x rowsOf, B, heads, L, H int, bias []float32) rowsOf {
	t := c.alloc(graph.Float, B, L, heads*H)
	d := Data[float32](t)
	for b := range B {
		for s := range L {
			for h := range heads {
				src := x.at(b, h, s)
				o := ((b*L+s)*heads + h) * H
				dv, sv := d[o:o+H], x.d[src:src+H]
				if bias == nil {
					copy(dv, sv)
					continue
				}
				bv := bias[h*H : h*H+H]
				for i := range dv {
					dv[i] = sv[i] + bv[i]
				}
			}
		}
	}
	return bsnh(d, heads, L, H)
}

// multiHeadAttention is com.microsoft MultiHeadAttention.
//
// Inputs: query (B, S, D), or (B, S, N, 3, H) with K and V packed in it;
// key (B, L, D), or (B, N, L, H) (cross-attention keys already projected),
// or (B, L, N, 2, H) with V packed in it; value (B, L, Dv) or (B, N, L,
// Hv); bias (D + D + Dv) added to Q, K and V (not to keys and values given
// as (B, N, L, H)); key_padding_mask (mask forms of maskRows);
// attention_bias (B|1, N|1, S, T); past_key, past_value (B, N, P, H).
// Outputs: output (B, S, Dv); present_key, present_value (B, N, P+L, H);
// qk (B, N, S, T), the scores before softmax (mask and bias included).
func multiHeadAttention(c *Call, in []*Tensor) ([]*Tensor, error) {
	query, key, value, bias := in[0], optIn(in, 1), optIn(in, 2), optIn(in, 3)
	maskT, biasT, pastK, pastV := optIn(in, 4), optIn(in, 5), optIn(in, 6), optIn(in, 7)
	if optIn(in, 8) != nil || optIn(in, 9) != nil {
		return nil, fmt.Errorf("past_sequence_length and cache_indirection (shared KV buffers, beam search): %w", ErrUnsupportedOp)
	}
	N := int(c.Int("num_heads", 0))
	if N <= 0 {
		return nil, fmt.Errorf("num_heads %d", N)
	}
	var bd []float32
	if bias != nil {
		bd = Data[float32](bias)
	}
	var B, S, L, Hk, Hv int
	var q, k, v rowsOf
	crossBNSH := false
	qd := Data[float32](query)
	switch {
	case len(query.Shape) == 5:
		if key != nil || value != nil || query.Shape[3] != 3 || query.Shape[2] != N {
			return nil, fmt.Errorf("packed QKV query %v must be (B, S, %d, 3, H) without key and value", query.Shape, N)
		}
		B, S, Hk = query.Shape[0], query.Shape[1], query.Shape[4]
		L, Hv = S, Hk
		row := N * 3 * Hk
		q = rowsOf{qd, S * row, 3 * Hk, row}
		k = rowsOf{qd[Hk:], S * row, 3 * Hk, row}
		v = rowsOf{qd[2*Hk:], S * row, 3 * Hk, row}
	case len(query.Shape) == 3:
		B, S = query.Shape[0], query.Shape[1]
		if query.Shape[2]%N != 0 {
			return nil, fmt.Errorf("query hidden size %d is not a multiple of num_heads %d", query.Shape[2], N)
		}
		Hk = query.Shape[2] / N
		q = bsnh(qd, N, S, Hk)
		switch {
		case key == nil:
			return nil, fmt.Errorf("key is required unless query is packed (B, S, N, 3, H)")
		case len(key.Shape) == 5:
			if value != nil || key.Shape[0] != B || key.Shape[2] != N || key.Shape[3] != 2 || key.Shape[4] != Hk {
				return nil, fmt.Errorf("packed KV key %v must be (%d, L, %d, 2, %d) without value", key.Shape, B, N, Hk)
			}
			L, Hv = key.Shape[1], Hk
			kd, row := Data[float32](key), N*2*Hk
			k = rowsOf{kd, L * row, 2 * Hk, row}
			v = rowsOf{kd[Hk:], L * row, 2 * Hk, row}
		case len(key.Shape) == 3:
			if value == nil || len(value.Shape) != 3 || key.Shape[0] != B || value.Shape[0] != B || key.Shape[1] != value.Shape[1] ||
				key.Shape[2] != N*Hk || value.Shape[2]%N != 0 {
				return nil, fmt.Errorf("key %v and value %v must be (%d, L, %d) and (%d, L, N*Hv)", key.Shape, shapeOrNil(value), B, N*Hk, B)
			}
			L, Hv = key.Shape[1], value.Shape[2]/N
			k = bsnh(Data[float32](key), N, L, Hk)
			v = bsnh(Data[float32](value), N, L, Hv)
		case len(key.Shape) == 4:
			if value == nil || len(value.Shape) != 4 || key.Shape[0] != B || key.Shape[1] != N || key.Shape[3] != Hk ||
				!equalShape(value.Shape[:3], key.Shape[:3]) {
				return nil, fmt.Errorf("key %v and value %v must be (%d, %d, L, %d) and (%d, %d, L, Hv)", key.Shape, shapeOrNil(value), B, N, Hk, B, N)
			}
			if pastK != nil || pastV != nil {
				return nil, fmt.Errorf("past_key and past_value are not allowed with keys and values given as (B, N, L, H)")
			}
			L, Hv = key.Shape[2], value.Shape[3]
			k = bnsh(Data[float32](key), N, L, Hk)
			v = bnsh(Data[float32](value), N, L, Hv)
			crossBNSH = true
		default:
			return nil, fmt.Errorf("key must be 3-D, 4-D or 5-D, got %v", key.Shape)
		}
	default:
		return nil, fmt.Errorf("query must be 3-D or 5-D, got %v", query.Shape)
	}
	D, Dv := N*Hk, N*Hv
	if bd != nil {
		if len(bd) != 2*D+Dv {
			return nil, fmt.Errorf("bias has %d elements, expected %d", len(bd), 2*D+Dv)
		}
		q = withBias(c, q, B, N, S, Hk, bd[:D])
		if !crossBNSH {
			k = withBias(c, k, B, N, L, Hk, bd[D:2*D])
			v = withBias(c, v, B, N, L, Hv, bd[2*D:])
		}
	}
	P := 0
	if (pastK == nil) != (pastV == nil) {
		return nil, fmt.Errorf("past_key and past_value must be both present or both absent")
	}
	if pastK != nil {
		if len(pastK.Shape) != 4 || len(pastV.Shape) != 4 || pastK.Shape[0] != B || pastK.Shape[1] != N || pastK.Shape[3] != Hk ||
			pastV.Shape[0] != B || pastV.Shape[1] != N || pastV.Shape[3] != Hv || pastK.Shape[2] != pastV.Shape[2] {
			return nil, fmt.Errorf("past_key %v and past_value %v must be (%d, %d, P, %d) and (%d, %d, P, %d)", pastK.Shape, pastV.Shape, B, N, Hk, B, N, Hv)
		}
		P = pastK.Shape[2]
	}
	T := P + L
	var presK, presV *Tensor
	if pastK != nil || c.HasOutput(1) || c.HasOutput(2) {
		if crossBNSH {
			// The keys and values are the present ones.
			presK, presV = cloneRows(c, k, B, N, L, Hk), cloneRows(c, v, B, N, L, Hv)
		} else {
			presK, presV = c.alloc(graph.Float, B, N, T, Hk), c.alloc(graph.Float, B, N, T, Hv)
			var pk, pv []float32
			if pastK != nil {
				pk, pv = Data[float32](pastK), Data[float32](pastV)
			}
			concatKV(Data[float32](presK), pk, k, B, N, P, L, Hk)
			concatKV(Data[float32](presV), pv, v, B, N, P, L, Hv)
		}
		k, v = bnsh(Data[float32](presK), N, T, Hk), bnsh(Data[float32](presV), N, T, Hv)
	}
	a := &classicAttn{B: B, N: N, S: S, T: T, Hk: Hk, Hv: Hv, q: q, k: k, v: v, scale: attnScale(c.Float("scale", 0), Hk)}
	var err error
	if a.bias, err = newBiasRows(biasT, B, N, S, T, "attention_bias"); err != nil {
		return nil, err
	}
	if a.mask, err = newMaskRows(maskT, B, S, T, P, c.Float("mask_filter_value", -10000), c.Int("unidirectional", 0) == 1 && S > 1); err != nil {
		return nil, err
	}
	var qk *Tensor
	if c.HasOutput(3) {
		qk = c.alloc(graph.Float, B, N, S, T)
		a.qk = Data[float32](qk)
	}
	out := c.alloc(graph.Float, B, S, Dv)
	a.run(c, Data[float32](out))
	return []*Tensor{out, presK, presV, qk}, nil
}

func shapeOrNil(t *Tensor) any {
	if t == nil {
		return "absent"
	}
	return t.Shape
}

// cloneRows copies rows of x into a new (B, N, L, H) tensor.
func cloneRows(c *Call, x rowsOf, B, N, L, H int) *Tensor {
	t := c.alloc(graph.Float, B, N, L, H)
	d := Data[float32](t)
	for b := range B {
		for h := range N {
			for s := range L {
				o := x.at(b, h, s)
				copy(d[((b*N+h)*L+s)*H:], x.d[o:o+H])
			}
		}
	}
	return t
}

// qkvSizes reads the qkv_hidden_sizes attribute of Attention and
// QAttention (default: the weights' columns split in three).
func qkvSizes(c *Call, cols, N int) (D, Dv int, err error) {
	hs := c.Ints("qkv_hidden_sizes")
	switch {
	case hs == nil:
		if cols%3 != 0 {
			return 0, 0, fmt.Errorf("weights have %d columns, not a multiple of 3 (give qkv_hidden_sizes)", cols)
		}
		D, Dv = cols/3, cols/3
	case len(hs) == 3 && hs[0] == hs[1] && hs[0] > 0 && hs[2] > 0 && hs[0]+hs[1]+hs[2] == int64(cols):
		D, Dv = int(hs[0]), int(hs[2])
	default:
		return 0, 0, fmt.Errorf("qkv_hidden_sizes %v for %d weight columns", hs, cols)
	}
	if D%N != 0 || Dv%N != 0 {
		return 0, 0, fmt.Errorf("hidden sizes %d and %d are not multiples of num_heads %d", D, Dv, N)
	}
	return D, Dv, nil
}

// attentionCore finishes Attention and QAttention from the projected
// (B, S, D+D+Dv) qkv: past (2, B, N, P, H) and present, masks, bias.
func attentionCore(c *Call, qkv []float32, B, S, N, D, Dv int, maskT, pastT, biasT *Tensor) ([]*Tensor, error) {
	Hk, Hv := D/N, Dv/N
	row := 2*D + Dv
	from := func(off int) []float32 { // an empty sequence has no rows to offset into
		if off > len(qkv) {
			return nil
		}
		return qkv[off:]
	}
	q := rowsOf{qkv, S * row, Hk, row}
	k := rowsOf{from(D), S * row, Hk, row}
	v := rowsOf{from(2 * D), S * row, Hv, row}
	P := 0
	if pastT != nil {
		if Hk != Hv {
			return nil, fmt.Errorf("past needs Q, K and V of the same hidden size")
		}
		if len(pastT.Shape) != 5 || pastT.Shape[0] != 2 || pastT.Shape[1] != B || pastT.Shape[2] != N || pastT.Shape[4] != Hk {
			return nil, fmt.Errorf("past %v must be (2, %d, %d, P, %d)", pastT.Shape, B, N, Hk)
		}
		P = pastT.Shape[3]
	}
	T := P + S
	var present *Tensor
	if pastT != nil || c.HasOutput(1) {
		if Hk != Hv {
			return nil, fmt.Errorf("present needs Q, K and V of the same hidden size")
		}
		present = c.alloc(graph.Float, 2, B, N, T, Hk)
		pd := Data[float32](present)
		half := B * N * T * Hk
		var pk, pv []float32
		if pastT != nil {
			pd := Data[float32](pastT)
			pk, pv = pd[:B*N*P*Hk], pd[B*N*P*Hk:]
		}
		concatKV(pd[:half], pk, k, B, N, P, S, Hk)
		concatKV(pd[half:], pv, v, B, N, P, S, Hk)
		k, v = bnsh(pd[:half], N, T, Hk), bnsh(pd[half:], N, T, Hk)
	}
	a := &classicAttn{B: B, N: N, S: S, T: T, Hk: Hk, Hv: Hv, q: q, k: k, v: v, scale: attnScale(c.Float("scale", 0), Hk)}
	var err error
	if a.bias, err = newBiasRows(biasT, B, N, S, T, "attention_bias"); err != nil {
		return nil, err
	}
	if a.mask, err = newMaskRows(maskT, B, S, T, P, c.Float("mask_filter_value", -10000), c.Int("unidirectional", 0) == 1 && S > 1); err != nil {
		return nil, err
	}
	out := c.alloc(graph.Float, B, S, Dv)
	a.run(c, Data[float32](out))
	return []*Tensor{out, present}, nil
}

// checkAttentionAttrs refuses the attributes of Attention and QAttention
// that this package does not implement.
func checkAttentionAttrs(c *Call, in []*Tensor, pastLenInput int) error {
	if c.Int("do_rotary", 0) != 0 {
		return fmt.Errorf("do_rotary: %w", ErrUnsupportedOp)
	}
	if c.Int("past_present_share_buffer", 0) != 0 || optIn(in, pastLenInput) != nil {
		return fmt.Errorf("past_present_share_buffer and past_sequence_length (shared KV buffers): %w", ErrUnsupportedOp)
	}
	return nil
}

// contribAttention is com.microsoft Attention: input (B, S, Din) times
// weights (Din, D+D+Dv) plus bias gives Q, K and V; then masked (mask_index
// in the forms of maskRows, unidirectional) attention with attention_bias
// (B|1, N|1, S, T) and a past (2, B, N, P, H). Outputs: output (B, S, Dv),
// present (2, B, N, P+S, H).
func contribAttention(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, w := in[0], in[1]
	if err := checkAttentionAttrs(c, in, 6); err != nil {
		return nil, err
	}
	N := int(c.Int("num_heads", 0))
	if N <= 0 {
		return nil, fmt.Errorf("num_heads %d", N)
	}
	B, S, din, err := dims3(x, "input")
	if err != nil {
		return nil, err
	}
	if len(w.Shape) != 2 || w.Shape[0] != din {
		return nil, fmt.Errorf("weights %v must be (%d, D+D+Dv)", w.Shape, din)
	}
	D, Dv, err := qkvSizes(c, w.Shape[1], N)
	if err != nil {
		return nil, err
	}
	qkv, err := matmulNumpy(c, x, w, 1, false, false)
	if err != nil {
		return nil, err
	}
	if b := optIn(in, 2); b != nil {
		if b.Len() != 2*D+Dv {
			return nil, fmt.Errorf("bias has %d elements, expected %d", b.Len(), 2*D+Dv)
		}
		if qkv, err = binary(c, opAdd, qkv, b.Reshaped(2*D+Dv)); err != nil {
			return nil, err
		}
	}
	return attentionCore(c, Data[float32](qkv), B, S, N, D, Dv, optIn(in, 3), optIn(in, 4), optIn(in, 5))
}

func init() {
	ms := func(op string, fn Kernel) { Register(DomainMicrosoft, op, 1, 0, fn, 0) }
	ms("GroupQueryAttention", float32Kernel(groupQueryAttention))
	ms("MultiHeadAttention", float32Kernel(multiHeadAttention))
	ms("Attention", float32Kernel(contribAttention))
}
