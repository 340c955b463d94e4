package kernels

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels/gemm"
)

// ONNX Runtime's quantized matrix contrib ops: MatMulNBits (block-wise
// 2/4/8-bit weights), DynamicQuantizeMatMul, MatMulIntegerToFloat and
// QAttention. Integer products are exact (int32, as ONNX Runtime
// accumulates them); their conversion to float is the same multiply by
// the scales.

// intGemmChunk is the length of the k chunks intGemm multiplies in
// float32: a product of two values of magnitude at most 255 is at most
// 65025, and 256 of them sum to at most 16,646,400 < 2^24, so every
// partial sum of a chunk is an integer float32 holds exactly.
const intGemmChunk = 256

// intGemm sets c (m x n) to the exact integer product of a (m x k) and b
// (k x n), whose elements are integers of magnitude at most 255 held as
// float32 (zero points already subtracted), accumulating chunks of k in
// int32 (wrapping on overflow, as ONNX Runtime's int32 accumulation does).
func intGemm(e gemm.Exec, m, n, k int, a, b []float32, c []int32) {
	clear(c[:m*n])
	if m == 0 || n == 0 || k == 0 {
		return
	}
	part := make([]float32, m*n)
	for k0 := 0; k0 < k; k0 += intGemmChunk {
		kc := min(intGemmChunk, k-k0)
		e.Sgemm(false, false, m, n, kc, 1, a[k0:], k, b[k0*n:], n, 0, part, n)
		for i, v := range part {
			c[i] += int32(v)
		}
	}
}

// zeroPoints reads a quantization zero point: absent (0), one element, or
// n elements (per column).
func zeroPoints(t *Tensor, n int, name string) ([]int64, error) {
	if t == nil {
		return make([]int64, 1), nil
	}
	if t.Len() != 1 && t.Len() != n {
		return nil, fmt.Errorf("%s must have 1 or %d elements, got %v", name, n, t.Shape)
	}
	return t.Int64s(), nil
}

// scalesOf reads a float scale: one element or n (per column).
func scalesOf(t *Tensor, n int, name string) ([]float32, error) {
	if t.Len() != 1 && t.Len() != n {
		return nil, fmt.Errorf("%s must have 1 or %d elements, got %v", name, n, t.Shape)
	}
	return Data[float32](t), nil
}

// isQuantInt reports whether t holds int8 or uint8 values.
func isQuantInt(t *Tensor) bool { return t.DType == graph.Int8 || t.DType == graph.Uint8 }

// centered returns the elements of t (int8/uint8) minus the zero point of
// each column (zp has one element or cols) as float32.
func centered(t *Tensor, zp []int64, cols int) []float32 {
	v := t.Int64s()
	out := make([]float32, len(v))
	for i, x := range v {
		z := zp[0]
		if len(zp) > 1 {
			z = zp[i%cols]
		}
		out[i] = float32(x - z)
	}
	return out
}

// scaledIntProduct is the float result of an integer product: y[i, j] =
// float32(acc[i, j]) * mult[j] (+ bias[j]), mult one element or per
// column.
func scaledIntProduct(y []float32, acc []int32, n int, mult, bias []float32) {
	for i, a := range acc {
		j := i % n
		m := mult[0]
		if len(mult) > 1 {
			m = mult[j]
		}
		v := float32(a) * m
		if bias != nil {
			v += bias[j]
		}
		y[i] = v
	}
}

// quantMatMul computes float32 (M x N) = (A - azp)(B - bzp) * aScale *
// bScale (+ bias) for A (..., K) and B (K, N) of int8/uint8.
func quantMatMul(c *Call, a, b *Tensor, azp, bzp []int64, aScale float32, bScale, bias []float32) (*Tensor, error) {
	if len(a.Shape) < 1 || len(b.Shape) != 2 || a.Shape[len(a.Shape)-1] != b.Shape[0] {
		return nil, fmt.Errorf("A %v and B %v: B must be 2-D (K, N) with K the last dimension of A", a.Shape, b.Shape)
	}
	if len(azp) != 1 {
		return nil, fmt.Errorf("the zero point of A must be a single value: %w", ErrUnsupportedOp)
	}
	K, N := b.Shape[0], b.Shape[1]
	M := a.Len() / max(K, 1)
	if K == 0 {
		M = shapeSize(a.Shape[:len(a.Shape)-1])
	}
	shape := append(append([]int(nil), a.Shape[:len(a.Shape)-1]...), N)
	y := c.alloc(graph.Float, shape...)
	c.reserveElems(M*N, 8) // the int32 sums and a float32 chunk of them
	ac, bc := centered(a, azp, K), centered(b, bzp, N)
	acc := make([]int32, M*N)
	intGemm(c.mm(), M, N, K, ac, bc, acc)
	mult := make([]float32, len(bScale))
	for i, s := range bScale {
		mult[i] = aScale * s
	}
	scaledIntProduct(Data[float32](y), acc, N, mult, bias)
	return y, nil
}

