package rope

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
)

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
	// Llama3 are the settings of the llama3 rule's lengths that reproduce
	// the frequencies (the graph fixes none of the three apart).
	Llama3 []llama3Setting
	// Dynamic marks dynamic NTK (frequencies that follow the length).
	Dynamic bool
	Notes   []string
}

// fitRoPE identifies the scaling rule of frequencies ω_k (k = 0..rd/2-1)
// with amplitude amp; sigma are their relative errors and tol the
// precision of the amplitude and of derived ratios. rows, when the cos/sin
// are read from a stored table, is its number of positions: a rule's
// original length times its factor usually is (Hugging Face's
// max_position_embeddings), which decides between settings that give the
// same frequencies.
func fitRoPE(omega, sigma []float64, rd int, amp, tol float64, rows int) ropeFit {
	base, f, resid := probe.PlainFit(omega, sigma, rd)
	if resid < 8 && len(omega) >= 2 {
		r := ropeFit{Base: probe.Snap(base, 5*tol), Scaling: "none", Factor: 1}
		if math.Abs(f-1) > 20*tol {
			r.Scaling, r.Factor = "linear", probe.Snap(f, 5*tol)
		} else if b0, nf, ok := ntkFit(base, rd, 5*tol); ok {
			r.Scaling, r.Factor, r.Base = "ntk", nf, b0
			r.Notes = append(r.Notes, fmt.Sprintf("ntk: the frequencies are those of base %g·%g^(%d/%d) = %.7g (NTK-aware scaling of the round base %g by %g; measured %.7g); a plain RoPE of that base computes the same", b0, nf, rd, rd-2, b0*math.Pow(nf, float64(rd)/float64(rd-2)), b0, nf, base))
		}
		if math.Abs(amp-1) > 10*tol {
			r.AttnF = passes.Ptr(snapF32(amp))
			r.Notes = append(r.Notes, "cos and sin are scaled by attention_factor")
		}
		return r
	}
	n := len(omega)
	if n < 3 {
		return ropeFit{Scaling: "unknown", Base: math.NaN()}
	}
	// Banded rules keep the highest frequencies and divide the lowest by
	// the factor: the base from the ratio of the first two (kept) or of
	// the last two (divided).
	// A base that is round wins over one that is not (the other end's
	// pair was smoothed or ramped).
	head := probe.Snap(math.Pow(omega[1]/omega[0], -float64(rd)/2), 20*tol)
	tail := probe.Snap(math.Pow(omega[n-1]/omega[n-2], -float64(rd)/2), 20*tol)
	bases := []float64{head, tail}
	if _, ok := isRound(head, 20*tol); !ok {
		if _, ok := isRound(tail, 20*tol); ok {
			bases = []float64{tail, head}
		}
	}
	for _, b := range bases {
		if r, ok := fitBanded(omega, sigma, rd, amp, tol, rows, b, b == head); ok {
			return r
		}
	}
	return ropeFit{Scaling: "unknown", Base: math.NaN()}
}

// isRound reports whether v is within rel of a number of at most two
// significant digits.
func isRound(v, rel float64) (float64, bool) {
	for _, digits := range []int{1, 2} {
		r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', digits, 64), 64)
		if math.Abs(r-v) <= rel*math.Abs(v) {
			return r, true
		}
	}
	return v, false
}

// ntkBase finds the NTK-aware explanation of a base: a round base b0
// (at most digits significant digits, at least 100) times a factor f of
// fs to the power d/(d-2); of several, the one whose base b0·f^(d/(d-2))
// is closest to the measured one.
func ntkBase(base float64, rd int, rel float64, digits int, fs []float64) (b0, f, pred float64, ok bool) {
	if rd <= 2 {
		return 0, 0, 0, false
	}
	best := math.Inf(1)
	for _, nf := range fs {
		e := float64(rd) / float64(rd-2)
		b := base / math.Pow(nf, e)
		r, _ := strconv.ParseFloat(strconv.FormatFloat(b, 'g', digits, 64), 64)
		if math.Abs(r-b) <= max(rel, 1e-6)*b && r >= 100 {
			p := r * math.Pow(nf, e)
			if d := math.Abs(p - base); d < best {
				best, b0, f, pred, ok = d, r, nf, p, true
			}
		}
	}
	return b0, f, pred, ok
}

