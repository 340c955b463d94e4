package kernels

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

type binOp int

const (
	opAdd binOp = iota
	opSub
	opMul
	opDiv
	opPow
	opMod  // integer modulo with the divisor's sign (Python)
	opFmod // truncated remainder (C fmod)
	opMax
	opMin
)

// binRun computes one broadcast run: d[i] = a[ia*i] op b[ib*i].
func binRun[T Num](op binOp, d, a, b []T, ia, ib int) {
	n := len(d)
	if n == 0 {
		return
	}
	_ = a[ia*(n-1)]
	_ = b[ib*(n-1)]
	if d32, ok := any(d).([]float32); ok && binVec32(op, d32, any(a).([]float32), any(b).([]float32), ia, ib) {
		return
	}
	switch op {
	case opAdd:
		if ia == 1 && ib == 1 {
			a, b := a[:n], b[:n]
			for i := range d {
				d[i] = a[i] + b[i]
			}
			return
		}
		if ia == 1 && ib == 0 {
			a, y := a[:n], b[0]
			for i := range d {
				d[i] = a[i] + y
			}
			return
		}
		for i := range d {
			d[i] = a[ia*i] + b[ib*i]
		}
	case opSub:
		for i := range d {
			d[i] = a[ia*i] - b[ib*i]
		}
	case opMul:
		if ia == 1 && ib == 1 {
			a, b := a[:n], b[:n]
			for i := range d {
				d[i] = a[i] * b[i]
			}
			return
		}
		if ia == 1 && ib == 0 {
			a, y := a[:n], b[0]
			for i := range d {
				d[i] = a[i] * y
			}
			return
		}
		for i := range d {
			d[i] = a[ia*i] * b[ib*i]
		}
	case opDiv:
		for i := range d {
			d[i] = a[ia*i] / b[ib*i]
		}
	case opPow:
		for i := range d {
			d[i] = powT(a[ia*i], b[ib*i])
		}
	case opMod:
		for i := range d {
			d[i] = modT(a[ia*i], b[ib*i])
		}
	case opFmod:
		for i := range d {
			d[i] = fmodT(a[ia*i], b[ib*i])
		}
	case opMax:
		for i := range d {
			x, y := a[ia*i], b[ib*i]
			if x != x || x > y {
				d[i] = x
			} else {
				d[i] = y
			}
		}
	case opMin:
		for i := range d {
			x, y := a[ia*i], b[ib*i]
			if x != x || x < y {
				d[i] = x
			} else {
				d[i] = y
			}
		}
	}
}

func powT[T Num](x, y T) T {
	switch any(x).(type) {
	case float32, float64:
		return T(math.Pow(float64(x), float64(y)))
	}
	// integer power by squaring; negative exponents give 0 (or ±1)
	if y < 0 {
		switch {
		case x == 1:
			return 1
		case float64(x) == -1:
			if int64(y)%2 == 0 {
				return 1
			}
			return x
		}
		return 0
	}
	r := T(1)
	for e := int64(y); e > 0; e >>= 1 {
		if e&1 == 1 {
			r *= x
		}
		x *= x
	}
	return r
}

func modT[T Num](x, y T) T {
	switch any(x).(type) {
	case float32, float64:
		m := math.Mod(float64(x), float64(y))
		if m != 0 && (m < 0) != (float64(y) < 0) {
			m += float64(y)
		}
		return T(m)
	}
	m := intRem(x, y)
	if m != 0 && (m < 0) != (y < 0) {
		m += y
	}
	return m
}

func fmodT[T Num](x, y T) T {
	switch any(x).(type) {
	case float32, float64:
		return T(math.Mod(float64(x), float64(y)))
	}
	return intRem(x, y)
}

func intRem[T Num](x, y T) T {
	switch v := any(x).(type) {
	case int64:
		return T(v % any(y).(int64))
	case int32:
		return T(v % any(y).(int32))
	case int8:
		return T(v % any(y).(int8))
	case uint8:
		return T(v % any(y).(uint8))
	case int16:
		return T(v % any(y).(int16))
	case uint16:
		return T(v % any(y).(uint16))
	case uint32:
		return T(v % any(y).(uint32))
	case uint64:
		return T(v % any(y).(uint64))
	}
	panic("kernels: intRem of a float")
}