func optBias(t *Tensor, n int) ([]float32, error) {
	if t == nil {
		return nil, nil
	}
	if t.Len() != n {
		return nil, fmt.Errorf("bias must have %d elements, got %v", n, t.Shape)
	}
	return Data[float32](t), nil
}

// dynamicQuantParams are DynamicQuantizeLinear's uint8 scale and zero
// point for x: the range [min(x, 0), max(x, 0)] mapped onto [0, 255].
func dynamicQuantParams(x []float32) (scale float32, zp uint8) {
	lo, hi := float32(0), float32(0)
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	scale = 1
	if hi != lo {
		scale = (hi - lo) / 255
	}
	z := float32(0) - lo/scale
	z = max(0, min(255, z))
	return scale, uint8(math.RoundToEven(float64(z)))
}

// quantizeU8 is x quantized to uint8 with scale and zero point (rounding
// half to even, saturating).
func quantizeU8(x []float32, scale float32, zp uint8) []uint8 {
	q := make([]uint8, len(x))
	for i, v := range x {
		r := math.RoundToEven(float64(v/scale)) + float64(zp)
		q[i] = uint8(max(0, min(255, r)))
	}
	return q
}

// dynamicQuantizeMatMul is com.microsoft DynamicQuantizeMatMul: A (float)
// quantized to uint8 per tensor as DynamicQuantizeLinear does, times B
// (K, N) int8/uint8 with b_scale and b_zero_point (per tensor or per
// column), as float, plus bias.
func dynamicQuantizeMatMul(c *Call, in []*Tensor) ([]*Tensor, error) {
	a, b := in[0], in[1]
	if !isQuantInt(b) {
		return nil, fmt.Errorf("B must be int8 or uint8, got %v", b.DType)
	}
	if len(b.Shape) != 2 {
		return nil, fmt.Errorf("B must be 2-D, got %v", b.Shape)
	}
	N := b.Shape[1]
	bs, err := scalesOf(in[2], N, "b_scale")
	if err != nil {
		return nil, err
	}
	bzp, err := zeroPoints(optIn(in, 3), N, "b_zero_point")
	if err != nil {
		return nil, err
	}
	bias, err := optBias(optIn(in, 4), N)
	if err != nil {
		return nil, err
	}
	ad := Data[float32](a)
	scale, zp := dynamicQuantParams(ad)
	aq := FromSlice(a.Shape, quantizeU8(ad, scale, zp))
	y, err := quantMatMul(c, aq, b, []int64{int64(zp)}, bzp, scale, bs, bias)
	return []*Tensor{y}, err
}

// matMulIntegerToFloat is com.microsoft MatMulIntegerToFloat: (A - azp)
// (B - bzp) * a_scale * b_scale + bias, A (..., K) and B (K, N) of
// int8/uint8, scales and zero points per tensor (b's also per column).
func matMulIntegerToFloat(c *Call, in []*Tensor) ([]*Tensor, error) {
	a, b := in[0], in[1]
	if !isQuantInt(a) || !isQuantInt(b) {
		return nil, fmt.Errorf("A and B must be int8 or uint8, got %v and %v", a.DType, b.DType)
	}
	if len(b.Shape) != 2 {
		return nil, fmt.Errorf("B must be 2-D, got %v", b.Shape)
	}
	N := b.Shape[1]
	if in[2].Len() != 1 {
		return nil, fmt.Errorf("a_scale must have one element, got %v: %w", in[2].Shape, ErrUnsupportedOp)
	}
	as := Data[float32](in[2])[0]
	bs, err := scalesOf(in[3], N, "b_scale")
	if err != nil {
		return nil, err
	}
	azp, err := zeroPoints(optIn(in, 4), 1, "a_zero_point")
	if err != nil {
		return nil, err
	}
	bzp, err := zeroPoints(optIn(in, 5), N, "b_zero_point")
	if err != nil {
		return nil, err
	}
	bias, err := optBias(optIn(in, 6), N)
	if err != nil {
		return nil, err
	}
	y, err := quantMatMul(c, a, b, azp, bzp, as, bs, bias)
	return []*Tensor{y}, err
}

