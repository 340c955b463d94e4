package kernels

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

// rotary applies rotary position embedding in place of a copy of x.
//
// x is viewed as (B, H, S, D) when headsFirst, else (B, S, H, D). For each
// (b, s) the cos/sin row is cs[row(b, s)*half : +half]. The first rd
// elements of each head are rotated (pairs (2i, 2i+1) when interleaved,
// (i, i+rd/2) otherwise); the rest pass through.
func rotaryT[T Float](y, x, cosC, sinC []T, B, H, S, D, rd int, headsFirst, interleaved bool, row func(b, s int) (int, error)) error {
	half := rd / 2
	copy(y, x)
	for b := range B {
		for s := range S {
			r, err := row(b, s)
			if err != nil {
				return err
			}
			if (r+1)*half > len(cosC) || r < 0 {
				return fmt.Errorf("position row %d is outside the cos/sin cache of %d rows", r, len(cosC)/max(half, 1))
			}
			cr, sr := cosC[r*half:r*half+half], sinC[r*half:r*half+half]
			for h := range H {
				var off int
				if headsFirst {
					off = ((b*H+h)*S + s) * D
				} else {
					off = ((b*S+s)*H + h) * D
				}
				xv, yv := x[off:off+D], y[off:off+D]
				for i := range half {
					var i1, i2 int
					if interleaved {
						i1, i2 = 2*i, 2*i+1
					} else {
						i1, i2 = i, i+half
					}
					a, c := xv[i1], xv[i2]
					yv[i1] = a*cr[i] - c*sr[i]
					yv[i2] = c*cr[i] + a*sr[i]
				}
			}
		}
	}
	return nil
}

type rotaryArgs struct {
	x, cos, sin, pos *Tensor
	interleaved      bool
	rd, numHeads     int
	msOrder          bool // com.microsoft: position_ids may be a one-element offset
	c                *Call
}

func runRotary(a rotaryArgs) (*Tensor, error) {
	x := a.x
	if len(a.cos.Shape) < 2 || len(a.sin.Shape) < 2 {
		return nil, fmt.Errorf("cos/sin caches %v/%v must have rank 2 or 3", a.cos.Shape, a.sin.Shape)
	}
	if a.cos.DType != x.DType || a.sin.DType != x.DType {
		return nil, fmt.Errorf("cos/sin caches %v/%v must have the type of the input %v", a.cos, a.sin, x)
	}
	var B, H, S, D int
	headsFirst := false
	switch len(x.Shape) {
	case 4:
		B, H, S, D = x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
		headsFirst = true
	case 3:
		B, S = x.Shape[0], x.Shape[1]
		hidden := x.Shape[2]
		H = a.numHeads
		if H == 0 {
			hd := a.rd
			if hd == 0 {
				hd = 2 * a.cos.Shape[len(a.cos.Shape)-1]
			}
			if hd == 0 || hidden%hd != 0 {
				return nil, fmt.Errorf("cannot infer num_heads for hidden size %d", hidden)
			}
			H = hidden / hd
		}
		if H <= 0 {
			return nil, fmt.Errorf("num_heads %d for hidden size %d", H, hidden)
		}
		if hidden%H != 0 {
			return nil, fmt.Errorf("hidden size %d is not a multiple of num_heads %d", hidden, H)
		}
		D = hidden / H
	default:
		return nil, fmt.Errorf("input must be 3-D or 4-D, got %v", x.Shape)
	}
	rd := a.rd
	if rd == 0 {
		rd = D
	}
	if rd > D || rd%2 != 0 {
		return nil, fmt.Errorf("rotary_embedding_dim %d for head size %d", rd, D)
	}
	half := rd / 2
	if a.cos.Shape[len(a.cos.Shape)-1] != half || !equalShape(a.cos.Shape, a.sin.Shape) {
		return nil, fmt.Errorf("cos/sin caches %v/%v do not have rotary_dim/2 = %d columns", a.cos.Shape, a.sin.Shape, half)
	}
	var row func(b, s int) (int, error)
	switch {
	case a.pos == nil:
		if len(a.cos.Shape) != 3 || a.cos.Shape[0] != B || a.cos.Shape[1] != S {
			return nil, fmt.Errorf("without position_ids the caches must be (batch, seq, rotary_dim/2), got %v", a.cos.Shape)
		}
		row = func(b, s int) (int, error) { return b*S + s, nil }
	case a.pos.Len() == 1 && a.msOrder && len(a.pos.Shape) <= 1:
		off := int(a.pos.Int64s()[0])
		row = func(b, s int) (int, error) { return off + s, nil }
	default:
		p := a.pos.Int64s()
		if len(a.pos.Shape) != 2 || a.pos.Shape[0] != B || a.pos.Shape[1] != S {
			return nil, fmt.Errorf("position_ids %v for batch %d, sequence %d", a.pos.Shape, B, S)
		}
		if len(a.cos.Shape) != 2 {
			return nil, fmt.Errorf("with position_ids the caches must be (max_position, rotary_dim/2), got %v", a.cos.Shape)
		}
		row = func(b, s int) (int, error) { return int(p[b*S+s]), nil }
	}
	y := a.c.alloc(x.DType, x.Shape...)
	var err error
	switch x.DType {
	case graph.Float:
		err = rotaryT(Data[float32](y), Data[float32](x), Data[float32](a.cos), Data[float32](a.sin), B, H, S, D, rd, headsFirst, a.interleaved, row)
	case graph.Double:
		err = rotaryT(Data[float64](y), Data[float64](x), Data[float64](a.cos), Data[float64](a.sin), B, H, S, D, rd, headsFirst, a.interleaved, row)
	default:
		return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
	}
	return y, err
}

