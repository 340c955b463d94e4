package kernels

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
)

// String tensors ([]string) are held for the ops that cast, compare and
// look them up: Cast and CastLike to and from numbers, Equal, and
// ai.onnx.ml's LabelEncoder; Identity, Shape, Size, control flow,
// sequences and optionals pass them along. Any other op refuses them (the
// string-processing ops StringNormalizer, StringSplit, StringConcat,
// RegexFullMatch and TfIdfVectorizer are not implemented).

// stringOps are the ops (by opName) that accept string inputs.
var stringOps = map[string]bool{
	"Cast": true, "CastLike": true, "Equal": true, "Identity": true, "Shape": true, "Size": true,
	"If": true, "Loop": true, "Constant": true,
	"SequenceConstruct": true, "SequenceInsert": true, "SequenceAt": true, "SequenceErase": true,
	"SequenceLength": true, "SequenceEmpty": true,
	"Optional": true, "OptionalGetElement": true, "OptionalHasElement": true,
	DomainML + ".LabelEncoder": true,
}

// formatNumber writes x as numpy's str() of a value of type dt does:
// floats in the shortest form that reads back (fixed notation with a
// ".0" for whole numbers from 1e-4 to 1e16, else scientific, "inf",
// "nan"), integers in decimal, bools as True and False.
func formatNumber(x float64, dt graph.DataType) string {
	switch {
	case dt == graph.Bool:
		if x != 0 {
			return "True"
		}
		return "False"
	case !isFloatType(dt):
		return strconv.FormatInt(int64(x), 10)
	case math.IsNaN(x):
		return "nan"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	}
	bits := 64
	if dt != graph.Double {
		bits = 32
	}
	if a := math.Abs(x); a != 0 && (a < 1e-4 || a >= 1e16) {
		return strconv.FormatFloat(x, 'e', -1, bits)
	}
	s := strconv.FormatFloat(x, 'f', -1, bits)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// castStrings converts to or from string tensors.
func castStrings(c *Call, t *Tensor, dt graph.DataType) (*Tensor, error) {
	out := c.alloc(dt, t.Shape...)
	if t.DType == graph.String {
		src := Data[string](t)
		if dt == graph.String {
			copy(Data[string](out), src)
			return out, nil
		}
		v := make([]float64, len(src))
		for i, s := range src {
			f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				return nil, fmt.Errorf("cannot cast the string %q to %v", s, dt)
			}
			v[i] = f
		}
		fromFloat64Sat(out, v, true, "up")
		return out, nil
	}
	d := Data[string](out)
	if u, ok := t.data.([]uint64); ok {
		for i, x := range u {
			d[i] = strconv.FormatUint(x, 10)
		}
		return out, nil
	}
	if t.DType == graph.Int64 {
		for i, x := range Data[int64](t) {
			d[i] = strconv.FormatInt(x, 10)
		}
		return out, nil
	}
	for i, x := range t.Float64s() {
		d[i] = formatNumber(x, t.DType)
	}
	return out, nil
}

// equalStrings is Equal of two string tensors with broadcasting.
func equalStrings(c *Call, a, b *Tensor) (*Tensor, error) {
	shape, err := broadcastShape(a.Shape, b.Shape)
	if err != nil {
		return nil, err
	}
	out := c.alloc(graph.Bool, shape...)
	d, x, y := Data[bool](out), Data[string](a), Data[string](b)
	newBcast(shape, a.Shape, b.Shape).each(func(o int, offs, inc []int, n int) {
		for i := range n {
			d[o+i] = x[offs[0]+inc[0]*i] == y[offs[1]+inc[1]*i]
		}
	})
	return out, nil
}
