package probe

import (
	"math"
	"strconv"
)

// linreg fits y = a + b·x by least squares.
func Linreg(x, y []float64) (a, b float64) { return Wlinreg(x, y, nil) }

// unwrapSlope fits the slope of angles measured modulo 2π at consecutive
// positions (the angle advances by less than π per position).
func UnwrapSlope(theta []float64) float64 {
	if len(theta) < 2 {
		return math.NaN()
	}
	u := make([]float64, len(theta))
	x := make([]float64, len(theta))
	u[0] = theta[0]
	for i := 1; i < len(theta); i++ {
		d := math.Remainder(theta[i]-theta[i-1], 2*math.Pi)
		u[i] = u[i-1] + d
		x[i] = float64(i)
	}
	_, b := Linreg(x, u)
	return b
}

// snap rounds a measured value to a round number when it is within rel of
// it: first to two significant digits (10000, 500000, 1e6, 2, 0.5), then
// to an integer; otherwise to 7 significant digits.
func Snap(v, rel float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	for _, digits := range []int{1, 2, 3} {
		r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', digits, 64), 64)
		if math.Abs(r-v) <= rel*math.Abs(v) {
			return r
		}
	}
	if r := math.Round(v); math.Abs(r-v) <= rel*math.Abs(v) {
		return r
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 7, 64), 64)
	return r
}

// wlinreg fits y = a + b·x by least squares weighted by 1/σ² (every
// weight 1 when sigma is nil).
func Wlinreg(x, y, sigma []float64) (a, b float64) {
	var sw, sx, sy, sxx, sxy float64
	for i := range x {
		w := 1.0
		if sigma != nil {
			w = 1 / (sigma[i] * sigma[i])
		}
		sw += w
		sx += w * x[i]
		sy += w * y[i]
		sxx += w * x[i] * x[i]
		sxy += w * x[i] * y[i]
	}
	d := sw*sxx - sx*sx
	if d == 0 {
		return sy / sw, 0
	}
	b = (sw*sxy - sx*sy) / d
	a = (sy - b*sx) / sw
	return a, b
}

// plainFit fits ω_k = base^(-2k/rd)/f, weighting each frequency by its
// relative measurement error σ_k: it returns base, f and the largest
// residual in units of σ.
func PlainFit(omega, sigma []float64, rd int) (base, f, resid float64) {
	x := make([]float64, len(omega))
	y := make([]float64, len(omega))
	for k, w := range omega {
		x[k] = 2 * float64(k) / float64(rd)
		y[k] = math.Log(w)
	}
	a, b := Wlinreg(x, y, sigma)
	base, f = math.Exp(-b), math.Exp(-a)
	for k, w := range omega {
		m := math.Exp(a + b*x[k])
		resid = max(resid, math.Abs(w/m-1)/sigma[k])
	}
	return base, f, resid
}

// omegaSigma is the relative error of frequencies measured over span
// consecutive positions up to far: angles known to angErr radians plus the
// rounding (relative eps) of position·frequency, plus the rounding of a
// float32 frequency.
func OmegaSigma(omega []float64, angErr float64, span, far int, eps float64) []float64 {
	s := make([]float64, len(omega))
	for k, w := range omega {
		w = math.Abs(w)
		s[k] = (angErr+2*float64(far)*w*eps)/(w*float64(max(span, 1))) + 1e-7
	}
	return s
}