// rotaryONNX is RotaryEmbedding of the ONNX domain (opset 23): inputs X,
// cos_cache, sin_cache, position_ids (optional).
func rotaryONNX(c *Call, in []*Tensor) ([]*Tensor, error) {
	y, err := runRotary(rotaryArgs{c: c, x: in[0], cos: in[1], sin: in[2], pos: optIn(in, 3),
		interleaved: c.Int("interleaved", 0) == 1, rd: int(c.Int("rotary_embedding_dim", 0)), numHeads: int(c.Int("num_heads", 0))})
	return []*Tensor{y}, err
}

// rotaryMS is com.microsoft RotaryEmbedding: inputs input, position_ids
// ((batch, seq) or a one-element offset), cos_cache, sin_cache.
func rotaryMS(c *Call, in []*Tensor) ([]*Tensor, error) {
	if c.Int("is_packed_batching", 0) != 0 {
		return nil, fmt.Errorf("is_packed_batching: %w", ErrUnsupportedOp)
	}
	if s := c.Float("scale", 1); s != 1 {
		return nil, fmt.Errorf("scale %v: %w", s, ErrUnsupportedOp)
	}
	y, err := runRotary(rotaryArgs{c: c, x: in[0], pos: in[1], cos: in[2], sin: in[3], msOrder: true,
		interleaved: c.Int("interleaved", 0) == 1, rd: int(c.Int("rotary_embedding_dim", 0)), numHeads: int(c.Int("num_heads", 0))})
	return []*Tensor{y}, err
}

