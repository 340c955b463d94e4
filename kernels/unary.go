package kernels

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

// floatUnary applies f (computed in float64) to a float tensor.
func floatUnary(f func(float64) float64) Kernel { return floatUnary32(nil, f) }

// unaryCost is the weight of one element of a unary op in parallelFor's
// work count (a transcendental function costs tens of additions).
const unaryCost = 8

// floatUnary32 applies f32 to the elements of a float32 tensor (f computed
// in float64 when f32 is nil) and f to a float64 tensor, over c's threads
// when the tensor is large.
func floatUnary32(f32 func(d, s []float32), f func(float64) float64) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		x := in[0]
		n := x.Len()
		switch x.DType {
		case graph.Float:
			out := c.alloc(x.DType, x.Shape...)
			d, s := Data[float32](out), Data[float32](x)
			parallelFor(c, n, n*unaryCost, func(lo, hi int) {
				if f32 != nil {
					f32(d[lo:hi], s[lo:hi])
					return
				}
				if c != nil && c.half != 0 {
					// Rounded to float16/bfloat16 next: round once.
					for i := lo; i < hi; i++ {
						d[i] = roundTo32For16(f(widen(s[i])))
					}
					return
				}
				for i := lo; i < hi; i++ {
					d[i] = float32(f(widen(s[i])))
				}
			})
			return []*Tensor{out}, nil
		case graph.Double:
			out := c.alloc(x.DType, x.Shape...)
			d, s := Data[float64](out), Data[float64](x)
			parallelFor(c, n, n*unaryCost, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					d[i] = f(s[i])
				}
			})
			return []*Tensor{out}, nil
		}
		return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
	}
}

func numUnaryT[T Num](c *Call, x *Tensor, f func(T) T) *Tensor {
	out := c.alloc(x.DType, x.Shape...)
	d, s := Data[T](out), Data[T](x)
	parallelFor(c, len(s), len(s), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d[i] = f(s[i])
		}
	})
	return out
}

// numUnary applies a generic function to any numeric tensor: fs holds
// its instances (func(T) T) for the types the op takes.
func numUnary(fs ...any) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		x := in[0]
		for _, f := range fs {
			var o *Tensor
			switch f := f.(type) {
			case func(float32) float32:
				if x.DType == graph.Float {
					o = numUnaryT(c, x, f)
				}
			case func(float64) float64:
				if x.DType == graph.Double {
					o = numUnaryT(c, x, f)
				}
			case func(int64) int64:
				if x.DType == graph.Int64 {
					o = numUnaryT(c, x, f)
				}
			case func(int32) int32:
				if x.DType == graph.Int32 {
					o = numUnaryT(c, x, f)
				}
			case func(int16) int16:
				if x.DType == graph.Int16 {
					o = numUnaryT(c, x, f)
				}
			case func(int8) int8:
				if x.DType == graph.Int8 {
					o = numUnaryT(c, x, f)
				}
			case func(uint64) uint64:
				if x.DType == graph.Uint64 {
					o = numUnaryT(c, x, f)
				}
			case func(uint32) uint32:
				if x.DType == graph.Uint32 {
					o = numUnaryT(c, x, f)
				}
			case func(uint16) uint16:
				if x.DType == graph.Uint16 {
					o = numUnaryT(c, x, f)
				}
			case func(uint8) uint8:
				if x.DType == graph.Uint8 {
					o = numUnaryT(c, x, f)
				}
			}
			if o != nil {
				return []*Tensor{o}, nil
			}
		}
		return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
	}
}

func absT[T Num](v T) T {
	if v < 0 {
		return -v
	}
	return v
}

func negT[T Num](v T) T { return -v }

func signT[T Num](v T) T {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return T(0) - 1
	}
	return v // 0 or NaN
}

func reluT[T Num](v T) T {
	if v < 0 {
		return 0
	}
	return v
}

// reluSlice sets d[i] = reluT(s[i]) (AVX-512 where available).
func reluSlice(d, s []float32) {
	if reluVec32(d, s) {
		return
	}
	d = d[:len(s)]
	for i, v := range s {
		d[i] = reluT(v)
	}
}

func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

// geluErf is x·Φ(x), written with erfc so that negative x do not lose
// their digits to the cancellation in 1 + erf(x/√2).
func geluErf(x float64) float64 { return 0.5 * x * math.Erfc(-x/math.Sqrt2) }

func geluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func predicate(f func(float64) bool) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		x := in[0]
		out := c.alloc(graph.Bool, x.Shape...)
		d := Data[bool](out)
		switch x.DType {
		case graph.Float:
			for i, v := range Data[float32](x) {
				d[i] = f(float64(v))
			}
		case graph.Double:
			for i, v := range Data[float64](x) {
				d[i] = f(v)
			}
		default:
			if !smallFloat(x.DType) {
				return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
			}
			for i, v := range x.Float64s() {
				d[i] = f(v)
			}
		}
		return []*Tensor{out}, nil
	}
}

func identity(c *Call, in []*Tensor) ([]*Tensor, error) { return []*Tensor{in[0]}, nil }

