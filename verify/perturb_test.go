package verify_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/onnxpe/onnxpe/verify"
)

// constTensor is a constant of a model: an initializer or a Constant node.
type constTensor struct {
	name string
	t    *graph.Tensor
	set  func(*graph.Tensor)
}

// constants lists the float32 constants of m's main graph.
func constants(m *graph.Model) []constTensor {
	var out []constTensor
	for _, v := range m.Graph.Initializers {
		if v.Const.DataType() == graph.Float {
			v := v
			out = append(out, constTensor{v.Name, v.Const, func(t *graph.Tensor) { v.Const = t }})
		}
	}
	for _, n := range m.Graph.Nodes() {
		if n.OpType != "Constant" {
			continue
		}
		t, err := graph.ConstantNodeValue(n)
		if err != nil || t.DataType() != graph.Float {
			continue
		}
		n := n
		out = append(out, constTensor{n.Output(0).Name, t, func(t *graph.Tensor) { n.SetAttr(graph.TensorAttr("value", t)) }})
	}
	return out
}

// editConst finds the first float32 constant of m for which pick is true
// and replaces it by a copy edited by edit; it returns the constant's name.
func editConst(t *testing.T, m *graph.Model, pick func(name string, dims []int64, v []float32) bool, edit func(v []float32)) string {
	t.Helper()
	for _, c := range constants(m) {
		d, err := c.t.Data()
		if err != nil {
			t.Fatal(err)
		}
		v := slices.Clone(d.([]float32))
		if !pick(c.name, c.t.Dims(), v) {
			continue
		}
		edit(v)
		nt, err := graph.NewTensor(c.t.Name(), graph.Float, c.t.Dims(), v)
		if err != nil {
			t.Fatal(err)
		}
		c.set(nt)
		return c.name
	}
	t.Fatal("no constant to perturb")
	return ""
}

func dimsAre(dims []int64, want ...int64) bool { return slices.Equal(dims, want) }

// firstDifference returns the first set result that is not equal and its
// first differing output.
func firstDifference(t *testing.T, r *verify.Report) (*verify.SetResult, *verify.OutputDiff) {
	t.Helper()
	for i := range r.Sets {
		s := &r.Sets[i]
		if s.Equal {
			continue
		}
		if s.Error != "" {
			t.Fatalf("set %s: %s", s.Name, s.Error)
		}
		for j := range s.Outputs {
			if !s.Outputs[j].Equal {
				return s, &s.Outputs[j]
			}
		}
	}
	t.Fatalf("no difference found: %s", r.Summary)
	return nil, nil
}

func setResult(t *testing.T, r *verify.Report, name string) *verify.SetResult {
	t.Helper()
	for i := range r.Sets {
		if r.Sets[i].Name == name {
			return &r.Sets[i]
		}
	}
	t.Fatalf("no set %s in %s", name, r.Summary)
	return nil
}