// qAttention is com.microsoft QAttention: Attention whose input (B, S,
// Din) and weights (Din, 3D) are quantized: QKV = (input - input_zp)
// (weight - weight_zp) * input_scale * weight_scale + bias, then the
// attention of contribAttention (mask_index, past, unidirectional).
func qAttention(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, w, bias := in[0], in[1], in[2]
	if err := checkAttentionAttrs(c, in, 9); err != nil {
		return nil, err
	}
	if !isQuantInt(x) || !isQuantInt(w) {
		return nil, fmt.Errorf("input and weight must be int8 or uint8, got %v and %v", x.DType, w.DType)
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
		return nil, fmt.Errorf("weight %v must be (%d, 3*hidden)", w.Shape, din)
	}
	cols := w.Shape[1]
	D, Dv, err := qkvSizes(c, cols, N)
	if err != nil {
		return nil, err
	}
	if in[3].Len() != 1 {
		return nil, fmt.Errorf("input_scale must have one element, got %v", in[3].Shape)
	}
	ws, err := scalesOf(in[4], cols, "weight_scale")
	if err != nil {
		return nil, err
	}
	izp, err := zeroPoints(optIn(in, 6), 1, "input_zero_point")
	if err != nil {
		return nil, err
	}
	wzp, err := zeroPoints(optIn(in, 7), cols, "weight_zero_point")
	if err != nil {
		return nil, err
	}
	bd, err := optBias(bias, cols)
	if err != nil {
		return nil, err
	}
	if in[3].Len() != 1 {
		return nil, fmt.Errorf("input_scale must have one element, got %v", in[3].Shape)
	}
	qkv, err := quantMatMul(c, x, w, izp, wzp, Data[float32](in[3])[0], ws, bd)
	if err != nil {
		return nil, err
	}
	return attentionCore(c, Data[float32](qkv), B, S, N, D, Dv, optIn(in, 5), optIn(in, 8), nil)
}

// ---------------------------------------------------------------------
// MatMulNBits

// nbits is a MatMulNBits weight: N rows of K values, quantized in blocks
// of bs along K with bits bits each.
type nbits struct {
	K, N, bits, bs, kBlocks, blob int
	q                             []uint8   // (N, kBlocks, blob)
	scales                        []float32 // (N, kBlocks)
	zpU8                          []uint8   // (N, zpStride) packed, or nil
	zpStride                      int
	zpF                           []float32 // (N, kBlocks) float zero points, or nil
	gidx                          []int64   // (K) block of each k, or nil
}