func init() {
	floats := map[string]func(float64) float64{
		"Ceil": math.Ceil, "Floor": math.Floor, "Sqrt": math.Sqrt, "Exp": math.Exp, "Log": math.Log,
		"Sin": math.Sin, "Cos": math.Cos, "Tan": math.Tan, "Tanh": math.Tanh, "Erf": math.Erf,
		"Asin": math.Asin, "Acos": math.Acos, "Atan": math.Atan, "Sinh": math.Sinh, "Cosh": math.Cosh,
		"Asinh": math.Asinh, "Acosh": math.Acosh, "Atanh": math.Atanh,
		"Sigmoid": sigmoid, "Reciprocal": func(x float64) float64 { return 1 / x },
		"Round":    math.RoundToEven,
		"Softplus": func(x float64) float64 { return math.Log1p(math.Exp(-math.Abs(x))) + math.Max(x, 0) },
		"Softsign": func(x float64) float64 { return x / (1 + math.Abs(x)) },
	}
	fast := map[string]func(d, s []float32){
		"Exp": expSlice, "Tanh": tanhSlice, "Sigmoid": sigmoidSlice, "Erf": erfSlice,
	}
	for name, f := range floats {
		reg(name, 1, 0, floatUnary32(fast[name], f))
	}
	reg("Abs", 6, 0, numUnary(absT[float32], absT[float64], absT[int64], absT[int32], absT[int8], absT[uint8], absT[int16], absT[uint16], absT[uint32], absT[uint64]))
	reg("Neg", 6, 0, numUnary(negT[float32], negT[float64], negT[int64], negT[int32], negT[int8], negT[int16]))
	reg("Sign", 9, 0, numUnary(signT[float32], signT[float64], signT[int64], signT[int32], signT[int8], signT[uint8], signT[int16], signT[uint16], signT[uint32], signT[uint64]))
	relu := numUnary(reluT[float32], reluT[float64], reluT[int64], reluT[int32], reluT[int8], reluT[int16])
	reg("Relu", 6, 0, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		x := in[0]
		if x.DType != graph.Float {
			return relu(c, in)
		}
		out := c.alloc(x.DType, x.Shape...)
		d, s := Data[float32](out), Data[float32](x)
		parallelFor(c, len(s), len(s), func(lo, hi int) { reluSlice(d[lo:hi], s[lo:hi]) })
		return []*Tensor{out}, nil
	})
	Register("", "Identity", 1, 0, identity, Native)
	reg("IsNaN", 9, 0, predicate(math.IsNaN))
	reg("IsInf", 10, 0, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		pos, neg := c.Int("detect_positive", 1) == 1, c.Int("detect_negative", 1) == 1
		return predicate(func(x float64) bool { return pos && math.IsInf(x, 1) || neg && math.IsInf(x, -1) })(c, in)
	})
	reg("Not", 1, 0, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		if in[0].DType != graph.Bool {
			return nil, fmt.Errorf("Not needs bool: %w", ErrUnsupportedType)
		}
		out := c.alloc(graph.Bool, in[0].Shape...)
		d := Data[bool](out)
		for i, v := range Data[bool](in[0]) {
			d[i] = !v
		}
		return []*Tensor{out}, nil
	})
	reg("Gelu", 20, 0, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		switch a := c.String("approximate", "none"); a {
		case "none":
			return floatUnary32(geluErfSlice, geluErf)(c, in)
		case "tanh":
			return floatUnary32(geluTanhSlice, geluTanh)(c, in)
		default:
			return nil, fmt.Errorf("approximate=%q", a)
		}
	})
	attrUnary := func(name string, since int64, f func(c *Call) func(float64) float64) {
		reg(name, since, 0, func(c *Call, in []*Tensor) ([]*Tensor, error) { return floatUnary(f(c))(c, in) })
	}
	attrUnary("LeakyRelu", 6, func(c *Call) func(float64) float64 {
		a := float64(c.Float("alpha", 0.01))
		return func(x float64) float64 {
			if x < 0 {
				return a * x
			}
			return x
		}
	})
	attrUnary("Elu", 6, func(c *Call) func(float64) float64 {
		a := float64(c.Float("alpha", 1))
		return func(x float64) float64 {
			if x < 0 {
				return a * math.Expm1(x)
			}
			return x
		}
	})
	attrUnary("Selu", 6, func(c *Call) func(float64) float64 {
		a, g := float64(c.Float("alpha", 1.67326319217681884765625)), float64(c.Float("gamma", 1.05070102214813232421875))
		return func(x float64) float64 {
			if x <= 0 {
				return g * a * math.Expm1(x)
			}
			return g * x
		}
	})
	attrUnary("HardSigmoid", 6, func(c *Call) func(float64) float64 {
		a, b := float64(c.Float("alpha", 0.2)), float64(c.Float("beta", 0.5))
		return func(x float64) float64 { return math.Max(0, math.Min(1, a*x+b)) }
	})
	attrUnary("HardSwish", 14, func(c *Call) func(float64) float64 {
		return func(x float64) float64 { return x * math.Max(0, math.Min(1, x/6+0.5)) }
	})
	attrUnary("ThresholdedRelu", 10, func(c *Call) func(float64) float64 {
		a := float64(c.Float("alpha", 1))
		return func(x float64) float64 {
			if x > a {
				return x
			}
			return 0
		}
	})
}
