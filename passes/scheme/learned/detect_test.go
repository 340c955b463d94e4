package learned_test

import (
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/audit"
	st "github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/scheme/learned"
)

// TestCorpus audits the corpus models whose golden reports have
// learned_absolute findings: each finding as the golden report has it.
func TestCorpus(t *testing.T) { st.CheckCorpus(t, learned.Name, audit.AuditModel) }

// TestForms: learned tables read in forms and with sizes the corpus does
// not have, each with the params the math gives.
func TestForms(t *testing.T) {
	cases := []struct {
		name string
		abs  func(e *st.Env, x *graph.Value) *graph.Value
		want map[string]any
	}{{
		// A [72, 32] table sliced from row 3 to 3 + S (Slice with a
		// computed end) and added before the embeddings.
		name: "slice_from_row_3",
		abs: func(e *st.Env, x *graph.Value) *graph.Value {
			end := e.Op("Unsqueeze", nil, e.Op("Add", nil, e.Seq, e.Int0(3)), e.Ints(0))
			pe := e.Op("Slice", nil, e.Weight(72, e.D), e.Ints(3), end, e.Ints(0))
			return e.Op("Add", nil, e.Op("Unsqueeze", nil, pe, e.Ints(0)), x)
		},
		want: map[string]any{"max_positions": 72, "dim": 32, "position_offset": 3},
	}, {
		// A [24, 32] table gathered at the position_ids input flattened
		// (through an Identity and a Reshape), the rows reshaped back to
		// [1, S, 32], as TF exports write it.
		name: "gather_position_ids_input",
		abs: func(e *st.Env, x *graph.Value) *graph.Value {
			pin := e.G.AddInput("position_ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
			ids := e.Op("Reshape", nil, e.Op("Identity", nil, pin), e.Ints(-1))
			pe := e.Op("Reshape", nil, e.Op("Gather", nil, e.Weight(24, e.D), ids), e.Ints(1, -1, int64(e.D)))
			return e.Op("Add", nil, x, pe)
		},
		want: map[string]any{"max_positions": 24, "dim": 32, "position_offset": 0},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := st.BuildExporterForm(st.ExporterForm{Name: c.name, Heads: 2, HD: 16, Abs: c.abs})
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, learned.Detect)
			f := st.Only(t, fs, trace)
			if f.Fused {
				t.Error("fused, want not")
			}
			st.WantParams(t, f, c.want)
		})
	}
}

// TestFixedLength: a static-shape export (input_ids [1, 7], as keras2onnx
// and exports for fixed-size accelerators write them) reads its position
// table at constant positions, which normalisation folds into the 7 rows
// read: max_positions is still the table's 10 rows, read through the
// folding.
func TestFixedLength(t *testing.T) {
	const rows, seq = 10, 7
	cases := []struct {
		name string
		read func(e *st.Env, table *graph.Value) *graph.Value
		want map[string]any
	}{{
		// keras2onnx: tf.slice(table, [0, 0], [7, -1]) with the length
		// fixed.
		name: "slice_constant_bounds",
		read: func(e *st.Env, table *graph.Value) *graph.Value {
			return e.Op("Slice", nil, table, e.Ints(0), e.Ints(seq), e.Ints(0))
		},
		want: map[string]any{"max_positions": rows, "dim": 32, "position_offset": 0},
	}, {
		// The positions 1..7 of a table whose row 0 is padding: a
		// constant index.
		name: "gather_constant_positions_from_1",
		read: func(e *st.Env, table *graph.Value) *graph.Value {
			return e.Op("Gather", nil, table, e.Ints(1, 2, 3, 4, 5, 6, 7))
		},
		want: map[string]any{"max_positions": rows, "dim": 32, "position_offset": 1},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := st.BuildExporterForm(st.ExporterForm{Name: c.name, Heads: 2, HD: 16, Abs: func(e *st.Env, x *graph.Value) *graph.Value {
				return e.Op("Add", nil, x, e.Op("Unsqueeze", nil, c.read(e, e.Weight(rows, e.D)), e.Ints(0)))
			}})
			for _, v := range m.Graph.Inputs {
				if v.Const == nil {
					v.Type = graph.TensorType(v.Type.ElemType(), graph.Dims(1, seq))
				}
			}
			st.Executes(t, m, seq)
			fs, trace := st.Detect(t, m, learned.Detect)
			st.WantParams(t, st.Only(t, fs, trace), c.want)
		})
	}
}

// TestNearMisses: tables added to the embeddings that are no position
// encoding give no finding, and the trace says why.
func TestNearMisses(t *testing.T) {
	cases := []struct {
		name   string
		abs    func(e *st.Env, x *graph.Value) *graph.Value
		reason string
	}{{
		// A token-type table read at type 0 for every position (Range(0,
		// S) times zero): the same row everywhere.
		name: "token_type_zero",
		abs: func(e *st.Env, x *graph.Value) *graph.Value {
			zeros := e.Op("Mul", nil, e.RangeS(), e.Int0(0))
			return e.Op("Add", nil, x, e.Op("Gather", nil, e.Weight(2, e.D), zeros))
		},
		reason: "the added value is the same at every position",
	}, {
		// The position table is a graph input: its rows are not in the
		// file.
		name: "table_given_as_input",
		abs: func(e *st.Env, x *graph.Value) *graph.Value {
			tb := e.G.AddInput("position_table", graph.TensorType(graph.Float, graph.Dims(64, int64(e.D))))
			return e.Op("Add", nil, x, e.Op("Gather", nil, tb, e.RangeS()))
		},
		reason: "the added value comes from parameters given as inputs",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := st.BuildExporterForm(st.ExporterForm{Name: c.name, Heads: 2, HD: 16, Abs: c.abs})
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, learned.Detect)
			st.WantMiss(t, fs, trace, "absolute", c.reason)
		})
	}
}

// TestAttentionTerms: constants added to q after its projection
// (Transformer-XL's per-head biases u, [heads, hd], added to q as [S, B,
// heads, hd] or here [B, S, heads, hd]: rows that are heads) are a term of
// the attention, not a table of positions added to the embeddings.
func TestAttentionTerms(t *testing.T) {
	m := st.BuildExporterForm(st.ExporterForm{Name: "per_head_bias_on_q", Heads: 2, HD: 16, Rope: func(e *st.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
		perm := []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}
		qu := e.Op("Add", nil, e.Op("Transpose", perm, q), e.Weight(2, 16)) // [B, S, H, hd] + u
		return e.Op("Transpose", perm, qu), k
	}})
	st.Executes(t, m, 6)
	fs, trace := st.Detect(t, m, learned.Detect)
	st.WantMiss(t, fs, trace, "absolute", "a term of the attention")
}