func newNBits(c *Call, in []*Tensor) (*nbits, error) {
	K, N := int(c.Int("K", 0)), int(c.Int("N", 0))
	bits, bs := int(c.Int("bits", 4)), int(c.Int("block_size", 0))
	if K <= 0 || N <= 0 {
		return nil, fmt.Errorf("K %d and N %d must be positive", K, N)
	}
	if bits != 2 && bits != 4 && bits != 8 {
		return nil, fmt.Errorf("bits %d (2, 4 or 8): %w", bits, ErrUnsupportedOp)
	}
	if bs < 16 || bs&(bs-1) != 0 {
		return nil, fmt.Errorf("block_size %d must be a power of 2, at least 16", bs)
	}
	if c.Int("weight_prepacked", 0) != 0 {
		return nil, fmt.Errorf("weight_prepacked (a CUDA layout): %w", ErrUnsupportedOp)
	}
	w := &nbits{K: K, N: N, bits: bits, bs: bs, kBlocks: (K + bs - 1) / bs, blob: bs * bits / 8}
	b := in[1]
	if b.DType != graph.Uint8 || b.Len() != N*w.kBlocks*w.blob {
		return nil, fmt.Errorf("B must be uint8 (%d, %d, %d), got %v", N, w.kBlocks, w.blob, b)
	}
	w.q = Data[uint8](b)
	if in[2].Len() != N*w.kBlocks {
		return nil, fmt.Errorf("scales must have %d x %d elements, got %v", N, w.kBlocks, in[2].Shape)
	}
	w.scales = Data[float32](in[2])
	if zp := optIn(in, 3); zp != nil {
		if zp.DType == graph.Uint8 {
			w.zpStride = (w.kBlocks*bits + 7) / 8
			if zp.Len() != N*w.zpStride {
				return nil, fmt.Errorf("packed zero_points must have %d x %d bytes, got %v", N, w.zpStride, zp.Shape)
			}
			w.zpU8 = Data[uint8](zp)
		} else {
			if zp.Len() != N*w.kBlocks {
				return nil, fmt.Errorf("zero_points must have %d x %d elements, got %v", N, w.kBlocks, zp.Shape)
			}
			w.zpF = Data[float32](zp)
		}
	}
	if g := optIn(in, 4); g != nil {
		if g.Len() != K {
			return nil, fmt.Errorf("g_idx must have K = %d elements, got %v", K, g.Shape)
		}
		w.gidx = g.Int64s()
		for k, v := range w.gidx {
			if v < 0 || v >= int64(w.kBlocks) {
				return nil, fmt.Errorf("g_idx[%d] = %d is outside the %d blocks", k, v, w.kBlocks)
			}
		}
	}
	return w, nil
}

// quant returns the quantized value of row n, column k.
func (w *nbits) quant(n, k int) int {
	blk, i := k/w.bs, k%w.bs
	blob := w.q[(n*w.kBlocks+blk)*w.blob:]
	switch w.bits {
	case 4:
		return int(blob[i/2]>>(4*(i%2))) & 0xf
	case 8:
		return int(blob[i])
	default:
		return int(blob[i/4]>>(2*(i%4))) & 3
	}
}

// zeroScale returns the zero point and scale of row n's block blk.
func (w *nbits) zeroScale(n, blk int) (float32, float32) {
	return w.zeroPoint(n, blk), w.scales[n*w.kBlocks+blk]
}

// zeroPoint is the zero point of row n's block blk.
func (w *nbits) zeroPoint(n, blk int) float32 {
	switch {
	case w.zpF != nil:
		return w.zpF[n*w.kBlocks+blk]
	case w.zpU8 != nil:
		per := 8 / w.bits
		v := w.zpU8[n*w.zpStride+blk/per] >> (w.bits * (blk % per)) & (1<<w.bits - 1)
		return float32(v)
	}
	return float32(int(1) << (w.bits - 1))
}

// zeroPoints sets zps[blk] to the zero point of each block of row n.
func (w *nbits) zeroPoints(zps []float32, n int) {
	zps = zps[:w.kBlocks]
	switch {
	case w.zpF != nil:
		copy(zps, w.zpF[n*w.kBlocks:])
	case w.zpU8 != nil && w.bits == 4:
		row := w.zpU8[n*w.zpStride : (n+1)*w.zpStride]
		for i := 0; i+1 < len(zps); i += 2 {
			b := row[i/2]
			zps[i], zps[i+1] = float32(b&15), float32(b>>4)
		}
		if len(zps)%2 == 1 {
			zps[len(zps)-1] = float32(row[len(zps)/2] & 15)
		}
	case w.zpU8 != nil && w.bits == 8:
		for i, b := range w.zpU8[n*w.zpStride : n*w.zpStride+len(zps)] {
			zps[i] = float32(b)
		}
	case w.zpU8 != nil:
		for blk := range zps {
			zps[blk] = w.zeroPoint(n, blk)
		}
	default:
		z := float32(int(1) << (w.bits - 1))
		for i := range zps {
			zps[i] = z
		}
	}
}