// TestDefaultSweepCatchesPerturbations perturbs corpus models (and the
// Go-built Llama) the way a wrong rewrite would, and checks that the
// default sweep, with no option, reports them as not equal at the right
// output and sequence position.
func TestDefaultSweepCatchesPerturbations(t *testing.T) {
	type check struct {
		set   string // the set where the difference shows first
		first int    // its first differing position (-1: any > 0, -2: any)
		worst int    // the position of the worst element (-1: not checked)
		equal []string
	}
	cases := []struct {
		name  string
		model func(t *testing.T) (a, b *graph.Model)
		want  check
	}{
		{"cos cache entry at position 50 (GPT-NeoX cache [1,1,64,8])", func(t *testing.T) (*graph.Model, *graph.Model) {
			e := entry(t, "rope_neox")
			a, b := loadModel(t, e.ModelPath()), loadModel(t, e.ModelPath())
			editConst(t, b, func(_ string, d []int64, v []float32) bool { return dimsAre(d, 1, 1, 64, 8) && v[0] == 1 },
				func(v []float32) { v[50*8+1] += 1e-3 })
			return a, b
		}, check{set: "long", first: 50, worst: -1, equal: []string{"token", "short"}}},
		{"cos cache entry at position 50 (Llama linear scaling cache [128,16])", func(t *testing.T) (*graph.Model, *graph.Model) {
			e := entry(t, "rope_linear")
			a, b := loadModel(t, e.ModelPath()), loadModel(t, e.ModelPath())
			editConst(t, b, func(_ string, d []int64, v []float32) bool { return dimsAre(d, 128, 16) && v[0] == 1 },
				func(v []float32) { v[50*16+3] += 1e-3 })
			return a, b
		}, check{set: "long", first: 50, worst: -1, equal: []string{"token", "short"}}},
		{"interleaved flipped to half-split (com.microsoft RotaryEmbedding)", func(t *testing.T) (*graph.Model, *graph.Model) {
			return fusedLlama(t, testmodels.RopeFusedMS)
		}, check{set: "short", first: 1, worst: -1, equal: []string{"token"}}},
		{"interleaved flipped to half-split (ONNX RotaryEmbedding, opset 23)", func(t *testing.T) (*graph.Model, *graph.Model) {
			return fusedLlama(t, testmodels.RopeFusedONNX)
		}, check{set: "short", first: 1, worst: -1, equal: []string{"token"}}},
		{"one ALiBi slope (BLOOM)", func(t *testing.T) (*graph.Model, *graph.Model) {
			e := entry(t, "alibi_bloom")
			a, b := loadModel(t, e.ModelPath()), loadModel(t, e.ModelPath())
			editConst(t, b, func(_ string, d []int64, v []float32) bool { return dimsAre(d, 6, 1) && v[0] == 0.25 },
				func(v []float32) { v[3] += 1e-3 })
			return a, b
		}, check{set: "short", first: 1, worst: -1, equal: []string{"token"}}},
		{"one ALiBi slope (MPT stored bias)", func(t *testing.T) (*graph.Model, *graph.Model) {
			e := entry(t, "alibi_mpt")
			a, b := loadModel(t, e.ModelPath()), loadModel(t, e.ModelPath())
			editConst(t, b, func(_ string, d []int64, v []float32) bool { return dimsAre(d, 8, 1, 32) },
				func(v []float32) {
					for j := 0; j < 32; j++ { // head 5: slope * (j - 31), slope scaled by 1.01
						v[5*32+j] *= 1.01
					}
				})
			return a, b
		}, check{set: "short", first: 1, worst: -1, equal: []string{"token"}}},
		{"last row of a learned position table (GPT-2 wpe)", func(t *testing.T) (*graph.Model, *graph.Model) {
			e := entry(t, "learned_gpt2")
			a, b := loadModel(t, e.ModelPath()), loadModel(t, e.ModelPath())
			editConst(t, b, func(n string, d []int64, _ []float32) bool { return n == "wpe.weight" && dimsAre(d, 64, 32) },
				func(v []float32) { alternate(v[63*32 : 64*32]) })
			return a, b
		}, check{set: "long", first: 63, worst: 63, equal: []string{"token", "short"}}},
		{"last row of a learned position table (BERT)", func(t *testing.T) (*graph.Model, *graph.Model) {
			e := entry(t, "learned_bert")
			a, b := loadModel(t, e.ModelPath()), loadModel(t, e.ModelPath())
			editConst(t, b, func(n string, d []int64, _ []float32) bool {
				return strings.Contains(n, "position_embeddings") && dimsAre(d, 64, 32)
			}, func(v []float32) { alternate(v[63*32 : 64*32]) })
			return a, b
			// A bidirectional encoder: every position sees position 63,
			// which shows the largest difference.
		}, check{set: "long", first: -2, worst: 63, equal: []string{"token", "short"}}},
		{"sinusoidal base 10000 -> 10001 (computed)", func(t *testing.T) (*graph.Model, *graph.Model) {
			e := entry(t, "sinusoidal_interleaved_computed")
			a, b := loadModel(t, e.ModelPath()), loadModel(t, e.ModelPath())
			editConst(t, b, func(_ string, d []int64, v []float32) bool {
				return dimsAre(d, 16) && close(v, divTerm(10000, 32), 3e-7)
			}, func(v []float32) { copy(v, divTerm(10001, 32)) })
			return a, b
		}, check{set: "long", first: -1, worst: -1, equal: []string{"token"}}},
		{"sinusoidal base 10000 -> 10001 (stored table [1,256,32])", func(t *testing.T) (*graph.Model, *graph.Model) {
			e := entry(t, "sinusoidal_interleaved")
			a, b := loadModel(t, e.ModelPath()), loadModel(t, e.ModelPath())
			editConst(t, b, func(_ string, d []int64, v []float32) bool {
				if !dimsAre(d, 1, 256, 32) {
					return false
				}
				// The table must be what the formula gives for base 10000.
				w := sinTable(10000, 256, 32)
				for i := range v {
					if math.Abs(float64(v[i]-w[i])) > 2e-6 {
						t.Fatalf("the stored table differs from the formula at %d: %v vs %v", i, v[i], w[i])
					}
				}
				return true
			}, func(v []float32) { copy(v, sinTable(10001, 256, 32)) })
			return a, b
		}, check{set: "long", first: -1, worst: -1, equal: []string{"token"}}},
	}
	for _, c := range cases {
		// Without hints (verify's own analysis), and with the audit's
		// findings as hints (what the command does).
		for _, withAudit := range []bool{false, true} {
			name := c.name
			if withAudit {
				name += " with the audit's hints"
			}
			t.Run(name, func(t *testing.T) {
				a, b := c.model(t)
				var h verify.Hints
				if withAudit {
					var err error
					if h, err = verify.AuditHints(a); err != nil {
						t.Fatal(err)
					}
				}
				r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1, Hints: h})
				if err != nil {
					t.Fatal(err)
				}
				if r.Equal {
					t.Fatalf("reported equal: %s", r.Summary)
				}
				set, out := firstDifference(t, r)
				t.Logf("%s", r.Summary)
				if set.Name != c.want.set {
					t.Errorf("first difference in set %s, want %s", set.Name, c.want.set)
				}
				if want := a.Graph.Outputs[0].Name; out.Name != want {
					t.Errorf("differing output %s, want %s", out.Name, want)
				}
				if out.FirstMismatch == nil || out.FirstMismatch.Position == nil {
					t.Fatalf("no position for the first mismatch")
				}
				got := *out.FirstMismatch.Position
				switch {
				case c.want.first >= 0 && got != c.want.first:
					t.Errorf("first mismatch at position %d, want %d", got, c.want.first)
				case c.want.first == -1 && got < 1:
					t.Errorf("first mismatch at position %d: position 0 has angle 0 whatever the base", got)
				}
				if w := out.Worst; w == nil || w.Position == nil || *w.Position < got {
					t.Errorf("worst element %+v before the first mismatch %d", w, got)
				} else if c.want.worst >= 0 && *w.Position != c.want.worst {
					t.Errorf("worst element at position %d, want %d", *w.Position, c.want.worst)
				}
				if !strings.Contains(r.Summary, "output "+out.Name) || !strings.Contains(r.Summary, fmt.Sprintf("from position %d", got)) {
					t.Errorf("summary does not name the output and position: %s", r.Summary)
				}
				for _, name := range c.want.equal {
					if s := setResult(t, r, name); !s.Equal {
						t.Errorf("set %s differs; the perturbation is out of its reach", name)
					}
				}
			})
		}
	}
}

