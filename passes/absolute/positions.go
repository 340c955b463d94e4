package absolute

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// tablePositions finds where the rows of an absolute encoding x are read:
// the candidate that, set to a+0..a+S-1, gives the rows of positions a..
// (rows shift with the positions), or the implicit 0..S-1 when the rows of
// a short sequence are the first rows of a longer one.
func tablePositions(w *work.Work, x *graph.Value) (*probe.Positions, string) {
	n, shift := 8, 3
	// A model whose shapes fix the sequence length gives that many rows
	// at any probe length: the positions are probed at that length.
	fixed := 0
	if a, _ := TableRows(w, probe.NewProbe(w, 1, n, 0), x); len(a) != n && len(a) > 1 {
		if b, _ := TableRows(w, probe.NewProbe(w, 1, n+shift, 0), x); len(b) == len(a) {
			fixed = len(a)
			n, shift = fixed, 1 // the table may hold no more rows than that
		}
	}
	rows := func(pos *probe.Positions, seq int, first int64) ([][]float64, error) {
		pr := probe.NewProbe(w, 1, seq, first)
		cuts := map[*graph.Value]*kernels.Tensor{}
		if err := probe.CutPositions(w, pr, pos, first, cuts); err != nil {
			return nil, err
		}
		pr.SetCuts(cuts)
		rs, why := TableRows(w, pr, x)
		if rs == nil {
			return nil, fmt.Errorf("%s", why)
		}
		if len(rs) != seq {
			return nil, fmt.Errorf("%d rows for %d positions", len(rs), seq)
		}
		return rs, nil
	}
	check := func(pos *probe.Positions) string {
		a, err := rows(pos, n, pos.StartConst)
		if err != nil {
			return err.Error()
		}
		var b [][]float64
		if pos.WorkValue == nil && pos.WorkStart == nil {
			if fixed > 0 {
				return fmt.Sprintf("the model fixes the sequence length (%d) and no value holds the positions", fixed)
			}
			// Fixed positions: a longer sequence starts with the same rows.
			long, err := rows(pos, n+shift, pos.StartConst)
			if err != nil {
				return err.Error()
			}
			b = long[shift:]
		} else if b, err = rows(pos, n, pos.StartConst+int64(shift)); err != nil {
			return err.Error()
		}
		for i := 0; i+shift < n; i++ {
			if !slices.Equal(a[i+shift], b[i]) {
				return fmt.Sprintf("the row of position %d does not move with the positions", i+shift)
			}
		}
		if slices.Equal(a[0], a[1]) && !gathersTableAt(w, x, pos.WorkValue) {
			return "the rows do not change with the positions"
		}
		return ""
	}
	var why string
	for _, v := range probe.PositionCandidatesLen(w, fixed, x) {
		pos := probe.NewPositions(w, v)
		if why = check(pos); why == "" {
			return pos, ""
		}
	}
	pos := probe.ImplicitPositions(w, x)
	if why2 := check(pos); why2 == "" {
		return pos, ""
	} else if why == "" {
		why = why2
	}
	return nil, "no value holds the positions the encoding reads: " + why
}

// gathersTableAt reports whether x is rows of a stored table gathered at
// pos (through casts and layout ops on either side): then x's rows are
// the table's rows at the positions by the op's definition, even when the
// rows are equal and their values cannot show it.
func gathersTableAt(w *work.Work, x, pos *graph.Value) bool {
	if pos == nil {
		return false
	}
	for steps := 0; steps < 8 && x != nil; steps++ {
		n := x.Producer()
		if n == nil || !work.IsONNX(n) {
			return false
		}
		if n.OpType == "Gather" && n.AttrInt("axis", 0) == 0 {
			idx := n.Input(1)
			for k := 0; k < 8 && idx != nil && idx != pos; k++ {
				q := idx.Producer()
				if q == nil || !work.IsONNX(q) || !work.LayoutOps[q.OpType] && q.OpType != "Cast" {
					break
				}
				idx = q.Input(0)
			}
			t := n.Input(0)
			for k := 0; k < 8 && t != nil && !w.IsConst(t); k++ {
				q := t.Producer()
				if q == nil || !work.IsONNX(q) || !work.LayoutOps[q.OpType] && q.OpType != "Cast" {
					break
				}
				t = q.Input(0)
			}
			return idx == pos && t != nil && w.IsConst(t)
		}
		if !work.LayoutOps[n.OpType] && n.OpType != "Cast" {
			return false
		}
		x = n.Input(0)
	}
	return false
}