// T5Bucket is T5's relative position bucket (Hugging Face
// _relative_position_bucket, ONNX Runtime's RelativePositionBias) of
// relative position rel = key - query, with the logarithm computed in
// float32 as PyTorch does. A direction without an exact range (fewer than
// 2 buckets) gives the distance itself; the fused op's kernel refuses such
// arguments first (checkT5Buckets).
func T5Bucket(rel int64, numBuckets, maxDistance int64, bidirectional bool) int64 {
	var ret int64
	n := rel
	if bidirectional {
		numBuckets /= 2
		if rel > 0 {
			ret += numBuckets
		}
		if n < 0 {
			n = -n
		}
	} else {
		n = -min(rel, 0)
	}
	maxExact := numBuckets / 2
	if n < maxExact || maxExact == 0 {
		return ret + n
	}
	l := float32(math.Log(float64(float32(n) / float32(maxExact))))
	v := l / float32(math.Log(float64(maxDistance)/float64(maxExact))) * float32(numBuckets-maxExact)
	large := maxExact + int64(v)
	return ret + min(large, numBuckets-1)
}

// checkT5Buckets reports an error unless t5Bucket is defined for the
// arguments: each direction needs an exact range (num_buckets/2 of its
// buckets, at least 1) and max_distance beyond it (the logarithmic
// buckets divide by log(max_distance/exact)).
func checkT5Buckets(numBuckets, maxDistance int64, bidirectional bool) error {
	per := numBuckets
	if bidirectional {
		per /= 2
	}
	exact := per / 2
	if exact < 1 {
		need := 2
		if bidirectional {
			need = 4
		}
		return fmt.Errorf("bias_table has %d buckets, need at least %d", numBuckets, need)
	}
	if maxDistance <= exact {
		return fmt.Errorf("max_distance %d must be more than the %d exactly bucketed positions", maxDistance, exact)
	}
	return nil
}

// relativePositionBias is com.microsoft RelativePositionBias: bias_table
// (num_buckets, num_heads), query_length and key_length (int64 scalars) ->
// (1, num_heads, q, k) with out[h,i,j] = table[bucket(j-i), h].
func relativePositionBias(c *Call, in []*Tensor) ([]*Tensor, error) {
	table := in[0]
	if len(table.Shape) != 2 {
		return nil, fmt.Errorf("bias_table must be 2-D")
	}
	if in[1].Len() != 1 || in[2].Len() != 1 {
		return nil, fmt.Errorf("query_length %v and key_length %v must have one element", in[1], in[2])
	}
	q, k := in[1].Int64s()[0], in[2].Int64s()[0]
	if q < 0 || k < 0 {
		return nil, fmt.Errorf("negative lengths %d, %d", q, k)
	}
	nb, nh := table.Shape[0], table.Shape[1]
	maxDist := c.Int("max_distance", 128)
	bi := c.Int("is_bidirectional", 0) == 1
	if err := checkT5Buckets(int64(nb), maxDist, bi); err != nil {
		return nil, err
	}
	if err := c.checkSize(table.DType, []int64{int64(nh), q, k}); err != nil {
		return nil, err
	}
	if err := c.checkSize(graph.Int64, []int64{2, q + k + 1}); err != nil {
		return nil, err
	}
	c.reserveElems(nh*int(q)*int(k), 8)
	idx := make([]int, 0, int64(nh)*q*k)
	buckets := make([]int, 2*k+2*q+1)
	for r := -q; r <= k; r++ {
		buckets[r+q] = int(T5Bucket(r, int64(nb), maxDist, bi))
	}
	for h := range nh {
		for i := range q {
			for j := range k {
				idx = append(idx, buckets[j-i+q]*nh+h)
			}
		}
	}
	out := c.alloc(table.DType, 1, nh, int(q), int(k))
	takeAny(out, table, idx)
	return []*Tensor{out}, nil
}