// alternate adds +1e-3 and -1e-3 to alternate elements (a change that
// a LayerNorm after the addition does not cancel, as it would a shift).
func alternate(v []float32) {
	for j := range v {
		v[j] += float32(1e-3 * float64(1-2*(j%2)))
	}
}

// close reports whether a and b agree within a relative error rel.
func close(a, b []float32, rel float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > rel*math.Abs(float64(b[i])) {
			return false
		}
	}
	return true
}

// TestEveryCosCacheColumnAtPosition50 perturbs each column of the cos
// caches of rope_neox and rope_linear at position 50 by 1e-3, one at a
// time: the default sweep catches each, from position 50.
func TestEveryCosCacheColumnAtPosition50(t *testing.T) {
	for _, c := range []struct {
		model string
		dims  []int64
	}{{"rope_neox", []int64{1, 1, 64, 8}}, {"rope_linear", []int64{128, 16}}} {
		e := entry(t, c.model)
		a := loadModel(t, e.ModelPath())
		cols := int(c.dims[len(c.dims)-1])
		for col := 0; col < cols; col++ {
			b := loadModel(t, e.ModelPath())
			editConst(t, b, func(_ string, d []int64, v []float32) bool { return dimsAre(d, c.dims...) && v[0] == 1 },
				func(v []float32) { v[50*cols+col] += 1e-3 })
			r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if r.Equal {
				t.Errorf("%s column %d: reported equal", c.model, col)
				continue
			}
			_, out := firstDifference(t, r)
			if p := out.FirstMismatch.Position; p == nil || *p != 50 {
				t.Errorf("%s column %d: first mismatch at %v, want position 50", c.model, col, p)
			}
		}
	}
}

// fusedLlamaPair is the com.microsoft RotaryEmbedding Llama, interleaved
// (A) and half-split (B).
func fusedLlamaPair(t *testing.T) (*graph.Model, *graph.Model) {
	return fusedLlama(t, testmodels.RopeFusedMS)
}

// fusedLlama builds the Go Llama with fused RotaryEmbedding nodes, as A
// with interleaved=1 and as B with interleaved=0 (half-split).
func fusedLlama(t *testing.T, form testmodels.RopeForm) (*graph.Model, *graph.Model) {
	cfg := testmodels.DefaultLlama
	cfg.RoPE = form
	if form == testmodels.RopeFusedONNX {
		cfg.Opset = 23
	}
	set := func(m *graph.Model, v int64) *graph.Model {
		n := 0
		for _, node := range m.Graph.Nodes() {
			if node.OpType == "RotaryEmbedding" {
				node.SetAttr(graph.IntAttr("interleaved", v))
				n++
			}
		}
		if n == 0 {
			t.Fatal("no RotaryEmbedding node")
		}
		return m
	}
	return set(testmodels.Llama(cfg), 1), set(testmodels.Llama(cfg), 0)
}

// divTerm is the Annotated Transformer's exp(arange(0, d, 2) * -(ln(base)/d))
// in float32.
func divTerm(base float64, d int) []float32 {
	out := make([]float32, d/2)
	k := float32(-math.Log(base) / float64(d))
	for i := range out {
		out[i] = float32(math.Exp(float64(float32(2*i) * k)))
	}
	return out
}

// sinTable is the Annotated Transformer's pe buffer [1, rows, d]: even
// columns sin(p * div), odd columns cos(p * div), in float32.
func sinTable(base float64, rows, d int) []float32 {
	div := divTerm(base, d)
	out := make([]float32, rows*d)
	for p := 0; p < rows; p++ {
		for i, f := range div {
			x := float64(float32(p) * f)
			out[p*d+2*i] = float32(math.Sin(x))
			out[p*d+2*i+1] = float32(math.Cos(x))
		}
	}
	return out
}
