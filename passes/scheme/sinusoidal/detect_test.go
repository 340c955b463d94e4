package sinusoidal_test

import (
	"math"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/audit"
	st "github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/scheme/sinusoidal"
)

// TestCorpus audits the corpus models whose golden reports have
// sinusoidal findings: each finding as the golden report has it.
func TestCorpus(t *testing.T) { st.CheckCorpus(t, sinusoidal.Name, audit.AuditModel) }

// table is a stored [n, d] sinusoid of base, [sin | cos] or interleaved,
// row r at position r - offset, the row pad zeroed (-1: none).
func table(n, d int, base float64, interleaved bool, offset, pad int) []float32 {
	v := make([]float32, n*d)
	for r := 0; r < n; r++ {
		if r == pad {
			continue
		}
		for i := 0; i < d/2; i++ {
			a := float64(r-offset) * math.Pow(base, -float64(i)/float64(d/2))
			s, c := float32(math.Sin(a)), float32(math.Cos(a))
			if interleaved {
				v[r*d+2*i], v[r*d+2*i+1] = s, c
			} else {
				v[r*d+i], v[r*d+d/2+i] = s, c
			}
		}
	}
	return v
}

// TestForms: sinusoids written in forms and with values the corpus does
// not have, each with the params the math gives.
func TestForms(t *testing.T) {
	cases := []struct {
		name string
		abs  func(e *st.Env, x *graph.Value) *graph.Value
		want map[string]any
	}{{
		// Interleaved, base 1000, computed: sin and cos of the positions
		// times the frequencies stacked on a new last axis and reshaped.
		name: "interleaved_base_1000_stacked",
		abs: func(e *st.Env, x *graph.Value) *graph.Value {
			inv := make([]float32, e.D/2)
			for i := range inv {
				inv[i] = float32(math.Pow(1000, -2*float64(i)/float64(e.D)))
			}
			ang := e.Op("Mul", nil, e.Op("Unsqueeze", nil, e.ToFloat(e.RangeS()), e.Ints(-1)), e.Floats([]int64{1, int64(e.D / 2)}, inv))
			sc := e.Op("Concat", e.Axis(-1), e.Op("Unsqueeze", nil, e.Op("Sin", nil, ang), e.Ints(-1)), e.Op("Unsqueeze", nil, e.Op("Cos", nil, ang), e.Ints(-1)))
			pe := e.Op("Reshape", nil, sc, e.Ints(-1, int64(e.D)))
			return e.Op("Add", nil, e.Op("Unsqueeze", nil, pe, e.Ints(0)), x)
		},
		want: map[string]any{"layout": "interleaved", "base": 1000.0, "dim": 32, "computed": true, "freq_denominator": "d/2", "max_positions": nil, "position_offset": 0},
	}, {
		// A stored [40, 32] [sin | cos] table of base 500 whose row 1 is
		// zero (the padding row) and whose positions start at 2, gathered
		// at Range(0, S) + 2.
		name: "table_padding_row_offset_2",
		abs: func(e *st.Env, x *graph.Value) *graph.Value {
			tb := e.Floats([]int64{40, int64(e.D)}, table(40, e.D, 500, false, 0, 1))
			pos := e.Op("Add", nil, e.RangeS(), e.Int0(2))
			return e.Op("Add", nil, x, e.Op("Gather", nil, tb, pos))
		},
		want: map[string]any{"layout": "concat_sin_cos", "base": 500.0, "dim": 32, "computed": false, "freq_denominator": "d/2", "max_positions": 40, "position_offset": 2, "padding_idx": 1},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := st.BuildExporterForm(st.ExporterForm{Name: c.name, Heads: 2, HD: 16, Abs: c.abs})
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, sinusoidal.Detect)
			f := st.Only(t, fs, trace)
			if f.Fused {
				t.Error("fused, want not")
			}
			st.WantParams(t, f, c.want)
		})
	}
}

// TestNearMisses: values added to the embeddings that are sinusoids but
// no position encoding give no finding, and the trace says why.
func TestNearMisses(t *testing.T) {
	cases := []struct {
		name   string
		abs    func(e *st.Env, x *graph.Value) *graph.Value
		reason string
	}{{
		// The frequencies are a graph input: the sinusoid is not in the file.
		name: "frequencies_given_as_input",
		abs: func(e *st.Env, x *graph.Value) *graph.Value {
			inv := e.G.AddInput("inv_freq", graph.TensorType(graph.Float, graph.Dims(1, int64(e.D/2))))
			ang := e.Op("Mul", nil, e.Op("Unsqueeze", nil, e.ToFloat(e.RangeS()), e.Ints(-1)), inv)
			return e.Op("Add", nil, x, e.Op("Concat", e.Axis(-1), e.Op("Sin", nil, ang), e.Op("Cos", nil, ang)))
		},
		reason: "the added value comes from parameters given as inputs",
	}, {
		// The sinusoid is taken at position 0 for every token (the
		// positions multiplied by zero): the same row everywhere.
		name: "same_row_at_every_position",
		abs: func(e *st.Env, x *graph.Value) *graph.Value {
			pos := e.Op("Mul", nil, e.ToFloat(e.RangeS()), e.F0(0))
			ang := e.Op("Mul", nil, e.Op("Unsqueeze", nil, pos, e.Ints(-1)), e.Floats([]int64{1, int64(e.D / 2)}, st.InvFreq(10000, e.D)))
			return e.Op("Add", nil, x, e.Op("Concat", e.Axis(-1), e.Op("Sin", nil, ang), e.Op("Cos", nil, ang)))
		},
		reason: "the added value is the same at every position",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := st.BuildExporterForm(st.ExporterForm{Name: c.name, Heads: 2, HD: 16, Abs: c.abs})
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, sinusoidal.Detect)
			st.WantMiss(t, fs, trace, "absolute", c.reason)
		})
	}
}