// ALiBiBias is the project's fused ALiBi op, domain "ai.onnxpe", op
// "ALiBiBias", version 1. It computes the attention-score bias of ALiBi
// (Press et al.; BLOOM, MPT) for all heads at once.
//
//	inputs:  slopes        T[num_heads]   (T: float32, float64, float16, bfloat16)
//	         query_length  int64 scalar (or 1-element)
//	         key_length    int64 scalar (or 1-element)
//	attrs:   symmetric     int, default 0
//	output:  bias          T[1, num_heads, query_length, key_length]
//
// With symmetric = 0 (causal models, BLOOM/MPT):
//
//	bias[0,h,i,j] = slopes[h] * (j - (key_length - 1))
//
// which does not depend on the query row i: it is MPT's form, and differs
// from the textbook -slope*(pos_i - j) (with query i at absolute position
// pos_i = key_length - query_length + i) only by a per-row constant, which
// softmax ignores; BLOOM's slope*j differs by another per-row constant.
// Future keys (j > pos_i) get positive values and must be masked by the
// model's causal mask as usual.
//
// With symmetric = 1 (bidirectional encoders):
//
//	bias[0,h,i,j] = -slopes[h] * |pos_i - j|,  pos_i = key_length - query_length + i
//
// The values are computed in float64 and rounded once to T.
func alibiBias(c *Call, in []*Tensor) ([]*Tensor, error) {
	sl := in[0]
	if len(sl.Shape) != 1 {
		return nil, fmt.Errorf("slopes must be 1-D, got %v", sl.Shape)
	}
	if in[1].Len() != 1 || in[2].Len() != 1 {
		return nil, fmt.Errorf("query_length %v and key_length %v must have one element", in[1], in[2])
	}
	q, k := in[1].Int64s()[0], in[2].Int64s()[0]
	if q < 0 || k < 0 || q > k {
		return nil, fmt.Errorf("query_length %d, key_length %d (need 0 <= q <= k)", q, k)
	}
	sym := c.Int("symmetric", 0) == 1
	// The float64 values and the output.
	if err := c.checkSize(graph.Double, []int64{int64(sl.Shape[0]), q, k}); err != nil {
		return nil, err
	}
	s := sl.Float64s()
	nh := len(s)
	v := make([]float64, 0, int64(nh)*q*k)
	for h := range nh {
		for i := range q {
			pos := k - q + i
			for j := range k {
				if sym {
					d := float64(pos - j)
					v = append(v, -s[h]*math.Abs(d))
				} else {
					v = append(v, s[h]*float64(j-(k-1)))
				}
			}
		}
	}
	out := c.alloc(sl.DType, 1, nh, int(q), int(k))
	fromFloat64(out, v)
	return []*Tensor{out}, nil
}

// transBatch moves the first dimension of x (rank n >= 3) to position
// n-2: (d0, d1, ..., dn-2, dn-1) -> (d1, ..., dn-2, d0, dn-1), as
// FusedMatMul's transBatchA/transBatchB do.
func transBatch(c *Call, x *Tensor) (*Tensor, error) {
	n := len(x.Shape)
	if n < 3 {
		return nil, fmt.Errorf("transBatch needs rank >= 3, got %v", x.Shape)
	}
	perm := make([]int, 0, n)
	for i := 1; i < n-1; i++ {
		perm = append(perm, i)
	}
	perm = append(perm, 0, n-1)
	return transposeC(c, x, perm), nil
}

// fusedMatMul is com.microsoft FusedMatMul: alpha * op(A) @ op(B), where
// transBatchA/B first move the leading dimension next to the last one and
// transA/transB then transpose the last two dimensions.
func fusedMatMul(c *Call, in []*Tensor) ([]*Tensor, error) {
	a, b := in[0], in[1]
	var err error
	if c.Int("transBatchA", 0) != 0 {
		if a, err = transBatch(c, a); err != nil {
			return nil, err
		}
	}
	if c.Int("transBatchB", 0) != 0 {
		if b, err = transBatch(c, b); err != nil {
			return nil, err
		}
	}
	ta, tb := c.Int("transA", 0) == 1, c.Int("transB", 0) == 1
	if len(a.Shape) < 2 && ta || len(b.Shape) < 2 && tb {
		return nil, fmt.Errorf("cannot transpose a 1-D operand")
	}
	o, err := matmulNumpy(c, a, b, float64(c.Float("alpha", 1)), ta, tb)
	return []*Tensor{o}, err
}

