package passes

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// linreg fits y = a + b·x by least squares.
func linreg(x, y []float64) (a, b float64) {
	n := float64(len(x))
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx += x[i]
		sy += y[i]
		sxx += x[i] * x[i]
		sxy += x[i] * y[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return sy / n, 0
	}
	b = (n*sxy - sx*sy) / d
	a = (sy - b*sx) / n
	return a, b
}

// unwrapSlope fits the slope of angles measured modulo 2π at consecutive
// positions (the angle advances by less than π per position).
func unwrapSlope(theta []float64) float64 {
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
	_, b := linreg(x, u)
	return b
}

// snap rounds a measured value to a round number when it is within rel of
// it: first to two significant digits (10000, 500000, 1e6, 2, 0.5), then
// to an integer; otherwise to 7 significant digits.
func snap(v, rel float64) float64 {
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

// ropeFit is the scaling rule read from measured frequencies.
type ropeFit struct {
	Base     float64
	Scaling  string
	Factor   float64
	Orig     *int
	Low      *float64
	High     *float64
	BetaFast *float64
	BetaSlow *float64
	AttnF    *float64
	Range    []float64
	Short    []float64
	Long     []float64
	Notes    []string
}

// wlinreg fits y = a + b·x by least squares weighted by 1/σ².
func wlinreg(x, y, sigma []float64) (a, b float64) {
	var sw, sx, sy, sxx, sxy float64
	for i := range x {
		w := 1 / (sigma[i] * sigma[i])
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
func plainFit(omega, sigma []float64, rd int) (base, f, resid float64) {
	x := make([]float64, len(omega))
	y := make([]float64, len(omega))
	for k, w := range omega {
		x[k] = 2 * float64(k) / float64(rd)
		y[k] = math.Log(w)
	}
	a, b := wlinreg(x, y, sigma)
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
func omegaSigma(omega []float64, angErr float64, span, far int, eps float64) []float64 {
	s := make([]float64, len(omega))
	for k, w := range omega {
		w = math.Abs(w)
		s[k] = (angErr+2*float64(far)*w*eps)/(w*float64(max(span, 1))) + 1e-7
	}
	return s
}

// fitRoPE identifies the scaling rule of frequencies ω_k (k = 0..rd/2-1)
// with amplitude amp; sigma are their relative errors and tol the
// precision of the amplitude and of derived ratios.
func fitRoPE(omega, sigma []float64, rd int, amp, tol float64) ropeFit {
	base, f, resid := plainFit(omega, sigma, rd)
	if resid < 8 && len(omega) >= 2 {
		r := ropeFit{Base: snap(base, 5*tol), Scaling: "none", Factor: 1}
		if math.Abs(f-1) > 20*tol {
			r.Scaling, r.Factor = "linear", snap(f, 5*tol)
		}
		if math.Abs(amp-1) > 10*tol {
			r.AttnF = ptr(snapF32(amp))
			r.Notes = append(r.Notes, "cos and sin are scaled by attention_factor")
		}
		return r
	}
	n := len(omega)
	if n < 3 {
		return ropeFit{Scaling: "unknown", Base: math.NaN()}
	}
	// Banded rules keep the highest frequencies: the base from ω_1.
	base = snap(math.Pow(omega[1]/omega[0], -float64(rd)/2), 20*tol)
	plain := make([]float64, n)
	ratio := make([]float64, n)
	for k := range omega {
		plain[k] = math.Pow(base, -2*float64(k)/float64(rd))
		ratio[k] = plain[k] / omega[k]
	}
	if math.Abs(ratio[0]-1) > 20*(tol+sigma[0]) {
		return ropeFit{Scaling: "unknown", Base: math.NaN()}
	}
	factor := snap(ratio[n-1], 20*tol)
	if factor <= 1+20*tol {
		return ropeFit{Scaling: "unknown", Base: math.NaN()}
	}
	// m_k: 1 where kept, 0 where divided by the factor.
	m := make([]float64, n)
	for k := range m {
		m[k] = (1/ratio[k] - 1/factor) / (1 - 1/factor)
		if m[k] < -10*(tol+sigma[k]) || m[k] > 1+10*(tol+sigma[k]) {
			return ropeFit{Scaling: "unknown", Base: math.NaN()}
		}
	}
	if math.Abs(amp-1) <= 10*tol {
		if r, ok := fitLlama3(plain, m, base, factor, tol); ok {
			return r
		}
	}
	if r, ok := fitYaRN(m, rd, base, factor, amp, tol); ok {
		return r
	}
	return ropeFit{Scaling: "unknown", Base: math.NaN()}
}

func snapF32(v float64) float64 { return snap(v, 1e-7) }

var origGrid = []int{8192, 4096, 2048, 16384, 32768, 65536, 131072, 1024, 512, 256, 128, 64, 32, 16, 262144}

// fitLlama3 searches the llama3 rule's parameters (original max, low and
// high frequency factors) consistent with m_k; the published defaults
// (8192, 1, 4) are tried first.
func fitLlama3(plain, m []float64, base, factor, tol float64) (ropeFit, bool) {
	type cand struct {
		orig      int
		low, high float64
	}
	var ok []cand
	for _, orig := range origGrid {
		for _, low := range []float64{1, 2, 0.5, 4} {
			for _, high := range []float64{4, 2, 8, 16, 1} {
				if high <= low {
					continue
				}
				good := true
				for k := range plain {
					wl := 2 * math.Pi / plain[k]
					var want float64
					switch {
					case wl < float64(orig)/high:
						want = 1
					case wl > float64(orig)/low:
						want = 0
					default:
						want = (float64(orig)/wl - low) / (high - low)
					}
					if math.Abs(want-m[k]) > 1e-3+20*tol {
						good = false
						break
					}
				}
				if good {
					ok = append(ok, cand{orig, low, high})
				}
			}
		}
	}
	if len(ok) == 0 {
		return ropeFit{}, false
	}
	c := ok[0]
	r := ropeFit{Base: base, Scaling: "llama3", Factor: factor, Orig: ptr(c.orig), Low: ptr(c.low), High: ptr(c.high)}
	if len(ok) > 1 {
		r.Notes = append(r.Notes, fmt.Sprintf("llama3: %d settings of original_max_positions/low_freq_factor/high_freq_factor reproduce the frequencies; reported the first in the order of the published defaults", len(ok)))
	}
	return r, true
}

// fitYaRN reads YaRN's ramp (correction range) from m_k and searches the
// beta_fast/beta_slow/original max consistent with it.
func fitYaRN(m []float64, rd int, base, factor, amp, tol float64) (ropeFit, bool) {
	// ramp_k = 1 - m_k = clamp((k - low)/(high - low), 0, 1).
	var xs, ys []float64
	lastKept, firstScaled := -1, len(m)
	for k, mk := range m {
		switch {
		case mk > 1-1e-3:
			lastKept = k
		case mk < 1e-3:
			if firstScaled == len(m) {
				firstScaled = k
			}
		default:
			xs = append(xs, float64(k))
			ys = append(ys, 1-mk)
		}
	}
	var low, high float64
	switch {
	case len(xs) >= 2:
		a, b := linreg(xs, ys)
		if b <= 0 {
			return ropeFit{}, false
		}
		low, high = -a/b, (1-a)/b
		for i := range xs {
			if math.Abs(a+b*xs[i]-ys[i]) > 1e-3+20*tol {
				return ropeFit{}, false
			}
		}
		low, high = math.Round(low*1000)/1000, math.Round(high*1000)/1000
	case len(xs) == 0 && lastKept >= 0 && firstScaled < len(m):
		// A step: low = high within one index (HF adds 0.001).
		low, high = float64(lastKept), float64(firstScaled)
	default:
		return ropeFit{}, false
	}
	dim := float64(rd)
	corr := func(rot float64, orig int) float64 {
		return dim * math.Log(float64(orig)/(rot*2*math.Pi)) / (2 * math.Log(base))
	}
	type cand struct {
		orig   int
		bf, bs float64
	}
	var ok []cand
	for _, orig := range append([]int{4096}, origGrid...) {
		for _, bf := range []float64{32, 16, 64, 8} {
			for _, bs := range []float64{1, 2, 0.5, 4} {
				lo := max(math.Floor(corr(bf, orig)), 0)
				hi := min(math.Ceil(corr(bs, orig)), dim/2-1)
				if lo == low && hi == high {
					ok = append(ok, cand{orig, bf, bs})
				}
			}
		}
	}
	r := ropeFit{Base: base, Scaling: "yarn", Factor: factor, Range: []float64{low, high}}
	af := 0.1*math.Log(factor) + 1
	if math.Abs(amp-af) < 1e-5+10*tol {
		r.AttnF = ptr(af)
	} else {
		r.AttnF = ptr(snapF32(amp))
	}
	if len(ok) > 0 {
		c := ok[0]
		r.Orig, r.BetaFast, r.BetaSlow = ptr(c.orig), ptr(c.bf), ptr(c.bs)
		if len(ok) > 1 {
			origs := map[int]bool{}
			for _, x := range ok {
				origs[x.orig] = true
			}
			var os []int
			for o := range origs {
				os = append(os, o)
			}
			sort.Ints(os)
			r.Notes = append(r.Notes, fmt.Sprintf("yarn: the correction range [%g, %g] is reproduced by %d settings (original_max_positions in %v); reported beta_fast 32, beta_slow 1 and original_max_positions %d, the first in the order of the published defaults", low, high, len(ok), os, c.orig))
		}
	} else {
		r.Notes = append(r.Notes, "yarn: no standard beta_fast/beta_slow/original_max_positions reproduces the correction range")
	}
	return r, true
}
