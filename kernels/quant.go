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
	s := w.scales[n*w.kBlocks+blk]
	switch {
	case w.zpF != nil:
		return w.zpF[n*w.kBlocks+blk], s
	case w.zpU8 != nil:
		per := 8 / w.bits
		v := w.zpU8[n*w.zpStride+blk/per] >> (w.bits * (blk % per)) & (1<<w.bits - 1)
		return float32(v), s
	}
	return float32(int(1) << (w.bits - 1)), s
}

// dequantRows writes rows [n0, n1) of the dequantized weight (N x K) into
// dst, K wide: (q - zero point) * scale.
func (w *nbits) dequantRows(dst []float32, n0, n1 int) {
	for n := n0; n < n1; n++ {
		row := dst[(n-n0)*w.K : (n-n0+1)*w.K]
		if w.gidx != nil {
			for k := range w.K {
				z, s := w.zeroScale(n, int(w.gidx[k]))
				row[k] = (float32(w.quant(n, k)) - z) * s
			}
			continue
		}
		for blk := range w.kBlocks {
			z, s := w.zeroScale(n, blk)
			for k := blk * w.bs; k < min((blk+1)*w.bs, w.K); k++ {
				row[k] = (float32(w.quant(n, k)) - z) * s
			}
		}
	}
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
	// Dequantize panels of rows of W and multiply each into its columns
	// of Y: the float32 weight is never held whole.
	panel := max(1, min(w.N, (1<<20)/w.K))
	npan := (w.N + panel - 1) / panel
	work := M * w.N * w.K
	p := c.threads()
	if work < 1<<20 {
		p = 1
	}
	p = min(p, npan)
	fanOut(p, npan, func(lo, hi int) {
		buf := make([]float32, panel*w.K)
		one := gemm.Exec{Threads: 1}
		for pi := lo; pi < hi; pi++ {
			n0, n1 := pi*panel, min((pi+1)*panel, w.N)
			w.dequantRows(buf, n0, n1)
			if M > 0 {
				one.Sgemm(false, true, M, n1-n0, w.K, 1, ad, w.K, buf, w.K, 0, yd[n0:], w.N)
			}
		}
	})
	if bias != nil {
		for i := range yd {
			yd[i] += bias[i%w.N]
		}
	}
	return []*Tensor{y}, nil
}

func init() {
	ms := func(op string, fn Kernel) { Register(DomainMicrosoft, op, 1, 0, fn, 0) }
	ms("MatMulNBits", matMulNBits)
	ms("DynamicQuantizeMatMul", dynamicQuantizeMatMul)
	ms("MatMulIntegerToFloat", matMulIntegerToFloat)
	ms("QAttention", qAttention)
}
