package kernels

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
)

// padSource maps output coordinate o of a padded axis (dim d, pad before
// p) to the input coordinate, or -1 for the constant.
func padSource(o, d, p int, mode string) int {
	i := o - p
	if i >= 0 && i < d {
		return i
	}
	switch mode {
	case "edge":
		return min(max(i, 0), d-1)
	case "reflect":
		if d == 1 {
			return 0
		}
		period := 2 * (d - 1)
		i = ((i % period) + period) % period
		if i >= d {
			i = period - i
		}
		return i
	case "wrap":
		return ((i % d) + d) % d
	}
	return -1
}

func pad(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	r := len(x.Shape)
	mode := c.String("mode", "constant")
	var pads []int64
	val := 0.0
	if c.Opset < 11 {
		pads = c.Ints("pads")
		val = float64(c.Float("value", 0))
	} else {
		pads = intsInput(in, 1)
		if t := optIn(in, 2); t != nil && t.Len() > 0 {
			val = t.Float64s()[0]
		}
	}
	full := make([]int, 2*r)
	if axes := intsInput(in, 3); axes != nil {
		ax, err := normAxes(axes, r)
		if err != nil {
			return nil, err
		}
		if len(pads) != 2*len(ax) {
			return nil, fmt.Errorf("pads %v for axes %v", pads, axes)
		}
		for i, a := range ax {
			full[a], full[a+r] = int(pads[i]), int(pads[i+len(ax)])
		}
	} else {
		if len(pads) != 2*r {
			return nil, fmt.Errorf("pads %v for rank %d", pads, r)
		}
		full = toInts(pads)
	}
	shape := slices.Clone(x.Shape)
	dims := make([]int64, r)
	for i := range r {
		d := int64(x.Shape[i]) + int64(full[i]) + int64(full[i+r])
		if d < 0 {
			return nil, fmt.Errorf("pads %v make dimension %d negative", pads, i)
		}
		shape[i], dims[i] = int(d), d
		if mode != "constant" && x.Shape[i] == 0 && shape[i] > 0 {
			return nil, fmt.Errorf("%s padding of an empty dimension", mode)
		}
	}
	switch mode {
	case "constant", "edge", "reflect", "wrap":
	default:
		return nil, fmt.Errorf("mode %q", mode)
	}
	// The output, and the source index of each of its elements.
	if err := c.checkSize(x.DType, dims); err != nil {
		return nil, err
	}
	if err := c.checkSize(graph.Int64, dims); err != nil {
		return nil, err
	}
	// source index per output element (-1: the constant)
	n := shapeSize(shape)
	idx := make([]int, n)
	st := stridesOf(x.Shape)
	coord := make([]int, r)
	for o := range n {
		src := 0
		for d := range r {
			s := padSource(coord[d], x.Shape[d], full[d], mode)
			if s < 0 {
				src = -1
				break
			}
			src += s * st[d]
		}
		idx[o] = src
		for d := r - 1; d >= 0; d-- {
			coord[d]++
			if coord[d] < shape[d] {
				break
			}
			coord[d] = 0
		}
	}
	// gather from x extended by one constant element at the end
	ext := c.alloc(x.DType, x.Len()+1)
	copyAny(ext, 0, x, 0, x.Len())
	cv := c.alloc(x.DType, 1)
	fromFloat64(cv, []float64{val})
	copyAny(ext, x.Len(), cv, 0, 1)
	for i, s := range idx {
		if s < 0 {
			idx[i] = x.Len()
		}
	}
	out := c.alloc(x.DType, shape...)
	takeAny(out, ext, idx)
	return []*Tensor{out}, nil
}

func init() {
	reg("Pad", 2, 0, pad)
}
