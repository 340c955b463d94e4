package kernels

import (
	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
)

// Data movement shared by the shape ops: every such op is a strided copy
// (Transpose, Slice, Expand, Tile, Split) or an indexed gather.

// stridedCopy fills dst (contiguous, of the given shape) with
// src[off + sum(i_k*strides[k])]. Strides may be zero or negative.
func stridedCopy[T any](dst, src []T, shape, strides []int, off int) {
	shape, strides = collapse(shape, strides)
	r := len(shape)
	if r == 0 {
		if len(dst) > 0 {
			dst[0] = src[off]
		}
		return
	}
	n := len(dst)
	if n == 0 {
		return
	}
	inner, is := shape[r-1], strides[r-1]
	idx := make([]int, r)
	pos := off
	for o := 0; o < n; o += inner {
		d := dst[o : o+inner]
		if is == 1 {
			copy(d, src[pos:pos+inner])
		} else {
			p := pos
			for i := range d {
				d[i] = src[p]
				p += is
			}
		}
		for k := r - 2; k >= 0; k-- {
			idx[k]++
			pos += strides[k]
			if idx[k] < shape[k] {
				break
			}
			pos -= strides[k] * shape[k]
			idx[k] = 0
		}
	}
}

// collapse merges adjacent dimensions that are contiguous with each other
// and drops size-1 dimensions.
func collapse(shape, strides []int) ([]int, []int) {
	var s, t []int
	for i := range shape {
		if shape[i] == 1 {
			continue
		}
		if k := len(s) - 1; k >= 0 && t[k] == strides[i]*shape[i] {
			s[k] *= shape[i]
			t[k] = strides[i]
			continue
		}
		s = append(s, shape[i])
		t = append(t, strides[i])
	}
	return s, t
}

// copyStrided is stridedCopy over tensors of the same element type.
func copyStrided(dst, src *Tensor, strides []int, off int) {
	switch d := dst.data.(type) {
	case []float32:
		stridedCopy(d, src.data.([]float32), dst.Shape, strides, off)
	case []float64:
		stridedCopy(d, src.data.([]float64), dst.Shape, strides, off)
	case []float16.Float16:
		stridedCopy(d, src.data.([]float16.Float16), dst.Shape, strides, off)
	case []graph.BF16:
		stridedCopy(d, src.data.([]graph.BF16), dst.Shape, strides, off)
	case []int64:
		stridedCopy(d, src.data.([]int64), dst.Shape, strides, off)
	case []int32:
		stridedCopy(d, src.data.([]int32), dst.Shape, strides, off)
	case []int8:
		stridedCopy(d, src.data.([]int8), dst.Shape, strides, off)
	case []uint8:
		stridedCopy(d, src.data.([]uint8), dst.Shape, strides, off)
	case []int16:
		stridedCopy(d, src.data.([]int16), dst.Shape, strides, off)
	case []uint16:
		stridedCopy(d, src.data.([]uint16), dst.Shape, strides, off)
	case []uint32:
		stridedCopy(d, src.data.([]uint32), dst.Shape, strides, off)
	case []uint64:
		stridedCopy(d, src.data.([]uint64), dst.Shape, strides, off)
	case []bool:
		stridedCopy(d, src.data.([]bool), dst.Shape, strides, off)
	default:
		panic(typePanic("kernels: copyStrided of " + dst.DType.String()))
	}
}

func take[T any](dst, src []T, idx []int) {
	_ = dst[len(idx)-1:]
	for i, j := range idx {
		dst[i] = src[j]
	}
}

// takeAny sets dst[i] = src[idx[i]].
func takeAny(dst, src *Tensor, idx []int) {
	if len(idx) == 0 {
		return
	}
	switch d := dst.data.(type) {
	case []float32:
		take(d, src.data.([]float32), idx)
	case []float64:
		take(d, src.data.([]float64), idx)
	case []float16.Float16:
		take(d, src.data.([]float16.Float16), idx)
	case []graph.BF16:
		take(d, src.data.([]graph.BF16), idx)
	case []int64:
		take(d, src.data.([]int64), idx)
	case []int32:
		take(d, src.data.([]int32), idx)
	case []int8:
		take(d, src.data.([]int8), idx)
	case []uint8:
		take(d, src.data.([]uint8), idx)
	case []int16:
		take(d, src.data.([]int16), idx)
	case []uint16:
		take(d, src.data.([]uint16), idx)
	case []uint32:
		take(d, src.data.([]uint32), idx)
	case []uint64:
		take(d, src.data.([]uint64), idx)
	case []bool:
		take(d, src.data.([]bool), idx)
	default:
		panic(typePanic("kernels: takeAny of " + dst.DType.String()))
	}
}

// stridesOf gives row-major strides for shape.
func stridesOf(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

// transposeC returns t with its axes permuted (out dim i = in dim perm[i]),
// allocated by c (nil outside a run), or t itself for the identity.
func transposeC(c *Call, t *Tensor, perm []int) *Tensor {
	st := stridesOf(t.Shape)
	shape := make([]int, len(perm))
	strides := make([]int, len(perm))
	identity := true
	for i, p := range perm {
		shape[i] = t.Shape[p]
		strides[i] = st[p]
		if p != i {
			identity = false
		}
	}
	if identity {
		return t
	}
	out := c.alloc(t.DType, shape...)
	copyStrided(out, t, strides, 0)
	return out
}

// expandC broadcasts t to shape (which must be a broadcast of t's shape),
// allocated by c (nil outside a run), or returns t when it has that shape.
func expandC(c *Call, t *Tensor, shape []int) *Tensor {
	if equalShape(t.Shape, shape) {
		return t
	}
	st := stridesOf(t.Shape)
	strides := make([]int, len(shape))
	off := len(shape) - len(t.Shape)
	for i := range shape {
		if j := i - off; j >= 0 && t.Shape[j] != 1 {
			strides[i] = st[j]
		}
	}
	out := c.alloc(t.DType, shape...)
	copyStrided(out, t, strides, 0)
	return out
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