// hasZero reports whether an element of x is zero.
func hasZero[T Num](x []T) bool {
	for _, v := range x {
		if v == 0 {
			return true
		}
	}
	return false
}

// binaryT applies op with broadcasting.
func binaryT[T Num](c *Call, op binOp, a, b *Tensor) (*Tensor, error) {
	switch any(*new(T)).(type) {
	case float32, float64:
	default:
		// Go panics on an integer division by zero; ONNX leaves it
		// undefined: the node fails.
		if (op == opDiv || op == opMod || op == opFmod) && hasZero(Data[T](b)) {
			return nil, fmt.Errorf("integer division by zero (a divisor of %v is 0)", b)
		}
	}
	var sbuf [bcastRank]int
	var shape []int
	if r := max(len(a.Shape), len(b.Shape)); r <= bcastRank {
		shape = sbuf[:r]
	} else {
		shape = make([]int, r)
	}
	if err := broadcastInto(shape, a.Shape, b.Shape); err != nil {
		return nil, err
	}
	out := c.allocOver(a.DType, shape, a, b)
	d, x, y := Data[T](out), Data[T](a), Data[T](b)
	n := len(d)
	cost := 1
	if op == opPow || op == opMod || op == opFmod {
		cost = unaryCost
	}
	if op == opPow && len(y) == 1 && equalShape(shape, a.Shape) {
		if powScalar(c, d, x, float64(y[0])) {
			return out, nil
		}
	}
	same := equalShape(a.Shape, b.Shape)
	if serial(c, n, n*cost) {
		switch {
		case same:
			binRun(op, d, x, y, 1, 1)
		case len(y) == 1 && len(x) == n:
			binRun(op, d, x, y, 1, 0)
		case len(x) == 1 && len(y) == n:
			binRun(op, d, x, y, 0, 1)
		case len(x) == n && isRowOf(b.Shape, shape):
			for r := 0; r < n; r += len(y) {
				binRun(op, d[r:r+len(y)], x[r:], y, 1, 1)
			}
		case len(y) == n && isRowOf(a.Shape, shape):
			for r := 0; r < n; r += len(x) {
				binRun(op, d[r:r+len(x)], x, y[r:], 1, 1)
			}
		default:
			var bc bcast
			bc.init(shape, a.Shape, b.Shape)
			bc.each(func(o int, offs, inc []int, n int) {
				binRun(op, d[o:o+n], x[offs[0]:], y[offs[1]:], inc[0], inc[1])
			})
		}
		return out, nil
	}
	if same {
		parallelFor(c, n, n*cost, func(lo, hi int) { binRun(op, d[lo:hi], x[lo:hi], y[lo:hi], 1, 1) })
		return out, nil
	}
	bc := newBcast(shape, a.Shape, b.Shape)
	parallelFor(c, bc.runs(), n*cost, func(r0, r1 int) {
		bc.eachRange(r0, r1, func(o int, offs, inc []int, n int) {
			binRun(op, d[o:o+n], x[offs[0]:], y[offs[1]:], inc[0], inc[1])
		})
	})
	return out, nil
}

// isRowOf reports whether an operand of shape s, broadcast to out, repeats
// one contiguous block of out's trailing elements (a bias row): s without
// its leading 1s is a non-empty suffix of out.
func isRowOf(s, out []int) bool {
	for len(s) > 0 && s[0] == 1 {
		s = s[1:]
	}
	return len(s) > 0 && len(s) <= len(out) && equalShape(s, out[len(out)-len(s):]) && shapeSize(s) > 0
}

// powScalar computes d = x^e for the exponents exporters write (1, 2,
// 3) without math.Pow; it reports false for other exponents and
// integer types.
func powScalar[T Num](c *Call, d, x []T, e float64) bool {
	switch any(x).(type) {
	case []float32, []float64:
	default:
		return false
	}
	var f func(lo, hi int)
	switch e {
	case 1:
		f = func(lo, hi int) { copy(d[lo:hi], x[lo:hi]) }
	case 2:
		f = func(lo, hi int) {
			for i := lo; i < hi; i++ {
				d[i] = x[i] * x[i]
			}
		}
	case 3:
		// x² is exact in float64 for float32 x: one rounding to float64,
		// one to T, as math.Pow's result is rounded.
		f = func(lo, hi int) {
			for i := lo; i < hi; i++ {
				v := float64(x[i])
				d[i] = T(v * v * v)
			}
		}
	default:
		return false
	}
	parallelFor(c, len(d), len(d), f)
	return true
}

