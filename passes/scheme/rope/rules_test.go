package rope

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/testmodels"
	"math"
	"slices"
	"testing"
)

func plainFreqs(base float64, d int) []float64 {
	out := make([]float64, d/2)
	for k := range out {
		out[k] = math.Pow(base, -2*float64(k)/float64(d))
	}
	return out
}

// TestRoPERulesAgainstReference: the rules the extension applies to a
// model's frequencies give, on the plain frequencies of a base, what the
// separate transcription of Hugging Face's functions gives.
func TestRoPERulesAgainstReference(t *testing.T) {
	rules := []Rule{
		{Method: rewrite.MethodLinear, Factor: 4},
		{Method: rewrite.MethodLinear, Factor: 2.5},
		{Method: rewrite.MethodNTK, Factor: 4},
		{Method: rewrite.MethodNTK, Factor: 8},
		{Method: rewrite.MethodDynamicNTK, Factor: 4, Orig: 32},
		{Method: rewrite.MethodDynamicNTK, Factor: 2, Orig: 2048},
		{Method: rewrite.MethodYaRN, Factor: 4, Orig: 32, BetaFast: 32, BetaSlow: 1},
		{Method: rewrite.MethodYaRN, Factor: 4, Orig: 4096, BetaFast: 32, BetaSlow: 1},
		{Method: rewrite.MethodYaRN, Factor: 16, Orig: 2048, BetaFast: 16, BetaSlow: 2},
		{Method: rewrite.MethodLlama3, Factor: 8, Orig: 8192, Low: 1, High: 4},
		{Method: rewrite.MethodLlama3, Factor: 4, Orig: 32, Low: 1, High: 4},
		{Method: rewrite.MethodLlama3, Factor: 4, Orig: 64, Low: 2, High: 8},
	}
	for _, cfg := range []struct {
		base float64
		d    int
	}{{10000, 16}, {500000, 128}, {10000, 8}} {
		omega := plainFreqs(cfg.base, cfg.d)
		for _, u := range rules {
			u.Base, u.RotaryDim = cfg.base, cfg.d
			if u.Method == rewrite.MethodYaRN {
				u.AttentionFactor = 0.1*math.Log(u.Factor) + 1
			}
			for _, L := range []int{1, u.Orig, 2 * u.Orig, 3*u.Orig + 5} {
				got := u.Frequencies(omega, L)
				want, amp := ReferenceRoPE(u, cfg.base, cfg.d, L)
				for k := range want {
					if math.Abs(got[k]/want[k]-1) > 1e-12 {
						t.Fatalf("%s base %g d %d L %d: pair %d: %.17g, reference %.17g", u.String(), cfg.base, cfg.d, L, k, got[k], want[k])
					}
				}
				if amp != u.Amplitude() {
					t.Fatalf("%s: amplitude %g, reference %g", u.String(), u.Amplitude(), amp)
				}
			}
		}
	}
	// Dynamic NTK at the original length and below is plain RoPE.
	u := Rule{Method: rewrite.MethodDynamicNTK, Factor: 4, Orig: 32, RotaryDim: 16}
	if !slices.Equal(u.Frequencies(plainFreqs(1e4, 16), 32), plainFreqs(1e4, 16)) {
		t.Fatal("dynamic NTK changes the frequencies at the original length")
	}
}

// TestReferenceRoPEMatchesHF: the reference formulas reproduce the
// frequencies Hugging Face transformers exported into the corpus models
// (rope_llama3: llama3 factor 8 of base 500000; rope_yarn: yarn factor 4
// from 4096; rope_linear: linear 2, read from its cos/sin tables).
func TestReferenceRoPEMatchesHF(t *testing.T) {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		u    Rule
		base float64
		tol  float64
	}{
		"rope_llama3": {Rule{Method: rewrite.MethodLlama3, Factor: 8, Orig: 8192, Low: 1, High: 4}, 500000, 1e-6},
		"rope_yarn":   {Rule{Method: rewrite.MethodYaRN, Factor: 4, Orig: 4096, BetaFast: 32, BetaSlow: 1}, 10000, 1e-6},
		"rope_linear": {Rule{Method: rewrite.MethodLinear, Factor: 2}, 10000, 1e-5},
	}
	done := 0
	for _, e := range man.Models {
		c, ok := cases[e.Name]
		if !ok {
			continue
		}
		done++
		m, err := graph.Load(e.ModelPath())
		if err != nil {
			t.Fatal(err)
		}
		ctx, err := passes.Run(m, passes.Options{}, Detect)
		if err != nil {
			t.Fatal(err)
		}
		ev := passes.Result(ctx, Detect)[0].Evidence.(*Evidence)
		got := ev.InvFreq
		if ev.Angles != nil && ev.Angles.Freq != nil {
			got = ev.Angles.Freq
		}
		want, amp := ReferenceRoPE(c.u, c.base, 16, 0)
		for k := range want {
			if math.Abs(got[k]/want[k]-1) > c.tol {
				t.Errorf("%s: pair %d: the model has %.9g, the reference %.9g", e.Name, k, got[k], want[k])
			}
		}
		if math.Abs(ev.Amplitude-amp) > 1e-6 {
			t.Errorf("%s: amplitude %.9g, the reference %.9g", e.Name, ev.Amplitude, amp)
		}
	}
	if done != len(cases) {
		t.Fatalf("%d of %d corpus models found", done, len(cases))
	}
}
