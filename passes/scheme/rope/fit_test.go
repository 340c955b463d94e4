package rope

import (
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/rewrite"
)

// TestYaRNParamsTheRampFixes: YaRN's ramp depends on the original length
// only through length/beta, so with the published betas (32, 1) at head
// dim 16 the lengths 2048 and 4096 (and 1024..8192 with other betas) give
// the same frequencies: those params are null and the note lists the
// candidates. A setting no other tried setting reproduces (betas 64 and
// 0.5 at head dim 64) keeps its length and betas.
func TestYaRNParamsTheRampFixes(t *testing.T) {
	cases := []struct {
		name       string
		u          Rule
		base       float64
		rd         int
		wantOrig   int // 0: null
		wantInNote []string
	}{
		{name: "ambiguous", u: Rule{Method: rewrite.MethodYaRN, Factor: 4, Orig: 4096, BetaFast: 32, BetaSlow: 1}, base: 1e4, rd: 16,
			wantInNote: []string{"original_max_positions in {1024, 2048, 4096, 8192}", "published betas 32 and 1 by original_max_positions in {2048, 4096}",
				"do not fix original_max_positions, beta_fast, beta_slow"}},
		{name: "unique", u: Rule{Method: rewrite.MethodYaRN, Factor: 4, Orig: 4096, BetaFast: 64, BetaSlow: 0.5}, base: 1e4, rd: 64, wantOrig: 4096},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			omega, amp := ReferenceRoPE(c.u, c.base, c.rd, 0)
			sigma := make([]float64, len(omega))
			for k := range sigma {
				sigma[k] = 1e-7
			}
			r := fitRoPE(omega, sigma, c.rd, amp, 1e-6, 0)
			if r.Scaling != "yarn" || r.Base != c.base || r.Factor != c.u.Factor {
				t.Fatalf("scaling %s base %g factor %g, want yarn %g %g", r.Scaling, r.Base, r.Factor, c.base, c.u.Factor)
			}
			note := strings.Join(r.Notes, "; ")
			if c.wantOrig == 0 {
				if r.Orig != nil || r.BetaFast != nil || r.BetaSlow != nil {
					t.Errorf("original_max_positions %v, betas %v %v: want null (several settings reproduce the ramp)", orNull(r.Orig), orNull(r.BetaFast), orNull(r.BetaSlow))
				}
			} else if r.Orig == nil || *r.Orig != c.wantOrig || r.BetaFast == nil || *r.BetaFast != c.u.BetaFast || r.BetaSlow == nil || *r.BetaSlow != c.u.BetaSlow {
				t.Errorf("original_max_positions %v, betas %v %v: want %d, %g, %g (one setting reproduces the ramp); notes %q",
					orNull(r.Orig), orNull(r.BetaFast), orNull(r.BetaSlow), c.wantOrig, c.u.BetaFast, c.u.BetaSlow, note)
			}
			for _, s := range c.wantInNote {
				if !strings.Contains(note, s) {
					t.Errorf("the note does not say %q: %q", s, note)
				}
			}
		})
	}
}

// TestLlama3LengthsAreNotInTheGraph: llama3's rule reads the original
// length and the band factors only through original/low and original/high,
// so (8192, 1, 4) and (16384, 2, 8) compute the same frequencies: the fit
// reports the three null with the wavelengths and the settings in a note.
// The read-back of an extension accepts a rule with the same wavelengths
// and refuses one with others.
func TestLlama3LengthsAreNotInTheGraph(t *testing.T) {
	u := Rule{Method: rewrite.MethodLlama3, Factor: 8, Orig: 8192, Low: 1, High: 4, RotaryDim: 16, Base: 500000}
	omega, amp := ReferenceRoPE(u, u.Base, 16, 0)
	scaled, _ := ReferenceRoPE(Rule{Method: rewrite.MethodLlama3, Factor: 8, Orig: 16384, Low: 2, High: 8}, u.Base, 16, 0)
	if !slices.Equal(omega, scaled) {
		t.Fatalf("(16384, 2, 8) gives %v, (8192, 1, 4) %v", scaled, omega)
	}
	sigma := make([]float64, len(omega))
	for k := range sigma {
		sigma[k] = 1e-7
	}
	r := fitRoPE(omega, sigma, 16, amp, 1e-6, 0)
	if r.Scaling != "llama3" || r.Base != u.Base || r.Factor != u.Factor {
		t.Fatalf("scaling %s base %g factor %g, want llama3 %g %g", r.Scaling, r.Base, r.Factor, u.Base, u.Factor)
	}
	if r.Orig != nil || r.Low != nil || r.High != nil {
		t.Errorf("original_max_positions %v, low_freq_factor %v, high_freq_factor %v: want null", orNull(r.Orig), orNull(r.Low), orNull(r.High))
	}
	note := strings.Join(r.Notes, "; ")
	for _, s := range []string{"original_max_positions/low_freq_factor (here {8192} positions)", "original_max_positions/high_freq_factor ({2048})",
		"(8192, 1, 4)", "(16384, 2, 8)", "with the published factors 1 and 4, original_max_positions is 8192"} {
		if !strings.Contains(note, s) {
			t.Errorf("the note does not say %q: %q", s, note)
		}
	}
	p := &Params{Scaling: passes.Ptr("llama3"), Base: passes.Ptr(u.Base), Factor: passes.Ptr(u.Factor), RotaryDim: 16, llama3: r.Llama3}
	if !u.Equivalent(p) {
		t.Error("the read-back refuses the rule whose wavelengths the audit read")
	}
	other := u
	other.Orig = 4096
	if other.Equivalent(p) {
		t.Error("the read-back accepts (4096, 1, 4), whose wavelengths the audit did not read")
	}
}

func orNull[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