// dequantRow writes row n of the dequantized weight (K floats) into row:
// (q - zero point) * scale; zps holds the row's zero points.
func (w *nbits) dequantRow(row []float32, n int, zps []float32) {
	row = row[:w.K]
	if w.gidx != nil {
		for k := range w.K {
			z, s := w.zeroScale(n, int(w.gidx[k]))
			row[k] = (float32(w.quant(n, k)) - z) * s
		}
		return
	}
	kb := w.kBlocks
	q := w.q[n*kb*w.blob : (n+1)*kb*w.blob]
	sc := w.scales[n*kb : (n+1)*kb]
	for blk := range kb {
		s, z := sc[blk], zps[blk]
		k0 := blk * w.bs
		out := row[k0:min(k0+w.bs, w.K)]
		blob := q[blk*w.blob : (blk+1)*w.blob]
		switch w.bits {
		case 4:
			i := 0
			for ; i+1 < len(out); i += 2 {
				b := blob[i/2]
				out[i] = (float32(b&15) - z) * s
				out[i+1] = (float32(b>>4) - z) * s
			}
			if i < len(out) {
				out[i] = (float32(blob[i/2]&15) - z) * s
			}
		case 8:
			blob = blob[:len(out)]
			for i, b := range blob {
				out[i] = (float32(b) - z) * s
			}
		default:
			for i := range out {
				out[i] = (float32(blob[i/4]>>(2*(i%4))&3) - z) * s
			}
		}
	}
}

// nbitsGemvRows is the number of rows of A up to which MatMulNBits reads
// the quantized weight directly (one pass over it, dot products per row);
// larger A dequantizes panels of the weight and multiplies them by GEMM.
const nbitsGemvRows = 8

// gemv sets y (M x N) = a (M x K) . W^T reading each weight row once:
// 4-bit rows through the vector kernel (q4Dot), others dequantized row by
// row.
func (w *nbits) gemv(c *Call, y, a []float32, M int) {
	K, N, bs := w.K, w.N, w.bs
	vec := w.bits == 4 && w.gidx == nil && bs%32 == 0
	full := K / bs
	var ap []float32
	if vec {
		c.reserveElems(M*full*bs, 4)
		ap = make([]float32, M*full*bs)
		for m := range M {
			q4Permute(ap[m*full*bs:(m+1)*full*bs], a[m*K:m*K+full*bs])
		}
	}
	p := c.threads()
	if M*N*K < 1<<20 {
		p = 1
	}
	fanOutDynamic(p, N, 64, func() func(int, int) {
		zps := make([]float32, w.kBlocks)
		var row []float32
		return func(n0, n1 int) {
			for n := n0; n < n1; n++ {
				w.zeroPoints(zps, n)
				if vec {
					q := w.q[n*w.kBlocks*w.blob:]
					sc := w.scales[n*w.kBlocks:]
					ok := true
					for m := 0; m < M && ok; m++ {
						var v float32
						if v, ok = q4Dot(ap[m*full*bs:], q, sc, zps, full, bs); ok {
							if full*bs < K { // the last, partial block
								v += w.partialDot(a[m*K+full*bs:(m+1)*K], n, full, zps)
							}
							y[m*N+n] = v
						}
					}
					if ok {
						continue
					}
				}
				if row == nil {
					row = make([]float32, K)
				}
				w.dequantRow(row, n, zps)
				for m := range M {
					ar := a[m*K : (m+1)*K]
					var s float32
					for k, x := range ar {
						s += x * row[k]
					}
					y[m*N+n] = s
				}
			}
		}
	})
}

// q4Permute copies src (a multiple of 32 elements) into dst reordered per
// 32 elements: the 16 even ones, then the 16 odd ones (the order of the
// nibbles in the 4-bit vector kernels).
func q4Permute(dst, src []float32) {
	for o := 0; o+32 <= len(src); o += 32 {
		s, d := src[o:o+32:o+32], dst[o:o+32:o+32]
		for j := range 16 {
			d[j] = s[2*j]
			d[16+j] = s[2*j+1]
		}
	}
}

// dequantTail dequantizes row n from block blk on (natural order) into
// row.
func (w *nbits) dequantTail(row []float32, n, blk int, zps []float32) {
	z, sc := zps[blk], w.scales[n*w.kBlocks+blk]
	for k := blk * w.bs; k < w.K; k++ {
		row[k] = (float32(w.quant(n, k)) - z) * sc
	}
}

// partialDot is the dot product of a (the elements of block blk on) with
// row n of the dequantized weight from block blk on.
func (w *nbits) partialDot(a []float32, n, blk int, zps []float32) float32 {
	var s float32
	z, sc := zps[blk], w.scales[n*w.kBlocks+blk]
	for i, x := range a {
		s += x * (float32(w.quant(n, blk*w.bs+i)) - z) * sc
	}
	return s
}

