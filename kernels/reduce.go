package kernels

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
)

type redOp int

const (
	redSum redOp = iota
	redMean
	redMax
	redMin
	redProd
	redSumSquare
	redL1
	redL2
	redLogSum
	redLogSumExp
)

// reduceRows reduces each of the len(dst) contiguous rows of length r.
// No rows (an empty kept axis) is an empty result; rows of length 0 (an
// empty reduced axis) reduce to the operation's identity.
func reduceRows[T Num](op redOp, dst, src []T, r int, acc64 bool) {
	if len(dst) == 0 {
		return
	}
	if r == 0 {
		var v float64
		switch op {
		case redProd:
			v = 1
		case redMax:
			v = math.Inf(-1)
		case redMin:
			v = math.Inf(1)
		case redLogSum, redLogSumExp:
			v = math.Inf(-1)
		case redMean:
			// ONNX leaves the mean of nothing undefined; ONNX Runtime
			// gives 0 (numpy NaN): onnxpe follows the runtime.
			v = 0
		}
		for i := range dst {
			dst[i] = fromF64[T](v)
		}
		return
	}
	_ = src[len(dst)*r-1]
	isFloat := false
	switch any(dst).(type) {
	case []float32, []float64:
		isFloat = true
	}
	for i := range dst {
		row := src[i*r : i*r+r]
		switch op {
		case redMax:
			m := row[0]
			for _, v := range row[1:] {
				if v > m || v != v {
					m = v
				}
			}
			dst[i] = m
		case redMin:
			m := row[0]
			for _, v := range row[1:] {
				if v < m || v != v {
					m = v
				}
			}
			dst[i] = m
		case redProd:
			p := T(1)
			for _, v := range row {
				p *= v
			}
			dst[i] = p
		case redLogSumExp:
			m := float64(row[0])
			for _, v := range row {
				m = math.Max(m, float64(v))
			}
			s := 0.0
			for _, v := range row {
				s += math.Exp(float64(v) - m)
			}
			if math.IsInf(m, 0) {
				dst[i] = T(m)
			} else {
				dst[i] = T(m + math.Log(s))
			}
		default:
			if isFloat && (acc64 || op == redL2 || op == redLogSum) {
				s := 0.0
				for _, v := range row {
					x := float64(v)
					switch op {
					case redSumSquare, redL2:
						x *= x
					case redL1:
						x = math.Abs(x)
					}
					s += x
				}
				switch op {
				case redMean:
					s /= float64(r)
				case redL2:
					s = math.Sqrt(s)
				case redLogSum:
					s = math.Log(s)
				}
				dst[i] = T(s)
				continue
			}
			var s T
			for _, v := range row {
				switch op {
				case redSumSquare:
					v *= v
				case redL1:
					if v < 0 {
						v = -v
					}
				}
				s += v
			}
			if op == redMean {
				s /= T(r)
			}
			dst[i] = s
		}
	}
}

// fromF64 converts the identity v of an empty reduction to T: for
// integers, -Inf is T's lowest value (ReduceMax of nothing) and +Inf its
// highest (ReduceMin), as the ONNX spec says.
func fromF64[T Num](v float64) T {
	var lo, hi T
	switch any(lo).(type) {
	case float32, float64:
		return T(v)
	case int64:
		lo, hi = T(any(int64(math.MinInt64)).(int64)), T(any(int64(math.MaxInt64)).(int64))
	case int32:
		lo, hi = T(any(int32(math.MinInt32)).(int32)), T(any(int32(math.MaxInt32)).(int32))
	case int8:
		lo, hi = T(any(int8(math.MinInt8)).(int8)), T(any(int8(math.MaxInt8)).(int8))
	case uint8:
		lo, hi = 0, T(any(uint8(math.MaxUint8)).(uint8))
	}
	switch {
	case math.IsNaN(v):
		return 0
	case math.IsInf(v, -1):
		return lo
	case math.IsInf(v, 1):
		return hi
	}
	return T(v)
}

