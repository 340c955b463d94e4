package rope

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/passes/rewrite"
)

// RoPERule is a RoPE scaling rule with its parameters as onnxpe extend
// applies it: to the frequencies the model has (one per rotary pair, in
// frequency order, the highest first), in float64.
//
// The rules follow Hugging Face transformers' modeling_rope_utils (the
// reference for each formula and its defaults), written for frequencies
// ω_k = base^(-2k/d) (d the rotary dim) and applied to the model's own:
//
//	linear       ω_k / factor
//	ntk          ω_k · factor^(-2k/(d-2))             (base · factor^(d/(d-2)))
//	dynamic-ntk  ω_k · s^(-2k/(d-2)), s = max(1, factor·L/orig - (factor-1)),
//	             L the largest position + 1 of a call  (HF "dynamic")
//	yarn         ω_k/factor · r_k + ω_k · (1 - r_k), r_k the linear ramp from
//	             floor(c(beta_fast)) to ceil(c(beta_slow)) clamped to [0, 1],
//	             c(b) = d·ln(orig/(2π b))/(2 ln base); cos and sin multiplied by
//	             attention_factor (default 0.1·ln(factor) + 1)
//	llama3       by wavelength λ = 2π/ω: kept when λ < orig/high, divided by
//	             factor when λ > orig/low, else (1-s)·ω/factor + s·ω with
//	             s = (orig/λ - low)/(high - low)
type Rule struct {
	Method string
	Factor float64
	// Orig is the original maximum length (original_max_positions).
	Orig int
	// Llama 3's band factors.
	Low, High float64
	// YaRN's rotation counts and attention factor.
	BetaFast, BetaSlow, AttentionFactor float64
	// Base and RotaryDim are the model's (YaRN's correction range).
	Base      float64
	RotaryDim int
}

// Dynamic reports whether the frequencies depend on the length of a call.
func (u *Rule) Dynamic() bool { return u.Method == rewrite.MethodDynamicNTK }

// OriginalLength is the length the rule was made for (the one a dynamic
// rule changes at).
func (u *Rule) OriginalLength() int { return u.Orig }

// Amplitude is what the rule multiplies cos and sin by.
func (u *Rule) Amplitude() float64 {
	if u.Method == rewrite.MethodYaRN {
		return u.AttentionFactor
	}
	return 1
}

// Frequencies applies the rule to omega (pair k at index k); L is the
// largest position + 1 of a call, which only dynamic-ntk reads.
func (u *Rule) Frequencies(omega []float64, L int) []float64 {
	out := make([]float64, len(omega))
	d := float64(u.RotaryDim)
	switch u.Method {
	case rewrite.MethodLinear:
		for k, w := range omega {
			out[k] = w / u.Factor
		}
	case rewrite.MethodNTK, rewrite.MethodDynamicNTK:
		s := u.Factor
		if u.Method == rewrite.MethodDynamicNTK {
			s = u.DynamicScale(L)
		}
		for k, w := range omega {
			out[k] = w * math.Pow(s, -2*float64(k)/(d-2))
		}
	case rewrite.MethodYaRN:
		lo, hi := u.CorrectionRange()
		for k, w := range omega {
			r := u.ramp(float64(k), lo, hi)
			out[k] = w/u.Factor*r + w*(1-r)
		}
	case rewrite.MethodLlama3:
		o := float64(u.Orig)
		for k, w := range omega {
			lambda := 2 * math.Pi / w
			switch {
			case lambda < o/u.High:
				out[k] = w
			case lambda > o/u.Low:
				out[k] = w / u.Factor
			default:
				s := (o/lambda - u.Low) / (u.High - u.Low)
				out[k] = (1-s)*w/u.Factor + s*w
			}
		}
	default:
		panic("passes: unknown RoPE method " + u.Method)
	}
	return out
}

// DynamicScale is dynamic NTK's s(L) = max(1, factor·L/orig - (factor-1)).
func (u *Rule) DynamicScale(L int) float64 {
	return max(1, u.Factor*float64(L)/float64(u.Orig)-(u.Factor-1))
}

// DynamicExponents are the exponents e_k = 2k/(d-2) of dynamic NTK's
// ω_k·s^(-e_k), for n pairs.
func (u *Rule) DynamicExponents(n int) []float64 {
	e := make([]float64, n)
	for k := range e {
		e[k] = 2 * float64(k) / float64(u.RotaryDim-2)
	}
	return e
}

// CorrectionRange is YaRN's [low, high] (HF find_correction_range with
// truncation; high nudged by 0.001 when equal to low).
func (u *Rule) CorrectionRange() (float64, float64) {
	d := float64(u.RotaryDim)
	c := func(rot float64) float64 {
		return d * math.Log(float64(u.Orig)/(rot*2*math.Pi)) / (2 * math.Log(u.Base))
	}
	lo := max(math.Floor(c(u.BetaFast)), 0)
	hi := min(math.Ceil(c(u.BetaSlow)), d-1)
	return lo, hi
}