// c (nil outside a run) allocates the output and sets the threads.
func binary(c *Call, op binOp, a, b *Tensor) (*Tensor, error) {
	if a.DType != b.DType {
		return nil, fmt.Errorf("element types differ: %v and %v", a.DType, b.DType)
	}
	switch a.DType {
	case graph.Float:
		return binaryT[float32](c, op, a, b)
	case graph.Double:
		return binaryT[float64](c, op, a, b)
	case graph.Int64:
		return binaryT[int64](c, op, a, b)
	case graph.Int32:
		return binaryT[int32](c, op, a, b)
	case graph.Int8:
		return binaryT[int8](c, op, a, b)
	case graph.Uint8:
		return binaryT[uint8](c, op, a, b)
	case graph.Int16:
		return binaryT[int16](c, op, a, b)
	case graph.Uint16:
		return binaryT[uint16](c, op, a, b)
	case graph.Uint32:
		return binaryT[uint32](c, op, a, b)
	case graph.Uint64:
		return binaryT[uint64](c, op, a, b)
	}
	return nil, fmt.Errorf("%v: %w", a.DType, ErrUnsupportedType)
}

func binKernel(op binOp) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		o, err := binary(c, op, in[0], in[1])
		return []*Tensor{o}, err
	}
}

// variadic folds op over all inputs (Max, Min, Sum, Mean).
func variadic(op binOp, mean bool) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		if len(in) == 0 {
			return nil, fmt.Errorf("no inputs")
		}
		acc := in[0]
		for _, t := range in[1:] {
			var err error
			if acc, err = binary(c, op, acc, t); err != nil {
				return nil, err
			}
		}
		if len(in) == 1 {
			acc = c.clone(acc)
		}
		if mean {
			n := castC(c, Scalar(float64(len(in))), acc.DType)
			var err error
			if acc, err = binary(c, opDiv, acc, n); err != nil {
				return nil, err
			}
		}
		return []*Tensor{acc}, nil
	}
}

type cmpOp int

const (
	cmpEq cmpOp = iota
	cmpLt
	cmpLe
	cmpGt
	cmpGe
)

func cmpRun[T Num](op cmpOp, d []bool, a, b []T, ia, ib int) {
	switch op {
	case cmpEq:
		for i := range d {
			d[i] = a[ia*i] == b[ib*i]
		}
	case cmpLt:
		for i := range d {
			d[i] = a[ia*i] < b[ib*i]
		}
	case cmpLe:
		for i := range d {
			d[i] = a[ia*i] <= b[ib*i]
		}
	case cmpGt:
		for i := range d {
			d[i] = a[ia*i] > b[ib*i]
		}
	case cmpGe:
		for i := range d {
			d[i] = a[ia*i] >= b[ib*i]
		}
	}
}

func compareT[T Num](c *Call, op cmpOp, a, b *Tensor) (*Tensor, error) {
	shape, err := broadcastShape(a.Shape, b.Shape)
	if err != nil {
		return nil, err
	}
	out := c.alloc(graph.Bool, shape...)
	d, x, y := Data[bool](out), Data[T](a), Data[T](b)
	newBcast(shape, a.Shape, b.Shape).each(func(o int, offs, inc []int, n int) {
		cmpRun(op, d[o:o+n], x[offs[0]:], y[offs[1]:], inc[0], inc[1])
	})
	return out, nil
}