// reduceAxes moves the reduced axes last (copying only if needed) and
// reduces rows.
func reduceT[T Num](c *Call, op redOp, x *Tensor, axes []int, keep bool) *Tensor {
	r := len(x.Shape)
	var kept, red []int
	for i := range r {
		if slices.Contains(axes, i) {
			red = append(red, i)
		} else {
			kept = append(kept, i)
		}
	}
	xt := transposeC(c, x, slices.Concat(kept, red))
	rows := 1
	for _, a := range kept {
		rows *= x.Shape[a]
	}
	rl := 1
	for _, a := range red {
		rl *= x.Shape[a]
	}
	out := c.alloc(x.DType, reducedShape(x.Shape, axes, keep)...)
	reduceRows(op, Data[T](out), Data[T](xt), rl, c.Acc64())
	return out
}

// reducedShape is the shape of a reduction of shape over axes.
func reducedShape(shape, axes []int, keep bool) []int {
	var out []int
	for i, d := range shape {
		if slices.Contains(axes, i) {
			if keep {
				out = append(out, 1)
			}
		} else {
			out = append(out, d)
		}
	}
	return out
}

func reduceKernel(op redOp, axesInputSince int64) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		x := in[0]
		var axes []int64
		if c.Opset >= axesInputSince {
			axes = intsInput(in, 1)
		} else {
			axes = c.Ints("axes")
		}
		keep := c.Int("keepdims", 1) == 1
		var ax []int
		if len(axes) == 0 {
			if c.Int("noop_with_empty_axes", 0) == 1 {
				return []*Tensor{x}, nil
			}
			for i := range x.Shape {
				ax = append(ax, i)
			}
		} else {
			var err error
			if ax, err = normAxes(axes, len(x.Shape)); err != nil {
				return nil, err
			}
		}
		var o *Tensor
		switch x.DType {
		case graph.Float:
			o = reduceT[float32](c, op, x, ax, keep)
		case graph.Double:
			o = reduceT[float64](c, op, x, ax, keep)
		case graph.Int64:
			o = reduceT[int64](c, op, x, ax, keep)
		case graph.Int32:
			o = reduceT[int32](c, op, x, ax, keep)
		case graph.Int8:
			o = reduceT[int8](c, op, x, ax, keep)
		case graph.Uint8:
			o = reduceT[uint8](c, op, x, ax, keep)
		case graph.Int16:
			o = reduceT[int16](c, op, x, ax, keep)
		case graph.Uint16:
			o = reduceT[uint16](c, op, x, ax, keep)
		case graph.Uint32:
			o = reduceT[uint32](c, op, x, ax, keep)
		case graph.Uint64:
			o = reduceT[uint64](c, op, x, ax, keep)
		case graph.Bool:
			// ReduceMax and ReduceMin take bool from opset 20: any and
			// all, computed on 0/1 bytes (the empty reduction gives
			// false for Max and true for Min, the type's bounds).
			if op != redMax && op != redMin {
				return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
			}
			b := Data[bool](x)
			u := c.alloc(graph.Uint8, x.Shape...)
			ud := Data[uint8](u)
			for i, v := range b {
				ud[i] = 0
				if v {
					ud[i] = 1
				}
			}
			r := Data[uint8](reduceT[uint8](c, op, u, ax, keep))
			o = c.alloc(graph.Bool, reducedShape(x.Shape, ax, keep)...)
			od := Data[bool](o)
			for i, v := range r {
				od[i] = v != 0
			}
		default:
			return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
		}
		return []*Tensor{o}, nil
	}
}

func init() {
	for _, r := range []struct {
		name string
		op   redOp
	}{{"ReduceMean", redMean}, {"ReduceMax", redMax}, {"ReduceMin", redMin}, {"ReduceProd", redProd},
		{"ReduceSumSquare", redSumSquare}, {"ReduceL1", redL1}, {"ReduceL2", redL2},
		{"ReduceLogSum", redLogSum}, {"ReduceLogSumExp", redLogSumExp}} {
		reg(r.name, 1, 0, reduceKernel(r.op, 18))
	}
	reg("ReduceSum", 1, 0, reduceKernel(redSum, 13))
}
