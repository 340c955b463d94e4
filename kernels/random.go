package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/onnxpe/onnxpe/graph"
)

// The random ops (RandomUniform, RandomNormal and their Like forms,
// Bernoulli) and Dropout in training mode. ONNX leaves the generator to
// the runtime; this package draws from MT19937 exactly as numpy's
// RandomState does (the generator of ONNX's reference), so a node with a
// seed attribute gives the values ONNX's reference gives for it. Without
// a seed a node draws a fresh seed on every run.

// mt19937 is the Mersenne Twister of Matsumoto and Nishimura, seeded as
// numpy's RandomState(seed) seeds it, with numpy's double and Gaussian
// draws.
type mt19937 struct {
	mt       [624]uint32
	pos      int
	hasGauss bool
	gauss    float64
}

func newMT19937(seed uint32) *mt19937 {
	m := &mt19937{pos: 624}
	m.mt[0] = seed
	for i := 1; i < 624; i++ {
		p := m.mt[i-1]
		m.mt[i] = 1812433253*(p^(p>>30)) + uint32(i)
	}
	return m
}

func (m *mt19937) uint32() uint32 {
	if m.pos >= 624 {
		const upper, lower = 0x80000000, 0x7fffffff
		for i := range 624 {
			y := m.mt[i]&upper | m.mt[(i+1)%624]&lower
			v := m.mt[(i+397)%624] ^ y>>1
			if y&1 != 0 {
				v ^= 0x9908b0df
			}
			m.mt[i] = v
		}
		m.pos = 0
	}
	y := m.mt[m.pos]
	m.pos++
	y ^= y >> 11
	y ^= y << 7 & 0x9d2c5680
	y ^= y << 15 & 0xefc60000
	y ^= y >> 18
	return y
}

// double is numpy's random_sample: 53 random bits in [0, 1).
func (m *mt19937) double() float64 {
	a, b := m.uint32()>>5, m.uint32()>>6
	return (float64(a)*67108864 + float64(b)) / 9007199254740992
}

// gaussian is numpy's legacy standard normal draw (the polar method, the
// second value of each pair kept for the next call).
func (m *mt19937) gaussian() float64 {
	if m.hasGauss {
		m.hasGauss = false
		return m.gauss
	}
	for {
		x1, x2 := 2*m.double()-1, 2*m.double()-1
		r2 := x1*x1 + x2*x2
		if r2 < 1 && r2 != 0 {
			f := math.Sqrt(-2 * math.Log(r2) / r2)
			m.gauss, m.hasGauss = f*x1, true
			return f * x2
		}
	}
}

// bernoulli is numpy's legacy binomial(1, p) draw (inversion on the
// smaller of p and 1-p).
func (m *mt19937) bernoulli(p float64) float64 {
	switch {
	case p <= 0 || math.IsNaN(p):
		return 0
	case p <= 0.5:
		if m.double() > 1-p {
			return 1
		}
		return 0
	case p >= 1:
		m.double()
		return 1
	}
	if m.double() > p {
		return 0
	}
	return 1
}

// generator returns the node's generator: seeded by its seed attribute,
// else by a fresh random seed.
func generator(c *Call) *mt19937 {
	if a := c.Attr("seed"); a != nil {
		s := float64(a.Float())
		if a.Type() == graph.AttrInt {
			s = float64(a.Int())
		}
		return newMT19937(uint32(int64(s)))
	}
	return newMT19937(rand.Uint32())
}

// randomShape returns the output shape and type of a random op: from the
// shape attribute, or (Like forms) from the input.
func randomShape(c *Call, in []*Tensor) ([]int, graph.DataType, error) {
	dt := graph.Float
	var shape []int
	if x := optIn(in, 0); x != nil {
		shape, dt = x.Shape, x.DType
	} else {
		s := c.Ints("shape")
		shape = make([]int, len(s))
		for i, d := range s {
			if d < 0 || d > math.MaxInt32 {
				return nil, 0, fmt.Errorf("shape %v: bad dimension", s)
			}
			shape[i] = int(d)
		}
	}
	if c.Attr("dtype") != nil {
		var err error
		if dt, err = dtypeAttr(c, "dtype"); err != nil {
			return nil, 0, err
		}
	}
	if !isFloatType(dt) || smallFloat(dt) {
		return nil, 0, fmt.Errorf("dtype %v: %w", dt, ErrUnsupportedType)
	}
	return shape, dt, nil
}

func randomKernel(normal bool) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		shape, dt, err := randomShape(c, in)
		if err != nil {
			return nil, err
		}
		y := c.alloc(dt, shape...)
		g := generator(c)
		v := make([]float64, y.Len())
		if normal {
			mean, scale := float64(c.Float("mean", 0)), float64(c.Float("scale", 1))
			for i := range v {
				v[i] = mean + scale*g.gaussian()
			}
		} else {
			lo, hi := float64(c.Float("low", 0)), float64(c.Float("high", 1))
			for i := range v {
				v[i] = lo + (hi-lo)*g.double()
			}
		}
		fromFloat64(y, v)
		return []*Tensor{y}, nil
	}
}

// bernoulliKernel draws 1 with probability x (each element), else 0.
func bernoulliKernel(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	dt := x.DType
	if c.Attr("dtype") != nil {
		var err error
		if dt, err = dtypeAttr(c, "dtype"); err != nil {
			return nil, err
		}
	}
	y := c.alloc(dt, x.Shape...)
	g := generator(c)
	p := x.Float64s()
	for i, q := range p {
		p[i] = g.bernoulli(q)
	}
	fromFloat64Sat(y, p, true, "up")
	return []*Tensor{y}, nil
}

// dropoutTraining zeroes each element with probability ratio and scales
// the others by 1/(1-ratio) (in x's precision), as ONNX's reference does:
// kept where a uniform draw is at least ratio.
func dropoutTraining(c *Call, x *Tensor, ratio float64) ([]*Tensor, error) {
	if !(ratio >= 0 && ratio < 1) {
		return nil, fmt.Errorf("ratio %v must be in [0, 1)", ratio)
	}
	if !isFloatType(x.DType) || smallFloat(x.DType) {
		return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
	}
	g := generator(c)
	xs := x.Float64s()
	y := c.alloc(x.DType, x.Shape...)
	mask := c.alloc(graph.Bool, x.Shape...)
	md := Data[bool](mask)
	scale := 1 / (1 - ratio)
	if x.DType != graph.Double {
		scale = float64(float32(scale))
	}
	for i, v := range xs {
		md[i] = g.double() >= ratio
		if md[i] {
			xs[i] = v * scale
		} else {
			xs[i] = 0
		}
	}
	fromFloat64(y, xs)
	outs := []*Tensor{y}
	if c.HasOutput(1) {
		outs = append(outs, mask)
	}
	return outs, nil
}

func init() {
	reg("RandomUniform", 1, 0, randomKernel(false))
	reg("RandomNormal", 1, 0, randomKernel(true))
	reg("RandomUniformLike", 1, 0, randomKernel(false))
	reg("RandomNormalLike", 1, 0, randomKernel(true))
	Register("", "Bernoulli", 15, 0, bernoulliKernel, Native)
}