// ntkFit recognises static NTK-aware scaling (base · factor^(d/(d-2))).
// A base that is not round is explained by a round base (two digits) and
// a factor of 1.25 to 16 in quarters (or 20 .. 128); a base that looks
// round within the measurement's precision (frequencies stored in a half
// type measure it to a few 1e-3) only by a base of one significant digit
// (10000, 500000, 1e6) and an integer factor, and only when that is much
// closer to the measurement than the round number.
func ntkFit(base float64, rd int, rel float64) (float64, float64, bool) {
	round, isR := isRound(base, max(rel, 1e-6))
	if !isR {
		var fs []float64
		for f := 1.25; f <= 16; f += 0.25 {
			fs = append(fs, f)
		}
		fs = append(fs, 20, 24, 32, 48, 64, 128)
		b0, f, _, ok := ntkBase(base, rd, rel, 2, fs)
		return b0, f, ok
	}
	var fs []float64
	for f := 2.0; f <= 16; f++ {
		fs = append(fs, f)
	}
	b0, f, pred, ok := ntkBase(base, rd, rel, 1, fs)
	if ok && math.Abs(pred-base) < math.Abs(round-base)/2 {
		return b0, f, true
	}
	return 0, 0, false
}

// fitBanded fits the banded rules (llama3, yarn) with the given base;
// kept says the base comes from the highest frequencies, which must then
// be kept as they are.
func fitBanded(omega, sigma []float64, rd int, amp, tol float64, rows int, base float64, kept bool) (ropeFit, bool) {
	n := len(omega)
	plain := make([]float64, n)
	ratio := make([]float64, n)
	for k := range omega {
		plain[k] = math.Pow(base, -2*float64(k)/float64(rd))
		ratio[k] = plain[k] / omega[k]
	}
	if kept && math.Abs(ratio[0]-1) > 20*(tol+sigma[0]) {
		return ropeFit{}, false
	}
	factor := probe.Snap(ratio[n-1], 20*tol)
	if factor <= 1+20*tol {
		return ropeFit{}, false
	}
	// m_k: 1 where kept, 0 where divided by the factor.
	m := make([]float64, n)
	for k := range m {
		m[k] = (1/ratio[k] - 1/factor) / (1 - 1/factor)
		if m[k] < -10*(tol+sigma[k]) || m[k] > 1+10*(tol+sigma[k]) {
			return ropeFit{}, false
		}
	}
	origs := origGrid
	if rows > 0 {
		if o := int(math.Round(float64(rows) / factor)); o > 0 && !slices.Contains(origs, o) || o > 0 && origs[0] != o {
			origs = append([]int{o}, slices.DeleteFunc(slices.Clone(origGrid), func(x int) bool { return x == o })...)
		}
	}
	if math.Abs(amp-1) <= 10*tol {
		if r, ok := fitLlama3(plain, m, base, factor, tol, origs); ok {
			return r, true
		}
	}
	if r, ok := fitYaRN(m, rd, base, factor, amp, tol, origs); ok {
		return r, true
	}
	return ropeFit{}, false
}

func snapF32(v float64) float64 { return probe.Snap(v, 1e-7) }

var origGrid = []int{8192, 4096, 2048, 16384, 32768, 65536, 131072, 1024, 512, 256, 128, 64, 32, 16, 262144}

// llama3Setting is one setting of the llama3 rule's original length and
// band factors.
type llama3Setting struct {
	orig      int
	low, high float64
}