func (u *Rule) ramp(k, lo, hi float64) float64 {
	if lo == hi {
		hi += 0.001
	}
	return min(max((k-lo)/(hi-lo), 0), 1)
}

// Params are the rule's parameters in the report's vocabulary.
func (u *Rule) Params() map[string]any {
	m := map[string]any{"method": u.Method, "factor": u.Factor}
	switch u.Method {
	case rewrite.MethodDynamicNTK, rewrite.MethodLlama3, rewrite.MethodYaRN:
		m["original_max_positions"] = u.Orig
	}
	switch u.Method {
	case rewrite.MethodLlama3:
		m["low_freq_factor"], m["high_freq_factor"] = u.Low, u.High
	case rewrite.MethodYaRN:
		lo, hi := u.CorrectionRange()
		m["beta_fast"], m["beta_slow"], m["attention_factor"] = u.BetaFast, u.BetaSlow, u.AttentionFactor
		m["correction_range"] = []float64{lo, hi}
	}
	return m
}

// String is the rule in one line.
func (u *Rule) String() string {
	s := fmt.Sprintf("%s, factor %g", u.Method, u.Factor)
	switch u.Method {
	case rewrite.MethodDynamicNTK:
		s += fmt.Sprintf(", original_max_positions %d", u.Orig)
	case rewrite.MethodLlama3:
		s += fmt.Sprintf(", original_max_positions %d, low_freq_factor %g, high_freq_factor %g", u.Orig, u.Low, u.High)
	case rewrite.MethodYaRN:
		s += fmt.Sprintf(", original_max_positions %d, beta_fast %g, beta_slow %g, attention_factor %.7g", u.Orig, u.BetaFast, u.BetaSlow, u.AttentionFactor)
	}
	return s
}

// scaling is the audit vocabulary's name of the rule.
func (u *Rule) scaling() string {
	if u.Method == rewrite.MethodDynamicNTK {
		return "ntk"
	}
	return u.Method
}

// ReferenceRoPE computes, independently of RoPERule, the inverse
// frequencies and the cos/sin amplitude Hugging Face transformers'
// modeling_rope_utils gives for a rule (rope_type default, linear, ntk,
// dynamic, yarn, llama3), transcribed from its _compute_*_parameters
// functions in float64: base and dim (the rotary dim) as in the config,
// seqLen the length dynamic NTK is evaluated at. It is the reference the
// extended model is checked against.
func ReferenceRoPE(u Rule, base float64, dim, seqLen int) ([]float64, float64) {
	invFreq := func(b float64) []float64 {
		out := make([]float64, dim/2)
		for i := range out {
			out[i] = 1 / math.Pow(b, float64(2*i)/float64(dim))
		}
		return out
	}
	factor := u.Factor
	switch u.Method {
	case "", "default":
		return invFreq(base), 1
	case rewrite.MethodLinear:
		f := invFreq(base)
		for i := range f {
			f[i] /= factor
		}
		return f, 1
	case rewrite.MethodNTK:
		return invFreq(base * math.Pow(factor, float64(dim)/float64(dim-2))), 1
	case rewrite.MethodDynamicNTK:
		maxPos := u.Orig
		sl := seqLen
		if sl <= maxPos {
			sl = maxPos
		}
		b := base * math.Pow(factor*float64(sl)/float64(maxPos)-(factor-1), float64(dim)/float64(dim-2))
		return invFreq(b), 1
	case rewrite.MethodYaRN:
		attn := u.AttentionFactor
		if attn == 0 {
			attn = 0.1*math.Log(factor) + 1
		}
		findDim := func(rot float64) float64 {
			return float64(dim) * math.Log(float64(u.Orig)/(rot*2*math.Pi)) / (2 * math.Log(base))
		}
		low := math.Max(math.Floor(findDim(u.BetaFast)), 0)
		high := math.Min(math.Ceil(findDim(u.BetaSlow)), float64(dim-1))
		if low == high {
			high += 0.001
		}
		out := make([]float64, dim/2)
		for i := range out {
			pos := math.Pow(base, float64(2*i)/float64(dim))
			extrap, interp := 1/pos, 1/(factor*pos)
			ramp := math.Min(math.Max((float64(i)-low)/(high-low), 0), 1)
			ef := 1 - ramp
			out[i] = interp*(1-ef) + extrap*ef
		}
		return out, attn
	case rewrite.MethodLlama3:
		f := invFreq(base)
		lowWl := float64(u.Orig) / u.Low
		highWl := float64(u.Orig) / u.High
		out := make([]float64, len(f))
		for i, x := range f {
			wl := 2 * math.Pi / x
			v := x
			if wl > lowWl {
				v = x / factor
			}
			smooth := (float64(u.Orig)/wl - u.Low) / (u.High - u.Low)
			if !(wl < highWl) && !(wl > lowWl) {
				v = (1-smooth)*v/factor + smooth*v
			}
			out[i] = v
		}
		return out, 1
	}
	panic("passes: unknown RoPE method " + u.Method)
}
