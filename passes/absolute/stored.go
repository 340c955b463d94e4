package absolute

import (
	"fmt"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// storedTable finds the stored table x's rows are read from, d numbers
// per position on whichever axis its positions are: one the cone reads at
// positions, else one read at constant positions (a model whose shapes
// fix them), in the cone or folded by normalisation into x or into a
// constant the cone reads (Gather(table, 0..S-1) folded into S rows: the
// table still holds all of its rows).
func storedTable(w *work.Work, x *graph.Value, cone []*graph.Node, d int) (*graph.Value, int, int) {
	fits := func(tv *graph.Value, ax int) bool {
		v, ok := ViewTable(w, tv, ax)
		return tv != nil && tv.Const != nil && ok && v.Width() == d
	}
	if tv, ax, r := probe.TableRead(w, cone); fits(tv, ax) {
		return tv, ax, r
	}
	if tv, ax, r := probe.FixedTableRead(w, probe.FoldedCone(w, cone, x)); fits(tv, ax) {
		return tv, ax, r
	}
	return nil, 0, 0
}

// Offset is the table row read at the encoding's first position, when
// its rows are read from a stored table; when the graph does not fix it,
// a note says why.
//
// A model whose shapes fix its KV cache at P tokens, with no value
// holding the positions, reads one row r for its first new token, whose
// position is P (the cached tokens come first): the offset is r - P,
// which no second probe with another cache can show.
func Offset(w *work.Work, e *Encoding) (off int, ok bool, note string) {
	off, ok = startOffset(w, e.Probe, e.X, e.Table, e.TableAxis, e.Rows)
	p, past := e.Evidence.Positions, w.FixedPast()
	if !ok || past == 0 || e.Probe.Past != 0 || p != nil && (p.WorkValue != nil || p.WorkStart != nil) {
		return off, ok, ""
	}
	if off < past {
		return 0, false, fmt.Sprintf("position_offset: the model's shapes fix its KV cache at %d tokens, and its first new token "+
			"reads row %d: its positions do not count the cached tokens", past, off)
	}
	return off - past, true, ""
}