func cmpKernel(op cmpOp) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		a, b := in[0], in[1]
		if a.DType != b.DType {
			return nil, fmt.Errorf("element types differ: %v and %v", a.DType, b.DType)
		}
		if a.DType == graph.Bool {
			a, b = castC(c, a, graph.Uint8), castC(c, b, graph.Uint8)
		}
		if a.DType == graph.String && op == cmpEq {
			o, err := equalStrings(c, a, b)
			return []*Tensor{o}, err
		}
		var o *Tensor
		var err error
		switch a.DType {
		case graph.Float:
			o, err = compareT[float32](c, op, a, b)
		case graph.Double:
			o, err = compareT[float64](c, op, a, b)
		case graph.Int64:
			o, err = compareT[int64](c, op, a, b)
		case graph.Int32:
			o, err = compareT[int32](c, op, a, b)
		case graph.Int8:
			o, err = compareT[int8](c, op, a, b)
		case graph.Uint8:
			o, err = compareT[uint8](c, op, a, b)
		case graph.Int16:
			o, err = compareT[int16](c, op, a, b)
		case graph.Uint16:
			o, err = compareT[uint16](c, op, a, b)
		case graph.Uint32:
			o, err = compareT[uint32](c, op, a, b)
		case graph.Uint64:
			o, err = compareT[uint64](c, op, a, b)
		default:
			return nil, fmt.Errorf("%v: %w", a.DType, ErrUnsupportedType)
		}
		return []*Tensor{o}, err
	}
}

func logicKernel(f func(a, b bool) bool) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		a, b := in[0], in[1]
		if a.DType != graph.Bool || b.DType != graph.Bool {
			return nil, fmt.Errorf("logical ops need bool inputs: %w", ErrUnsupportedType)
		}
		shape, err := broadcastShape(a.Shape, b.Shape)
		if err != nil {
			return nil, err
		}
		out := c.alloc(graph.Bool, shape...)
		d, x, y := Data[bool](out), Data[bool](a), Data[bool](b)
		newBcast(shape, a.Shape, b.Shape).each(func(o int, offs, inc []int, n int) {
			for i := range n {
				d[o+i] = f(x[offs[0]+inc[0]*i], y[offs[1]+inc[1]*i])
			}
		})
		return []*Tensor{out}, nil
	}
}

func whereT[T Elem](c *Call, cond, a, b *Tensor) (*Tensor, error) {
	shape, err := broadcastShape(cond.Shape, a.Shape, b.Shape)
	if err != nil {
		return nil, err
	}
	out := c.alloc(a.DType, shape...)
	d, cd, x, y := Data[T](out), Data[bool](cond), Data[T](a), Data[T](b)
	newBcast(shape, cond.Shape, a.Shape, b.Shape).each(func(o int, offs, inc []int, n int) {
		c, xi, yi := offs[0], offs[1], offs[2]
		for i := range n {
			if cd[c] {
				d[o+i] = x[xi]
			} else {
				d[o+i] = y[yi]
			}
			c += inc[0]
			xi += inc[1]
			yi += inc[2]
		}
	})
	return out, nil
}

func whereKernel(c *Call, in []*Tensor) ([]*Tensor, error) {
	cond, a, b := in[0], in[1], in[2]
	if cond.DType != graph.Bool || a.DType != b.DType {
		return nil, fmt.Errorf("Where needs a bool condition and equal value types")
	}
	var o *Tensor
	var err error
	switch a.DType {
	case graph.Float:
		o, err = whereT[float32](c, cond, a, b)
	case graph.Double:
		o, err = whereT[float64](c, cond, a, b)
	case graph.Int64:
		o, err = whereT[int64](c, cond, a, b)
	case graph.Int32:
		o, err = whereT[int32](c, cond, a, b)
	case graph.Int8:
		o, err = whereT[int8](c, cond, a, b)
	case graph.Uint8:
		o, err = whereT[uint8](c, cond, a, b)
	case graph.Int16:
		o, err = whereT[int16](c, cond, a, b)
	case graph.Uint16:
		o, err = whereT[uint16](c, cond, a, b)
	case graph.Uint32:
		o, err = whereT[uint32](c, cond, a, b)
	case graph.Uint64:
		o, err = whereT[uint64](c, cond, a, b)
	case graph.Bool:
		o, err = whereT[bool](c, cond, a, b)
	default:
		return nil, fmt.Errorf("%v: %w", a.DType, ErrUnsupportedType)
	}
	return []*Tensor{o}, err
}

