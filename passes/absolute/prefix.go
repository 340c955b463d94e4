package absolute

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// probeRows evaluates the rows of x at 16 (else 8, 4) positions, or,
// when the model's shapes fix a length too long to probe, at the first 16
// of them (prefixRows).
func probeRows(w *work.Work, x *graph.Value) ([][]float64, *probe.Probe, error) {
	var err error
	for _, seq := range []int{16, 8, 4} {
		p := probe.NewProbe(w, 1, seq, 0)
		var rows [][]float64
		if rows, err = evalRows(p, x); err == nil {
			return rows, p, nil
		}
	}
	if !tooLarge(err) {
		return nil, nil, err
	}
	rows, p, perr := prefixRows(w, x, 16)
	if perr != nil {
		return nil, nil, fmt.Errorf("%w; evaluated on its first positions: %v", err, perr)
	}
	return rows, p, nil
}

// tooLarge reports whether err says a value was too large for a probe
// (more nodes, elements or bytes than it may evaluate), not that the
// value cannot be computed.
func tooLarge(err error) bool {
	return errors.Is(err, probe.ErrBudget) || errors.Is(err, kernels.ErrTooLarge) || errors.Is(err, kernels.ErrOverBudget)
}

// prefixRows evaluates the first n rows of x, whose number of rows the
// model's shapes fix at more than a probe may evaluate (a static export
// for a long context): every value of its cone the graph does not compute
// (constants, the inputs) is cut to its first n entries along each axis
// of that length. That gives x's first rows when its rows are computed
// position by position (a sinusoid of the positions, a table read at
// them), which is checked: the rows of n/2 positions must be the first
// rows of n.
func prefixRows(w *work.Work, x *graph.Value, n int) ([][]float64, *probe.Probe, error) {
	sx := w.Shape(x)
	if !sx.AllKnown() || sx.Rank() < 2 {
		return nil, nil, errors.New("its shape is not fixed")
	}
	ax, long := -1, 0
	for i, d := range sx.Dims[:sx.Rank()-1] {
		if d > 1 {
			if ax >= 0 {
				return nil, nil, fmt.Errorf("axes %d and %d may both hold positions", ax, i)
			}
			ax, long = i, int(d)
		}
	}
	if ax < 0 || long <= n {
		return nil, nil, errors.New("no axis holds more positions than a probe evaluates")
	}
	short, _, err := evalPrefix(w, x, ax, long, n/2)
	if err != nil {
		return nil, nil, err
	}
	rows, pr, err := evalPrefix(w, x, ax, long, n)
	if err != nil {
		return nil, nil, err
	}
	for i, r := range short {
		if !nearRows(r, rows[i]) {
			return nil, nil, fmt.Errorf("row %d of %d positions differs from that of %d: the rows are not computed position by position", i, n/2, n)
		}
	}
	return rows, pr, nil
}

// nearRows reports whether a and b are equal to float32 rounding (a
// product's sums may be ordered otherwise for another number of rows).
func nearRows(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i, x := range a {
		if math.Abs(x-b[i]) > 1e-5*(1+math.Abs(b[i])) {
			return false
		}
	}
	return true
}

// prefixMaxElems bounds the values prefixRows cuts: a larger one (a
// stored table) is left whole, and read at the cut positions.
const prefixMaxElems = 1 << 22

// evalPrefix evaluates the rows of x on axis ax with the values of its
// cone cut from length long to n.
func evalPrefix(w *work.Work, x *graph.Value, ax, long, n int) ([][]float64, *probe.Probe, error) {
	pr := probe.NewProbe(w, 1, n, 0)
	cuts := map[*graph.Value]*kernels.Tensor{}
	for _, nd := range w.Cone(x) {
		for _, in := range nd.Inputs() {
			if in == nil || cuts[in] != nil || in.Producer() != nil || !small(pr, w.Shape(in)) {
				continue
			}
			t := w.Const(in)
			if t == nil {
				var err error
				if t, err = pr.Value(in); err != nil {
					return nil, nil, err
				}
			}
			if c := cutPrefix(t, long, n); c != nil {
				cuts[in] = c
			}
		}
	}
	if len(cuts) == 0 {
		return nil, nil, fmt.Errorf("no value its rows are computed from has the length %d", long)
	}
	pr.SetCuts(cuts)
	t, err := pr.Value(x)
	if err != nil {
		return nil, nil, err
	}
	if t.Rank() != w.Shape(x).Rank() || t.Shape[ax] != n {
		return nil, nil, fmt.Errorf("cut to %d positions, the value has shape %v", n, t.Shape)
	}
	return tensorRows(t, ax), pr, nil
}

// small reports whether a value of shape s has at most prefixMaxElems
// elements under pr's binding.
func small(pr *probe.Probe, s work.Shape) bool {
	shape, ok := pr.BindShape(s)
	if !ok {
		return false
	}
	size := 1
	for _, d := range shape {
		size *= d
	}
	return size <= prefixMaxElems
}

// cutPrefix is t with every axis of size long cut to its first n entries
// (nil when t has no such axis).
func cutPrefix(t *kernels.Tensor, long, n int) *kernels.Tensor {
	shape := slices.Clone(t.Shape)
	for i, s := range shape {
		if s == long {
			shape[i] = n
		}
	}
	if slices.Equal(shape, t.Shape) {
		return nil
	}
	src := t.Float64s()
	size := 1
	for _, s := range shape {
		size *= s
	}
	out := make([]float64, size)
	idx := make([]int, len(shape))
	for k := range out {
		off := 0
		for i, s := range t.Shape {
			off = off*s + idx[i]
		}
		out[k] = src[off]
		for i := len(idx) - 1; i >= 0; i-- {
			if idx[i]++; idx[i] < shape[i] {
				break
			}
			idx[i] = 0
		}
	}
	return probe.FromFloat64Any(t.DType, shape, out)
}
