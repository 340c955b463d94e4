package audit_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/scheme/learned"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
	"github.com/onnxpe/onnxpe/passes/scheme/sinusoidal"
	"github.com/onnxpe/onnxpe/passes/scheme/t5"
	"github.com/onnxpe/onnxpe/testmodels"
)

// auditCorpus audits one corpus model.
func auditCorpus(t *testing.T, name string) *passes.Report {
	t.Helper()
	m, err := graph.Load(filepath.Join(testmodels.Dir(), "models", name, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := audit.AuditModel(m, name, passes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func finding(t *testing.T, r *passes.Report, scheme string) *passes.Finding {
	t.Helper()
	for _, f := range r.Findings {
		if f.Scheme == scheme {
			return f
		}
	}
	t.Fatalf("%s: no %s finding", r.Model, scheme)
	return nil
}

// The cos/sin rows of the RoPE evidence are what the model applies: the
// rotation by the measured frequency at each position, times the
// amplitude, from the right first position.
func TestRoPEEvidenceCosSin(t *testing.T) {
	for _, tc := range []struct {
		model      string
		rows       int
		start      int
		amp        float64
		tol        float64
		firstPairs int // pairs compared (all when 0)
	}{
		{"rope_llama", 64, 0, 1, 1e-5, 0},
		{"rope_yarn", 64, 0, 1 + 0.1*math.Log(4), 1e-5, 0},
		{"rope_gptj", 64, 0, 1, 1e-5, 0},    // a stored [64, 8] table
		{"rope_linear", 64, 0, 1, 1e-5, 0},  // a stored [128, 16] cache sliced to the length
		{"rope_ntk", 16, 0, 1, 1e-5, 0},     // dynamic: 64 positions scale the frequencies; the measurement's length
		{"rope_kvcache", 64, 0, 1, 1e-4, 0}, // positions from the cache length, sampled with an empty cache
		{"rope_llama_fp16", 64, 0, 1, 2e-3, 0},
	} {
		t.Run(tc.model, func(t *testing.T) {
			f := finding(t, auditCorpus(t, tc.model), rope.Name)
			ev := f.Evidence.(*rope.Evidence)
			if len(ev.Cos) != tc.rows || len(ev.Sin) != tc.rows || ev.Start != tc.start {
				t.Fatalf("%d cos rows, %d sin rows from position %d; want %d from %d", len(ev.Cos), len(ev.Sin), ev.Start, tc.rows, tc.start)
			}
			if math.Abs(ev.Amplitude-tc.amp) > 1e-5 {
				t.Errorf("amplitude %g, want %g", ev.Amplitude, tc.amp)
			}
			for i := range ev.Cos {
				if len(ev.Cos[i]) != len(ev.Pairs) || len(ev.Sin[i]) != len(ev.Pairs) {
					t.Fatalf("row %d has %d/%d pairs, want %d", i, len(ev.Cos[i]), len(ev.Sin[i]), len(ev.Pairs))
				}
				pos := float64(ev.Start + i)
				for k, om := range ev.InvFreq {
					c, s := tc.amp*math.Cos(om*pos), tc.amp*math.Sin(om*pos)
					if math.Abs(ev.Cos[i][k]-c) > tc.tol*(1+om*pos) || math.Abs(ev.Sin[i][k]-s) > tc.tol*(1+om*pos) {
						t.Fatalf("position %d pair %d: cos, sin = %g, %g; the rotation by %g gives %g, %g", int(pos), k, ev.Cos[i][k], ev.Sin[i][k], om, c, s)
					}
				}
			}
		})
	}
}

// The absolute evidence samples 64 positions where the model takes them,
// beginning with the detection's rows.
func TestTableEvidenceSample(t *testing.T) {
	for _, tc := range []struct {
		model, scheme string
		rows, dim     int
	}{
		{"sinusoidal_interleaved_computed", sinusoidal.Name, 64, 32},
		{"sinusoidal_fairseq", sinusoidal.Name, 64, 32},
		{"learned_gpt2", learned.Name, 64, 32},
		{"learned_vit", learned.Name, 17, 32}, // the whole table is added
	} {
		t.Run(tc.model, func(t *testing.T) {
			ev := finding(t, auditCorpus(t, tc.model), tc.scheme).Evidence.(*absolute.TableEvidence)
			if len(ev.Sample) != tc.rows {
				t.Fatalf("%d sample rows, want %d", len(ev.Sample), tc.rows)
			}
			for i, r := range ev.Sample {
				if len(r) != tc.dim {
					t.Fatalf("row %d has %d values, want %d", i, len(r), tc.dim)
				}
				if i < len(ev.Rows0) {
					for j := range r {
						if r[j] != ev.Rows0[i][j] {
							t.Fatalf("sample row %d differs from the detection's", i)
						}
					}
				}
			}
			if tc.scheme == sinusoidal.Name {
				// Row p of a sinusoidal encoding lies on the circles of
				// the measured frequencies: the pairs (sin, cos) of row
				// 63 have unit norm.
				last := ev.Sample[len(ev.Sample)-1]
				var ss float64
				for _, x := range last {
					ss += x * x
				}
				if math.Abs(ss-float64(tc.dim)/2) > 1e-3 {
					t.Errorf("row %d has squared norm %g, want %d", len(ev.Sample)-1, ss, tc.dim/2)
				}
			}
		})
	}
}

// LongRoPE's rows at 64 positions use the short factors, as measured.
func TestRoPEEvidenceLongRoPE(t *testing.T) {
	m, err := graph.LoadWith(filepath.Join(testmodels.RealModelsDir(), "ee_phi35_mini_longrope_noweights", "model.onnx"), graph.LoadOptions{AllowMissingExternal: true})
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := audit.AuditModel(m, "phi35", passes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev := finding(t, r, rope.Name).Evidence.(*rope.Evidence)
	if len(ev.Cos) != 64 || ev.Start != 0 || len(ev.InvFreqLong) != len(ev.InvFreq) {
		t.Fatalf("%d rows from %d, %d long frequencies for %d pairs", len(ev.Cos), ev.Start, len(ev.InvFreqLong), len(ev.InvFreq))
	}
	for k := range ev.InvFreq {
		if !(ev.InvFreqLong[k] < ev.InvFreq[k]*(1+1e-6)) {
			t.Errorf("pair %d: the long frequency %g is above the short one %g", k, ev.InvFreqLong[k], ev.InvFreq[k])
		}
	}
	om, a := ev.InvFreq[1], ev.Amplitude
	if c := a * math.Cos(om*63); math.Abs(ev.Cos[63][1]-c) > 1e-3 {
		t.Errorf("cos at 63, pair 1 = %g; the short frequency gives %g", ev.Cos[63][1], c)
	}
}

func TestT5EvidenceWeights(t *testing.T) {
	ev := finding(t, auditCorpus(t, "t5_encoder"), t5.Name).Evidence.(*t5.Evidence)
	if len(ev.Weights) != 32 || len(ev.Weights[0]) != 4 {
		t.Fatalf("weights %dx%d, want 32x4", len(ev.Weights), len(ev.Weights[0]))
	}
	distinct := map[float64]bool{}
	for _, r := range ev.Weights {
		for _, x := range r {
			distinct[x] = true
		}
	}
	if len(distinct) < 100 {
		t.Errorf("only %d distinct weights in a trained-like 32x4 table", len(distinct))
	}
}