// legacyBroadcast gives a binary op its form before opset 7 (Pow, Equal,
// Less, Greater, And, Or, Xor: before opset 7; Add, Sub, Mul, Div as well):
// without broadcast=1 both inputs have the same shape; with it, B's
// dimensions line up with A's from axis on (by default, A's last ones),
// which is numpy broadcasting once B is padded with 1s on both sides.
// consumed_inputs (opsets 1 to 5) is an optimisation hint and is ignored.
// From opset 7 on the kernel sees its inputs unchanged.
func legacyBroadcast(k Kernel) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		if c.Opset >= 7 || len(in) != 2 || in[0] == nil || in[1] == nil {
			return k(c, in)
		}
		a, b := in[0], in[1]
		if c.Int("broadcast", 0) == 0 {
			if !equalShape(a.Shape, b.Shape) {
				return nil, fmt.Errorf("shapes %v and %v differ and broadcast is 0 (opset %d)", a.Shape, b.Shape, c.Opset)
			}
			return k(c, in)
		}
		axis := int64(len(a.Shape) - len(b.Shape))
		if c.Attr("axis") != nil {
			axis = c.Int("axis", 0)
			if axis < 0 {
				axis += int64(len(a.Shape))
			}
		}
		if axis < 0 || axis > int64(len(a.Shape)) || int(axis)+len(b.Shape) > len(a.Shape) {
			return nil, fmt.Errorf("broadcast of %v onto %v at axis %d (opset %d): B does not fit", b.Shape, a.Shape, axis, c.Opset)
		}
		shape := make([]int, len(a.Shape))
		for i := range shape {
			shape[i] = 1
			if j := i - int(axis); j >= 0 && j < len(b.Shape) {
				if b.Shape[j] != a.Shape[i] && b.Shape[j] != 1 {
					return nil, fmt.Errorf("broadcast of %v onto %v at axis %d (opset %d): dimension %d is %d, not %d or 1", b.Shape, a.Shape, axis, c.Opset, j, b.Shape[j], a.Shape[i])
				}
				shape[i] = b.Shape[j]
			}
		}
		return k(c, []*Tensor{a, b.Reshaped(shape...)})
	}
}

// sameShapes gives a variadic op (Max, Min, Sum, Mean) its form before
// opset 8: every input has the same shape.
func sameShapes(k Kernel) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		if c.Opset < 8 {
			for _, t := range in[1:] {
				if t != nil && in[0] != nil && !equalShape(t.Shape, in[0].Shape) {
					return nil, fmt.Errorf("shapes %v and %v differ (no broadcasting before opset 8)", in[0].Shape, t.Shape)
				}
			}
		}
		return k(c, in)
	}
}

func init() {
	for _, r := range []struct {
		name string
		op   binOp
	}{{"Add", opAdd}, {"Sub", opSub}, {"Mul", opMul}, {"Div", opDiv}} {
		reg(r.name, 1, 0, legacyBroadcast(binKernel(r.op)))
	}
	reg("Pow", 1, 0, legacyBroadcast(func(c *Call, in []*Tensor) ([]*Tensor, error) {
		e := in[1]
		if e.DType != in[0].DType {
			e = castC(c, e, in[0].DType)
		}
		o, err := binary(c, opPow, in[0], e)
		return []*Tensor{o}, err
	}))
	reg("Mod", 10, 0, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		op := opMod
		if c.Int("fmod", 0) == 1 {
			op = opFmod
		} else if isFloatType(in[0].DType) {
			return nil, fmt.Errorf("fmod must be 1 for floating-point inputs")
		}
		o, err := binary(c, op, in[0], in[1])
		return []*Tensor{o}, err
	})
	reg("Max", 1, 0, sameShapes(variadic(opMax, false)))
	reg("Min", 1, 0, sameShapes(variadic(opMin, false)))
	reg("Sum", 1, 0, sameShapes(variadic(opAdd, false)))
	reg("Mean", 1, 0, sameShapes(variadic(opAdd, true)))
	reg("Equal", 1, 0, legacyBroadcast(cmpKernel(cmpEq)))
	reg("Less", 1, 0, legacyBroadcast(cmpKernel(cmpLt)))
	reg("LessOrEqual", 12, 0, cmpKernel(cmpLe))
	reg("Greater", 1, 0, legacyBroadcast(cmpKernel(cmpGt)))
	reg("GreaterOrEqual", 12, 0, cmpKernel(cmpGe))
	reg("And", 1, 0, legacyBroadcast(logicKernel(func(a, b bool) bool { return a && b })))
	reg("Or", 1, 0, legacyBroadcast(logicKernel(func(a, b bool) bool { return a || b })))
	reg("Xor", 1, 0, legacyBroadcast(logicKernel(func(a, b bool) bool { return a != b })))
	reg("Where", 9, 0, whereKernel)
}
