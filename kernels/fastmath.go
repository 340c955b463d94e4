package kernels

import "math"

// Fast exp, tanh and sigmoid for float32 tensors. They evaluate in float64
// with a relative error near 1e-16, so the float32 results are the
// correctly rounded ones except in rare near-halfway cases (within 1 ulp;
// the tests check 1 ulp over the whole float32 range), at a fraction of
// the cost of math.Exp and math.Tanh, which also handle the float64 range.

// expTab[j] = 2^(j/expTabN).
const expTabN = 64

var expTab = func() (t [expTabN]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / expTabN)
	}
	return
}()

const (
	expInvL  = expTabN / math.Ln2                   // 64/ln2
	expLHi   = 6.93147180369123816490e-01 / expTabN // ln2/64 with 32 significant bits
	expLLo   = 1.90821492927058770002e-10 / expTabN // the rest of ln2/64
	expMagic = 0x1.8p52                             // rounds to an integer when added
)

// expf computes e^x for x in float64 with about 1e-16 relative error,
// for arguments whose result is meant for float32 (|x| <= 700; beyond it
// the result saturates to 0 or +Inf).
func expf(x float64) float64 {
	switch {
	case x != x:
		return x
	case x > 700:
		return math.Inf(1)
	case x < -700:
		return 0
	}
	// x = (64q + j) ln2/64 + r, |r| <= ln2/128.
	t := x*expInvL + expMagic
	kf := t - expMagic
	k := int64(kf)
	r := (x - kf*expLHi) - kf*expLLo
	// e^r - 1 to degree 5: the remainder r^6/720 < 4e-17.
	p := r + r*r*(0.5+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720)))))
	j := k & (expTabN - 1)
	q := k >> 6 // floor division by 64 (arithmetic shift)
	scale := math.Float64frombits(uint64(q+1023) << 52)
	return expTab[j] * scale * (1 + p)
}

// tanhf is tanh in float64 with about 1e-14 relative error (for float32
// results).
func tanhf(x float64) float64 {
	a := math.Abs(x)
	if a < 0x1p-7 {
		// tanh x = x - x³/3 + 2x⁵/15 - ...: the x⁵ term is below 2^-30 x.
		return x - x*x*x*(1.0/3)
	}
	if a > 20 {
		return math.Copysign(1, x)
	}
	e := expf(2 * a)
	return math.Copysign(1-2/(e+1), x)
}

// sigmoidf is 1/(1+e^-x) for float32 results.
func sigmoidf(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + expf(-x))
	}
	e := expf(x)
	return e / (1 + e)
}

const sqrt2OverPi = 0.79788456080286535587989211986876 // √(2/π)

func geluTanhf(x float64) float64 {
	return 0.5 * x * (1 + tanhf(sqrt2OverPi*(x+0.044715*x*x*x)))
}

// widen converts a float32 to float64 through the integer unit. The
// direct conversion (CVTSS2SD) merges into its destination register, which
// in a loop over f(float64(x[i])) is the previous element's result: every
// element then waits for the previous one (measured: exp 15 ns an element
// instead of 5).
func widen(v float32) float64 {
	b := math.Float32bits(v)
	e := b >> 23 & 0xff
	if e == 0 || e == 0xff {
		return float64(v) // zero, subnormal, Inf, NaN
	}
	return math.Float64frombits(uint64(b>>31)<<63 | uint64(e+(1023-127))<<52 | uint64(b&0x7fffff)<<29)
}

// Slice forms: dst[i] = f(src[i]) in a loop the compiler can inline f into.

func expSlice(d, s []float32) {
	d = d[:len(s)]
	for i, v := range s {
		d[i] = float32(expf(widen(v)))
	}
}

func tanhSlice(d, s []float32) {
	d = d[:len(s)]
	for i, v := range s {
		d[i] = float32(tanhf(widen(v)))
	}
}

func sigmoidSlice(d, s []float32) {
	d = d[:len(s)]
	for i, v := range s {
		d[i] = float32(sigmoidf(widen(v)))
	}
}

func geluTanhSlice(d, s []float32) {
	d = d[:len(s)]
	for i, v := range s {
		d[i] = float32(geluTanhf(widen(v)))
	}
}

func geluErfSlice(d, s []float32) {
	d = d[:len(s)]
	for i, v := range s {
		x := widen(v)
		d[i] = float32(0.5 * x * (1 + math.Erf(x*(1/math.Sqrt2))))
	}
}

func erfSlice(d, s []float32) {
	d = d[:len(s)]
	for i, v := range s {
		d[i] = float32(math.Erf(widen(v)))
	}
}