func addBias(c *Call, x, bias *Tensor) (*Tensor, error) {
	if bias == nil {
		return x, nil
	}
	return binary(c, opAdd, x, bias)
}

func geluKernel(f32 func(d, s []float32), f func(float64) float64, withBias bool) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		x := in[0]
		if withBias {
			var err error
			if x, err = addBias(c, x, optIn(in, 1)); err != nil {
				return nil, err
			}
		}
		return floatUnary32(f32, f)(c, []*Tensor{x})
	}
}

// skipLayerNorm is com.microsoft SkipLayerNormalization and
// SkipSimplifiedLayerNormalization: s = input + skip (+ bias), y =
// LayerNorm(s) * gamma (+ beta) over the last dimension. Outputs: y, mean,
// inv_std_var, s.
func skipLayerNorm(simplified bool) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		x, skip, gamma := in[0], in[1], in[2]
		var beta, bias *Tensor
		if simplified {
			bias = optIn(in, 3)
		} else {
			beta, bias = optIn(in, 3), optIn(in, 4)
		}
		s, err := binary(c, opAdd, x, skip)
		if err != nil {
			return nil, err
		}
		if s, err = addBias(c, s, bias); err != nil {
			return nil, err
		}
		eps := float64(c.Float("epsilon", 1e-12))
		// mean and inv_std_var are float32 (ONNX Runtime's type U).
		y, mean, inv, err := normalize(c, s, gamma, beta, len(s.Shape)-1, eps, simplified, graph.Float)
		if err != nil {
			return nil, err
		}
		return []*Tensor{y, mean, inv, s}, nil
	}
}

// simplifiedLayerNorm is RMSNorm: y = x / sqrt(mean(x²) + eps) * scale
// over the dims from axis. Outputs: y, inv_std_var.
func simplifiedLayerNorm(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	axis, err := normAxis(c.Int("axis", -1), len(x.Shape))
	if err != nil {
		return nil, err
	}
	u, err := stashType(c)
	if err != nil {
		return nil, err
	}
	y, _, inv, err := normalize(c, x, optIn(in, 1), nil, axis, float64(c.Float("epsilon", 1e-5)), true, u)
	if err != nil {
		return nil, err
	}
	return []*Tensor{y, inv}, nil
}

func init() {
	reg("RotaryEmbedding", 23, 0, rotaryONNX)
	ms := func(op string, fn Kernel) { Register(DomainMicrosoft, op, 1, 0, fn, 0) }
	ms("RotaryEmbedding", rotaryMS)
	Register(DomainMicrosoft, "RelativePositionBias", 1, 0, relativePositionBias, Native)
	Register(DomainOnnxpe, "ALiBiBias", 1, 0, alibiBias, Native)
	ms("FusedMatMul", fusedMatMul)
	ms("Gelu", geluKernel(geluErfSlice, geluErf, false))
	ms("BiasGelu", geluKernel(geluErfSlice, geluErf, true))
	ms("FastGelu", geluKernel(geluTanhSlice, geluTanh, true))
	ms("QuickGelu", func(c *Call, in []*Tensor) ([]*Tensor, error) {
		a := float64(c.Float("alpha", 1.702))
		return floatUnary(func(x float64) float64 { return x * sigmoid(a*x) })(c, in)
	})
	ms("SkipLayerNormalization", skipLayerNorm(false))
	ms("SkipSimplifiedLayerNormalization", skipLayerNorm(true))
	ms("SimplifiedLayerNormalization", simplifiedLayerNorm)
	// ONNX Runtime registers its fused LayerNormalization and
	// SimplifiedLayerNormalization in the ONNX domain for any opset, so
	// its optimizer writes them into models of opset < 17 too.
	reg("SimplifiedLayerNormalization", 1, 0, simplifiedLayerNorm)
	reg("LayerNormalization", 1, 16, layerNorm)
}