// fitLlama3 searches the settings of the llama3 rule's parameters
// (original max, low and high frequency factors) consistent with m_k, the
// published band factors (1, 4) first, with every original length of
// origs in order. The rule reads the three only through the wavelengths
// orig/low and orig/high, so they are reported null with the settings in
// a note.
func fitLlama3(plain, m []float64, base, factor, tol float64, origs []int) (ropeFit, bool) {
	var ok []llama3Setting
	for _, low := range []float64{1, 2, 0.5, 4} {
		for _, high := range []float64{4, 2, 8, 16, 1} {
			for _, orig := range origs {
				if high > low && llama3Fits(plain, m, llama3Setting{orig, low, high}, tol) {
					ok = append(ok, llama3Setting{orig, low, high})
				}
			}
		}
	}
	if len(ok) == 0 {
		return ropeFit{}, false
	}
	r := ropeFit{Base: base, Scaling: "llama3", Factor: factor, Llama3: ok}
	r.Notes = append(r.Notes, llama3Ambiguity(ok))
	return r, true
}

// llama3Fits reports whether setting c of the llama3 rule keeps (1),
// divides (0) or smooths each plain frequency as m_k measures.
func llama3Fits(plain, m []float64, c llama3Setting, tol float64) bool {
	orig := float64(c.orig)
	for k := range plain {
		wl := 2 * math.Pi / plain[k]
		var want float64
		switch {
		case wl < orig/c.high:
			want = 1
		case wl > orig/c.low:
			want = 0
		default:
			want = (orig/wl - c.low) / (c.high - c.low)
		}
		if math.Abs(want-m[k]) > 1e-3+20*tol {
			return false
		}
	}
	return true
}

// llama3Ambiguity is the note of the llama3 rule's lengths: the
// wavelengths the settings give, the settings, and the length of the
// published factors (1, 4) among them.
func llama3Ambiguity(ok []llama3Setting) string {
	var lows, highs []float64
	var sets []string
	var pub []int
	for _, c := range ok {
		lows, highs = append(lows, float64(c.orig)/c.low), append(highs, float64(c.orig)/c.high)
		sets = append(sets, fmt.Sprintf("(%d, %g, %g)", c.orig, c.low, c.high))
		if c.low == 1 && c.high == 4 {
			pub = append(pub, c.orig)
		}
	}
	s := fmt.Sprintf("llama3: the rule reads original_max_positions, low_freq_factor and high_freq_factor only through the wavelengths "+
		"original_max_positions/low_freq_factor (here {%s} positions) and original_max_positions/high_freq_factor ({%s}): the three "+
		"multiplied by one constant give the same frequencies, so the graph fixes none of them: reported null; "+
		"(original_max_positions, low_freq_factor, high_freq_factor) in {%s} among the settings tried reproduce the frequencies",
		strings.Join(distinct(lows), ", "), strings.Join(distinct(highs), ", "), strings.Join(sets, ", "))
	if len(pub) > 0 {
		s += fmt.Sprintf("; with the published factors 1 and 4, original_max_positions is %s", strings.Join(distinct(pub), " or "))
	}
	return s
}

// fitYaRN reads YaRN's ramp (correction range) from m_k and searches the
// beta_fast/beta_slow/original max consistent with it among the betas
// 8..64 and 0.5..4 and the lengths of origs. A param is reported when
// every setting that reproduces the ramp has the same value, else null
// with the candidates in a note (the ramp depends on the length only
// through length/beta: a length twice as long with betas twice as large
// computes the same frequencies). Each setting's ramp is computed as
// Hugging Face does and compared with m_k; the range reported is the one
// read from the ramp (or, with fewer than one point between its ends and
// no step, the first setting's).
func fitYaRN(m []float64, rd int, base, factor, amp, tol float64, origs []int) (ropeFit, bool) {
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
	ranged := true
	switch {
	case len(xs) >= 2:
		a, b := probe.Linreg(xs, ys)
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
		ranged = false
	}
	ok, lo, hi := yarnSettings(m, rd, base, tol, origs)
	if !ranged {
		low, high = lo, hi
	}
	if !ranged && len(ok) == 0 {
		return ropeFit{}, false
	}
	r := ropeFit{Base: base, Scaling: "yarn", Factor: factor, Range: []float64{low, high}}
	af := 0.1*math.Log(factor) + 1
	if math.Abs(amp-af) < 1e-5+10*tol {
		r.AttnF = passes.Ptr(af)
	} else {
		r.AttnF = passes.Ptr(snapF32(amp))
	}
	if len(ok) == 0 {
		r.Notes = append(r.Notes, "yarn: no standard beta_fast/beta_slow/original_max_positions reproduces the correction range")
		return r, true
	}
	r.Orig = onlyOne(ok, func(c yarnSetting) int { return c.orig })
	r.BetaFast = onlyOne(ok, func(c yarnSetting) float64 { return c.bf })
	r.BetaSlow = onlyOne(ok, func(c yarnSetting) float64 { return c.bs })
	if len(ok) > 1 {
		r.Notes = append(r.Notes, yarnAmbiguity(low, high, ok))
	}
	return r, true
}

