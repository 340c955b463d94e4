package rope

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// StoredCosSin says where stored tables hold the cos and sin a rotation
// applies, for RoPE read from cos/sin caches: per pair, the table and
// column of its cos and of its sin.
type StoredCosSin struct {
	Cos, Sin []TableColumn
	// Rows is the number of positions the tables hold (from Row0 on).
	Rows int
	// Out is the element type of the cos and sin as applied (a table
	// stored in float32 and cast to float16 after the gather).
	Out graph.DataType
}

// TableColumn is one column of a stored table: the table (an original
// value holding a constant, read as [rows, columns] with every axis but
// the last one flattened into rows), the column, and the row holding
// position 0.
type TableColumn struct {
	Table string
	Col   int
	Row0  int
}

// storedCosSin finds the stored tables whose columns hold the measured cos
// and sin of every pair (row i at position start+i) among the constants
// of the cone of vs.
func storedCosSin(w *work.Work, vs []*graph.Value, start int, cos, sin [][]float64, out graph.DataType) (*StoredCosSin, string) {
	if len(cos) == 0 || start < 0 {
		return nil, "no measured rows to find the stored cos/sin by"
	}
	type table struct {
		name       string
		rows, cols int
		v          []float64
	}
	var tables []table
	seen := map[*graph.Value]bool{}
	for _, n := range probe.DeepCone(w, vs...) {
		for _, in := range n.Inputs() {
			if in == nil || seen[in] || !w.IsConst(in) || !work.IsFloatType(w.ElemType(in)) {
				continue
			}
			seen[in] = true
			t := w.Const(in)
			if t == nil || t.Rank() < 2 {
				continue
			}
			cols := t.Shape[t.Rank()-1]
			rows := t.Len() / max(cols, 1)
			if rows < start+len(cos) {
				continue
			}
			tables = append(tables, table{w.Name(in), rows, cols, t.Float64s()})
		}
	}
	find := func(want [][]float64, k int) (TableColumn, bool) {
		for _, t := range tables {
		col:
			for c := 0; c < t.cols; c++ {
				for i := range want {
					x := graph.RoundTo(out, t.v[(start+i)*t.cols+c])
					if math.Abs(x-want[i][k]) > 1e-6*math.Max(1, math.Abs(x)) {
						continue col
					}
				}
				return TableColumn{Table: t.name, Col: c, Row0: 0}, true
			}
		}
		return TableColumn{}, false
	}
	st := &StoredCosSin{Out: out, Rows: math.MaxInt}
	for k := range cos[0] {
		c, ok1 := find(cos, k)
		s, ok2 := find(sin, k)
		if !ok1 || !ok2 {
			return nil, fmt.Sprintf("no column of a stored table holds the cos and sin of pair %d", k)
		}
		st.Cos, st.Sin = append(st.Cos, c), append(st.Sin, s)
		for _, t := range tables {
			if t.name == c.Table || t.name == s.Table {
				st.Rows = min(st.Rows, t.rows)
			}
		}
	}
	return st, ""
}

// ropeExact reads the exact arithmetic (or the stored tables) of the cos
// and sin a rotation applies, confirmed on the evidence's measured rows.
func ropeExact(w *work.Work, s *attn.Side, r *rotation, ev *Evidence) (*probe.Angles, *StoredCosSin, string) {
	if r.synthetic {
		return nil, nil, "the cos/sin come from graph inputs"
	}
	a, why := probe.ExactAngles(w, s.Pos, r.omega, w.ElemType(s.In))
	if a != nil {
		if why = a.Confirm(ev.Start, ev.Cos, ev.Sin); why == "" {
			return a, nil, ""
		}
	}
	st, why2 := storedCosSin(w, s.Pos, ev.Start, ev.Cos, ev.Sin, w.ElemType(s.In))
	if st != nil {
		return nil, st, ""
	}
	return nil, nil, why + "; " + why2
}
