package rope

import (
	"strings"
	"testing"

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

func orNull[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