// yarnSettings are the settings of YaRN's rule, among the betas 8..64 and
// 0.5..4 and the lengths origs, whose ramp (Hugging Face's correction
// range) is 1 - m_k at every pair, and the range of the first.
func yarnSettings(m []float64, rd int, base, tol float64, origs []int) (ok []yarnSetting, low, high float64) {
	dim := float64(rd)
	corr := func(rot float64, orig int) float64 {
		return dim * math.Log(float64(orig)/(rot*2*math.Pi)) / (2 * math.Log(base))
	}
	for _, bf := range []float64{32, 16, 64, 8} {
		for _, bs := range []float64{1, 2, 0.5, 4} {
			for _, orig := range origs {
				lo := max(math.Floor(corr(bf, orig)), 0)
				hi := min(math.Ceil(corr(bs, orig)), dim-1)
				h := hi
				if h == lo {
					h += 0.001
				}
				good := true
				for k, mk := range m {
					ramp := min(max((float64(k)-lo)/(h-lo), 0), 1)
					if math.Abs(1-ramp-mk) > 1e-3+20*tol {
						good = false
						break
					}
				}
				if good {
					if len(ok) == 0 {
						low, high = lo, hi
					}
					ok = append(ok, yarnSetting{orig, bf, bs})
				}
			}
		}
	}
	return ok, low, high
}

// yarnSetting is one setting of YaRN's rule that reproduces a ramp.
type yarnSetting struct {
	orig   int
	bf, bs float64
}

// onlyOne is the value of param all settings hold, nil when they differ:
// a param the candidate settings do not agree on is not fixed by the
// graph.
func onlyOne[T comparable](ok []yarnSetting, param func(yarnSetting) T) *T {
	v := param(ok[0])
	for _, c := range ok[1:] {
		if param(c) != v {
			return nil
		}
	}
	return passes.Ptr(v)
}

// yarnAmbiguity is the note of a correction range several settings of
// YaRN reproduce: the candidate set of each param, the lengths of the
// published betas (32, 1) among them, and which params are left null.
func yarnAmbiguity(low, high float64, ok []yarnSetting) string {
	var os, pub []int
	var bfs, bss []float64
	for _, c := range ok {
		os, bfs, bss = append(os, c.orig), append(bfs, c.bf), append(bss, c.bs)
		if c.bf == 32 && c.bs == 1 {
			pub = append(pub, c.orig)
		}
	}
	var sets, null []string
	add := func(name string, vs []string) {
		sets = append(sets, fmt.Sprintf("%s in {%s}", name, strings.Join(vs, ", ")))
		if len(vs) > 1 {
			null = append(null, name)
		}
	}
	add("original_max_positions", distinct(os))
	add("beta_fast", distinct(bfs))
	add("beta_slow", distinct(bss))
	s := fmt.Sprintf("yarn: the correction range [%g, %g] is reproduced by %d settings of the betas and lengths tried (%s)", low, high, len(ok), strings.Join(sets, "; "))
	if len(pub) > 0 {
		s += fmt.Sprintf(", with the published betas 32 and 1 by original_max_positions in {%s}", strings.Join(distinct(pub), ", "))
	}
	return s + fmt.Sprintf("; the ramp depends on the length only through original_max_positions/beta, so the frequencies do not fix %s: reported null", strings.Join(null, ", "))
}

// distinct formats the distinct values of vs in increasing order.
func distinct[T int | float64](vs []T) []string {
	vs = slices.Clone(vs)
	slices.Sort(vs)
	vs = slices.Compact(vs)
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.FormatFloat(float64(v), 'g', -1, 64)
	}
	return out
}
