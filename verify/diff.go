package verify

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/onnxpe/onnxpe/kernels"
)

// Number is a float64 that JSON encodes as a number when finite and as
// the strings "NaN", "+Inf" and "-Inf" otherwise.
type Number float64

// MarshalJSON implements json.Marshaler.
func (n Number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	switch {
	case math.IsNaN(f):
		return []byte(`"NaN"`), nil
	case math.IsInf(f, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (n *Number) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("verify: bad number %q", s)
		}
		*n = Number(f)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Number(f)
	return nil
}

// Element is one element of an output: where it is and both values.
type Element struct {
	Index []int  `json:"index"`
	A     Number `json:"a"`
	B     Number `json:"b"`
	// Position is the sequence position of the token the element belongs
	// to (its position id, or its index in the past+current sequence);
	// nil when the output has no sequence axis.
	Position *int `json:"position"`
}

// OutputDiff is the comparison of one output in one input set.
type OutputDiff struct {
	Name string `json:"name"`
	// NameB is the output's name in model B when it differs (outputs
	// were matched by position).
	NameB     string    `json:"name_b,omitempty"`
	DType     string    `json:"dtype"`
	Shape     []int     `json:"shape"`
	Tolerance Tolerance `json:"tolerance"`
	MaxAbsErr float64   `json:"max_abs_err"`
	// MaxRelErr is the largest |a-b|/|a| over elements with a != 0.
	MaxRelErr float64 `json:"max_rel_err"`
	// MaxULP is the largest distance in units in the last place of the
	// element type (0 for integer types).
	MaxULP uint64 `json:"max_ulp"`
	// Mismatches counts the elements outside the tolerance (NaN against
	// a number, different infinities included).
	Mismatches int `json:"mismatches"`
	// Compared counts the elements compared: all but those of padding
	// tokens, whose values models leave unspecified.
	Compared int `json:"compared"`
	// Worst is the element furthest outside its tolerance, or, when all
	// are within, the one with the largest absolute difference.
	Worst *Element `json:"worst,omitempty"`
	// FirstMismatch is the mismatching element at the smallest sequence
	// position (the first in memory order when there is no sequence axis).
	FirstMismatch *Element `json:"first_mismatch,omitempty"`
	Equal         bool     `json:"equal"`
	// Problem says why the output could not be compared element by
	// element (different shapes or types, missing on one side).
	Problem string `json:"problem,omitempty"`
}

// positionMap says which axis of an output runs along the sequence and
// which token position each index along it stands for.
type positionMap struct {
	batchAxis int // -1: none
	seqAxis   int // -1: the output has no sequence axis
	// total: the axis indexes past and current tokens (present keys),
	// whose position is the index itself.
	total bool
	past  int
	// pos[b][j] is the position of current token j of row b (nil: past+j).
	pos [][]int64
	// pad[b][j] marks padding tokens, whose outputs are not compared.
	pad [][]bool
}

var noPositions = &positionMap{batchAxis: -1, seqAxis: -1}

// position returns the sequence position of the element at flat index i
// of a tensor with the given strides and shape.
func (m *positionMap) position(i int, shape, strides []int) (int, bool) {
	if m == nil || m.seqAxis < 0 || m.seqAxis >= len(shape) {
		return 0, false
	}
	j := (i / strides[m.seqAxis]) % shape[m.seqAxis]
	if m.total {
		return j, true
	}
	b := 0
	if m.batchAxis >= 0 && m.batchAxis < len(shape) {
		b = (i / strides[m.batchAxis]) % shape[m.batchAxis]
	}
	if b < len(m.pos) && j < len(m.pos[b]) {
		return int(m.pos[b][j]), true
	}
	return m.past + j, true
}

// padding reports whether the element at flat index i belongs to a
// padding token of the current ones (on an axis of past and current
// tokens too: a present key at a padding token is computed from the
// previous layer's unspecified output there).
func (m *positionMap) padding(i int, shape, strides []int) bool {
	if m == nil || m.pad == nil || m.seqAxis < 0 || m.seqAxis >= len(shape) {
		return false
	}
	j := (i / strides[m.seqAxis]) % shape[m.seqAxis]
	if m.total {
		if j -= m.past; j < 0 {
			return false
		}
	}
	b := 0
	if m.batchAxis >= 0 && m.batchAxis < len(shape) {
		b = (i / strides[m.batchAxis]) % shape[m.batchAxis]
	}
	return b < len(m.pad) && j < len(m.pad[b]) && m.pad[b][j]
}

func stridesOf(shape []int) []int {
	st := make([]int, len(shape))
	n := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = n
		n *= max(shape[i], 1)
	}
	return st
}