// matMulNBits is com.microsoft MatMulNBits: Y = A . W^T (+ bias), A (...,
// K), W (N, K) the dequantized weight ((q - zero_point) * scale per block
// of block_size along K; zero points packed uint8 or float, default
// 2^(bits-1); g_idx maps each k to its block's scale and zero point).
// The product is computed in float32 whatever accuracy_level asks for.
func matMulNBits(c *Call, in []*Tensor) ([]*Tensor, error) {
	a := in[0]
	w, err := newNBits(c, in)
	if err != nil {
		return nil, err
	}
	if len(a.Shape) < 1 || a.Shape[len(a.Shape)-1] != w.K {
		return nil, fmt.Errorf("A %v must end with K = %d", a.Shape, w.K)
	}
	bias, err := optBias(optIn(in, 5), w.N)
	if err != nil {
		return nil, err
	}
	M := shapeSize(a.Shape[:len(a.Shape)-1])
	shape := append(append([]int(nil), a.Shape[:len(a.Shape)-1]...), w.N)
	y := c.alloc(graph.Float, shape...)
	yd, ad := Data[float32](y), Data[float32](a)
	if M > 0 && M <= nbitsGemvRows {
		w.gemv(c, yd, ad, M)
	} else if M > 0 {
		// Dequantize panels of rows of W and multiply each into its
		// columns of Y: the float32 weight is never held whole. The 4-bit
		// vector kernel writes the full blocks of each row permuted per
		// 32 elements; A is permuted the same way, which leaves the
		// products unchanged.
		K := w.K
		vec := w.bits == 4 && w.gidx == nil && w.bs%32 == 0 && hasQ4Vec()
		full := K / w.bs
		if vec {
			c.reserveElems(M*K, 4)
			ap := make([]float32, M*K)
			for m := range M {
				q4Permute(ap[m*K:m*K+full*w.bs], ad[m*K:m*K+full*w.bs])
				copy(ap[m*K+full*w.bs:(m+1)*K], ad[m*K+full*w.bs:(m+1)*K])
			}
			ad = ap
		}
		// A^T, GEMM's right operand, is packed once for every panel.
		c.reserveElems(K*(M+32), 4)
		pa := gemm.PackB(true, K, M, ad, K)
		panel := max(1, min(w.N, (1<<20)/K))
		npan := (w.N + panel - 1) / panel
		p := c.threads()
		if M*w.N*K < 1<<20 {
			p = 1
		}
		fanOutDynamic(p, npan, 1, func() func(int, int) {
			buf := make([]float32, panel*K)
			ct := make([]float32, panel*M)
			zps := make([]float32, w.kBlocks)
			one := gemm.Exec{Threads: 1}
			return func(lo, hi int) {
				for pi := lo; pi < hi; pi++ {
					n0, n1 := pi*panel, min((pi+1)*panel, w.N)
					for n := n0; n < n1; n++ {
						w.zeroPoints(zps, n)
						row := buf[(n-n0)*K : (n-n0+1)*K]
						if vec && q4Dequant(row, w.q[n*w.kBlocks*w.blob:], w.scales[n*w.kBlocks:], zps, full, w.bs) {
							if full < w.kBlocks { // the last, partial block
								w.dequantTail(row, n, full, zps)
							}
							continue
						}
						w.dequantRow(row, n, zps)
					}
					// Y^T = W . A^T: the weight panel is GEMM's left operand,
					// whose packing is cheaper than the right one's.
					one.SgemmPacked(n1-n0, M, K, 1, buf, K, pa, 0, ct, M)
					for j := range n1 - n0 {
						for m, v := range ct[j*M : (j+1)*M] {
							yd[m*w.N+n0+j] = v
						}
					}
				}
			}
		})
	}
	if bias != nil {
		for i := range yd {
			yd[i] += bias[i%w.N]
		}
	}
	return []*Tensor{y}, nil
}

func init() {
	ms := func(op string, fn Kernel) { Register(DomainMicrosoft, op, 1, 0, fn, 0) }
	ms("MatMulNBits", float32Kernel(matMulNBits))
	ms("DynamicQuantizeMatMul", float32Kernel(dynamicQuantizeMatMul))
	ms("MatMulIntegerToFloat", float32Kernel(matMulIntegerToFloat))
	ms("QAttention", float32Kernel(qAttention))
}
