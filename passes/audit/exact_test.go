package audit_test

import (
	"math"
	"slices"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestExactArithmetic checks what the evidence says about how each corpus
// model computes its sin and cos: a product of positions and constant
// frequencies (with the constant the model holds), frequencies recomputed
// from the positions (a program), or stored tables.
func TestExactArithmetic(t *testing.T) {
	want := map[string]string{
		"rope_llama": "angles", "rope_llama3": "angles", "rope_qwen2": "angles", "rope_kvcache": "angles",
		"rope_yarn": "angles", "rope_llama_fp16": "angles", "llama4_nope": "angles", "rope_ntk": "program",
		"rope_linear": "stored", "rope_neox": "stored", "rope_gptj": "stored",
		"sinusoidal_concat": "angles", "sinusoidal_interleaved_computed": "angles", "sinusoidal_interleaved_scatter": "angles",
		"sinusoidal_interleaved": "none", "sinusoidal_fairseq": "none", "sinusoidal_marian": "none",
	}
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range listed(t, man.Models, entryName, want) {
		w := want[e.Name]
		t.Run(e.Name, func(t *testing.T) {
			m := loadCorpus(t, e)
			r, c, err := audit.AuditModel(m, e.Name, passes.Options{})
			if err != nil {
				t.Fatal(err)
			}
			f := r.Findings[0]
			var a *probe.Angles
			var st *rope.StoredCosSin
			why := ""
			switch ev := f.Evidence.(type) {
			case *rope.Evidence:
				a, st, why = ev.Angles, ev.Stored, ev.ExactWhy
			case *absolute.TableEvidence:
				a, why = ev.Angles, ev.ExactWhy
			}
			got := "none"
			switch {
			case a != nil && a.Program != nil:
				got = "program"
			case a != nil:
				got = "angles"
			case st != nil:
				got = "stored"
			}
			if got != w {
				t.Fatalf("%s, want %s (%s)", got, w, why)
			}
			if a != nil && a.Program == nil {
				// The frequencies are the stored constant's values, bit for bit.
				k := probe.Const(c, a.FreqFrom)
				if k == nil {
					t.Fatalf("the frequencies' constant %q is not a constant", a.FreqFrom)
				}
				vals := k.Float64s()
				for i, x := range a.Freq {
					if !slices.Contains(vals, x) {
						t.Fatalf("frequency %d (%v) is not a value of %s", i, x, a.FreqFrom)
					}
				}
			}
			switch e.Name {
			case "rope_yarn":
				if a.ScaleFrom == "" || a.Scale != float64(float32(0.1*math.Log(4)+1)) {
					t.Errorf("the scale %v (%s), want the attention factor in float32", a.Scale, a.ScaleFrom)
				}
			case "rope_llama_fp16":
				if a.Type != graph.Float || a.Out != graph.Float16 {
					t.Errorf("computed in %v, applied in %v; want float32 then float16", a.Type, a.Out)
				}
			case "rope_ntk":
				if a.Program.Steps[0].Op != "max_position" {
					t.Errorf("the program starts with %s, want the largest position", a.Program.Steps[0].Op)
				}
			case "rope_linear":
				if st.Rows != 128 || st.Cos[0].Table == st.Sin[0].Table {
					t.Errorf("stored %d rows, cos in %s and sin in %s; want 128 rows of two tables", st.Rows, st.Cos[0].Table, st.Sin[0].Table)
				}
			case "rope_gptj":
				// One [sin | cos] table: sin in the first half of the columns.
				if st.Rows != 64 || st.Sin[0].Col != 0 || st.Cos[0].Col != 4 {
					t.Errorf("stored %d rows, cos column %d, sin column %d; want 64, 4, 0", st.Rows, st.Cos[0].Col, st.Sin[0].Col)
				}
			}
		})
	}
	// Go-built forms: fused RotaryEmbedding reads its caches' columns by
	// the op's contract; a table computed in a Loop body.
	synth := map[string]string{"llama_fused_ms": "stored", "llama_fused_onnx": "stored", "llama_cache_shared": "stored",
		"llama_opset18": "angles", "llama_local_function": "angles", "sinusoidal_loop": "angles"}
	for _, s := range testmodels.Synthetics() {
		w, ok := synth[s.Name]
		if !ok {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			r, _, err := audit.AuditModel(s.Build(), s.Name, passes.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := "none"
			switch ev := r.Findings[0].Evidence.(type) {
			case *rope.Evidence:
				if ev.Angles != nil {
					got = "angles"
				} else if ev.Stored != nil {
					got = "stored"
				}
			case *absolute.TableEvidence:
				if ev.Angles != nil {
					got = "angles"
					if ev.Angles.Out != graph.Float {
						t.Errorf("the encoding is %v, want float32 (the Loop's scan output)", ev.Angles.Out)
					}
				}
			}
			if got != w {
				t.Fatalf("%s, want %s", got, w)
			}
		})
		delete(synth, s.Name)
	}
	if len(synth) > 0 {
		t.Fatalf("models not built: %v", synth)
	}
}

// TestExtract runs the extracted subgraph of rope_llama's rotation with
// the executor: with q one at the first dimension of each pair, the
// rotated q holds the cos and sin the evidence measured, and the
// extracted model holds none of the network's weights.
func TestExtract(t *testing.T) {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(man.Models, func(e testmodels.Entry) bool { return e.Name == "rope_llama" })
	m := loadCorpus(t, man.Models[i])
	r, c, err := audit.AuditModel(m, "rope_llama", passes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev := r.Findings[0].Evidence.(*rope.Evidence)
	side := ev.Blocks[1].Q
	const n = 64
	shape, dt, err := probe.BoundShape(c, side.In, n)
	if err != nil || dt != graph.Float || len(shape) != 4 || shape[2] != n {
		t.Fatalf("q: %v %v %v", shape, dt, err)
	}
	q := make([]float32, shape[0]*shape[1]*shape[2]*shape[3])
	for k := 0; k < len(q)/shape[3]; k++ {
		for _, p := range ev.Pairs {
			q[k*shape[3]+p[0]] = 1
		}
	}
	x, err := probe.Extract(c, probe.ExtractSpec{Values: []string{side.Out}, Seq: n, Cuts: map[string]*kernels.Tensor{side.In: kernels.FromSlice(shape, q)}, Positions: ev.Positions})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range x.Model.Graph.Initializers {
		if v.Const.Len() > 64 {
			t.Errorf("the extracted model holds %s of %d values (a weight?)", v.Name, v.Const.Len())
		}
	}
	if len(x.Model.Graph.Outputs) != 1 || len(x.Given) != 1 {
		t.Fatalf("%d outputs, %d given inputs", len(x.Model.Graph.Outputs), len(x.Given))
	}
	s, err := kernels.NewSession(x.Model, kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Run(x.Inputs)
	if err != nil {
		t.Fatal(err)
	}
	o := out[x.Model.Graph.Outputs[0].Name].Float64s()
	d := shape[3]
	for pos := 0; pos < n; pos++ {
		row := o[pos*d : (pos+1)*d] // head 0
		for k, p := range ev.Pairs {
			if row[p[0]] != ev.Cos[pos][k] || row[p[1]] != ev.Sin[pos][k] {
				t.Fatalf("position %d pair %d: extracted (%v, %v), measured (%v, %v)", pos, k, row[p[0]], row[p[1]], ev.Cos[pos][k], ev.Sin[pos][k])
			}
		}
	}
	if _, err := probe.Extract(c, probe.ExtractSpec{Values: []string{"no such value"}, Seq: n}); err == nil {
		t.Error("extracting a value the model does not have succeeded")
	}
}