func unflatten(i int, shape, strides []int) []int {
	idx := make([]int, len(shape))
	for k := range shape {
		idx[k] = (i / strides[k]) % max(shape[k], 1)
	}
	return idx
}

// compareBlock is the elements diffTensors converts to float64 at a time.
const compareBlock = 1 << 16

// diffTensors compares output b with the reference a (of models A and B).
func diffTensors(name string, a, b *kernels.Tensor, tol Tolerance, pm *positionMap) OutputDiff {
	return diffTensorsAs(name, "A", "B", a, b, tol, pm)
}

// diffTensorsAs is diffTensors with the sides named la and lb in the
// problems it reports (A against reference outputs: "the reference", "A").
func diffTensorsAs(name, la, lb string, a, b *kernels.Tensor, tol Tolerance, pm *positionMap) OutputDiff {
	d := OutputDiff{Name: name, DType: a.DType.String(), Shape: slices.Clone(a.Shape), Tolerance: tol}
	if !a.DType.IsFloat() {
		d.Tolerance = Tolerance{}
	}
	switch {
	case a.IsSequence() || b.IsSequence():
		d.Problem = "sequence outputs are not compared"
		return d
	case a.DType != b.DType:
		d.Problem = fmt.Sprintf("element type %v in %s, %v in %s", a.DType, la, b.DType, lb)
		return d
	case !slices.Equal(a.Shape, b.Shape):
		d.Problem = fmt.Sprintf("shape %v in %s, %v in %s", a.Shape, la, b.Shape, lb)
		return d
	}
	// A block at a time as float64: the logits of a long sequence are
	// gigabytes, and two float64 copies of them would be four times that.
	n := a.Len()
	blk := min(n, compareBlock)
	av, bv := make([]float64, blk), make([]float64, blk)
	strides := stridesOf(a.Shape)
	isFloat := a.DType.IsFloat()
	worstI, worstScore := -1, -1.0
	firstI, firstPos := -1, math.MaxInt
	var worstAB, firstAB [2]float64
	for off := 0; off < n; off += blk {
		m := min(blk, n-off)
		a.Float64sAt(av[:m], off)
		b.Float64sAt(bv[:m], off)
		// A spilled side's pages go back as they are read.
		kernels.ReleaseSpilled(a, off, m)
		kernels.ReleaseSpilled(b, off, m)
		for j := range m {
			i := off + j
			if pm.padding(i, a.Shape, strides) {
				continue
			}
			d.Compared++
			x, y := av[j], bv[j]
			bad := false
			score := 0.0
			switch {
			case x == y: // equal values, equal infinities
			case math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0):
				if !(math.IsNaN(x) && math.IsNaN(y)) {
					bad, score = true, math.Inf(1)
				}
			default:
				e := math.Abs(x - y)
				d.MaxAbsErr = math.Max(d.MaxAbsErr, e)
				if x != 0 {
					d.MaxRelErr = math.Max(d.MaxRelErr, e/math.Abs(x))
				}
				if isFloat {
					d.MaxULP = max(d.MaxULP, ulpDistance(a.DType, x, y))
				}
				allowed := d.Tolerance.Allowed(x)
				bad = !(e <= allowed)
				if bad {
					score = 1 + e/math.Max(allowed, math.SmallestNonzeroFloat64)
				} else {
					// Within tolerance: rank by the absolute difference
					// below every mismatch.
					score = e / (1 + e)
				}
			}
			if score > worstScore {
				worstI, worstScore, worstAB = i, score, [2]float64{x, y}
			}
			if bad {
				d.Mismatches++
				p, ok := pm.position(i, a.Shape, strides)
				if !ok {
					p = 0
				}
				if firstI < 0 || p < firstPos {
					firstI, firstPos, firstAB = i, p, [2]float64{x, y}
				}
			}
		}
	}
	d.Equal = d.Mismatches == 0
	elem := func(i int, ab [2]float64) *Element {
		e := &Element{Index: unflatten(i, a.Shape, strides), A: Number(ab[0]), B: Number(ab[1])}
		if p, ok := pm.position(i, a.Shape, strides); ok {
			e.Position = &p
		}
		return e
	}
	if worstI >= 0 {
		d.Worst = elem(worstI, worstAB)
	}
	if firstI >= 0 {
		d.FirstMismatch = elem(firstI, firstAB)
	}
	return d
}
