package absolute

import (
	"errors"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// TableRows evaluates x and returns its rows per position, [positions]
// [dim]: the slices along its axis of positions (RowsAxis), the other
// leading axes at index 0.
func TableRows(w *work.Work, p *probe.Probe, x *graph.Value) ([][]float64, string) {
	rows, err := evalRows(p, x)
	if err != nil {
		return nil, err.Error()
	}
	return rows, ""
}

func evalRows(p *probe.Probe, x *graph.Value) ([][]float64, error) {
	t, err := p.Value(x)
	if err != nil {
		return nil, err
	}
	if t.Rank() < 2 {
		return nil, errors.New("rank below 2")
	}
	return tensorRows(t, RowsAxis(t)), nil
}

// tensorRows are the slices of t along axis (t's other leading axes at
// index 0), each t's last axis.
func tensorRows(t *kernels.Tensor, axis int) [][]float64 {
	d := t.Shape[t.Rank()-1]
	stride := d
	for _, s := range t.Shape[axis+1 : t.Rank()-1] {
		stride *= s
	}
	v := t.Float64s()
	rows := make([][]float64, t.Shape[axis])
	for i := range rows {
		rows[i] = slices.Clone(v[i*stride : i*stride+d])
	}
	return rows
}

// RowsAxis is the axis of t that holds positions: of its leading axes
// (all but the last) longer than 1, the one along which the values
// change while they stay the same along the others (a batch broadcast or
// repeated: [seq, batch, d] as time-major models add it, [batch, seq, d]
// as most do); the next to last axis when the values leave it open.
func RowsAxis(t *kernels.Tensor) int {
	var long []int
	for i, s := range t.Shape[:t.Rank()-1] {
		if s > 1 {
			long = append(long, i)
		}
	}
	switch len(long) {
	case 0:
		return t.Rank() - 2
	case 1:
		return long[0]
	}
	varying := -1
	for _, ax := range long {
		if !ConstantAlong(t, ax) {
			if varying >= 0 {
				return t.Rank() - 2
			}
			varying = ax
		}
	}
	if varying < 0 {
		return t.Rank() - 2
	}
	return varying
}

// ConstantAlong reports whether t's values are the same at every index of
// axis (the others fixed).
func ConstantAlong(t *kernels.Tensor, axis int) bool {
	inner := 1
	for _, s := range t.Shape[axis+1:] {
		inner *= s
	}
	n := t.Shape[axis]
	v := t.Float64s()
	for i, x := range v {
		if (i/inner)%n != 0 && x != v[i-(i/inner%n)*inner] {
			return false
		}
	}
	return true
}

// mayHoldRows reports whether a value of shape sx added to an activation
// of shape sa may hold a row per position: one of its leading axes (any
// but the last) is not 1 (else it adds one vector everywhere: a bias),
// and, for a constant, every such axis meets a fixed size of the
// activation (a constant cannot follow an open length).
func mayHoldRows(w *work.Work, sa, sx work.Shape, isConst bool) bool {
	rows := false
	for i, d := range sx.Dims[:sx.Rank()-1] {
		if d == 1 {
			continue
		}
		rows = true
		if j := i + sa.Rank() - sx.Rank(); isConst && j >= 0 && !sa.Dims[j].Known() {
			return false
		}
	}
	return rows
}
