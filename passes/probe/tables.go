package probe

import (
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/work"
)

// hasPastSize reports whether one of v's sizes counts the tokens of a KV
// cache given as input (an image's height and width do not).
func HasPastSize(w *work.Work, v *graph.Value) bool {
	for _, d := range w.Shape(v).Dims {
		if w.SymKindOf(d) == work.SymPast {
			return true
		}
	}
	return false
}

// readsPositions reports whether a cone reads a position-ids input.
func ReadsPositions(w *work.Work, cone []*graph.Node) bool {
	for _, n := range cone {
		for _, in := range n.Inputs() {
			if in != nil && in.Producer() == nil && w.Role(in) == work.RolePositions {
				return true
			}
		}
	}
	return false
}

// coneBase is the base b of a Pow(b, exponents) the graph computed the
// frequencies with (folded into constants of the cone), or 0.
func ConeBase(w *work.Work, cone []*graph.Node) float64 {
	base := 0.0
	look := func(n *graph.Node) {
		for _, in := range n.Inputs() {
			if b, ok := w.PowBase[in]; ok && base == 0 {
				base = b
			}
		}
	}
	for _, n := range cone {
		look(n)
		for _, sg := range n.Subgraphs() {
			sg.Walk(look)
		}
	}
	return base
}

func IsHalfType(dt graph.DataType) bool { return dt == graph.Float16 || dt == graph.BFloat16 }

// positionTable finds a stored table indexed by positions in the nodes of
// a cone: a constant read (through layout ops) by a Gather, GatherElements
// or Slice whose indices or bounds are not constant. rows is the number of
// positions it holds (tableRead).
func PositionTable(w *work.Work, cone []*graph.Node) (*graph.Value, int) {
	v, _, rows := TableRead(w, cone)
	return v, rows
}

// tableRead is positionTable with the table's axis of positions: the axis
// the reading op indexes (a Gather's or GatherElements' axis, a GatherND's
// first indexed axis, the one axis of a Slice), followed back through
// casts and transposes to the constant; where layout ops in between leave
// it open, or the axis has size 1, the largest axis but the last. rows is
// the size of that axis; of several tables the one with the most rows.
func TableRead(w *work.Work, cone []*graph.Node) (best *graph.Value, axis, rows int) {
	return tableRead(w, cone, false)
}

// FixedTableRead is TableRead for reads at constant positions too: nodes
// a caller knows read positions (those normalisation folded into a
// position encoding, for one), where a constant index is the positions of
// a model whose shapes fix them.
func FixedTableRead(w *work.Work, nodes []*graph.Node) (best *graph.Value, axis, rows int) {
	return tableRead(w, nodes, true)
}

// FoldedCone is cone with the nodes normalisation folded into the
// constants among vals and the cone's inputs: how those constants were
// computed. A table read at positions the shapes fix, Gather(table,
// 0..S-1), is folded into S rows, and the table still holds all of its
// rows: FixedTableRead over the folded cone finds it.
func FoldedCone(w *work.Work, cone []*graph.Node, vals ...*graph.Value) []*graph.Node {
	nodes := slices.Clone(cone)
	consts := slices.Clone(vals)
	for _, n := range cone {
		consts = append(consts, n.Inputs()...)
	}
	for _, v := range consts {
		if v != nil && w.IsConst(v) {
			nodes = append(nodes, w.FoldedNodes(v)...)
		}
	}
	return nodes
}

func tableRead(w *work.Work, cone []*graph.Node, fixed bool) (best *graph.Value, axis, rows int) {
	for _, n := range cone {
		ax := -1 << 30 // none
		switch n.OpType {
		case "Gather", "GatherElements":
			ax = int(n.AttrInt("axis", 0))
		case "GatherND":
			ax = int(n.AttrInt("batch_dims", 0))
		case "Slice":
			var axes []int64
			ok := true
			if n.Attr("starts") != nil || n.Input(3) != nil {
				axes, ok = w.Axes(n, 3)
			} else if st := w.Shape(n.Input(1)); st.Rank() == 1 && st.Dims[0] == 1 {
				axes = []int64{0}
			}
			if ok && len(axes) == 1 {
				ax = int(axes[0])
			}
		default:
			continue
		}
		dynamic := false
		for _, in := range n.Inputs()[1:] {
			if in != nil && !w.IsConst(in) {
				dynamic = true
			}
		}
		v := n.Input(0)
		if !dynamic && !fixed && !(v != nil && v.Producer() == nil && w.Role(v) == work.RoleParam) {
			continue // constant rows of a constant: folded away, or not positions
		}
		// ax < 0 from here on: not known.
		if r := w.Shape(v).Rank(); ax != -1<<30 && r > 0 && ax >= -r && ax < r {
			ax = work.NormAxis(int64(ax), r)
		} else {
			ax = -1
		}
		for steps := 0; steps < 8 && v != nil && !w.IsConst(v) && v.Producer() != nil; steps++ {
			p := v.Producer()
			if !work.LayoutOps[p.OpType] {
				v = nil
				break
			}
			switch {
			case ax < 0:
			case p.OpType == "Cast" || p.OpType == "Identity":
			case p.OpType == "Transpose":
				perm := p.AttrInts("perm")
				if ax < len(perm) {
					ax = int(perm[ax])
				} else if r := w.Shape(p.Input(0)).Rank(); perm == nil && r > 0 {
					ax = r - 1 - ax // no perm: the axes reversed
				} else {
					ax = -1
				}
			default:
				ax = -1
			}
			v = p.Input(0)
		}
		var dims []int64
		switch {
		case v != nil && w.IsConst(v) && work.IsFloatType(v.Const.DataType()):
			dims = v.Const.Dims()
		case v != nil && v.Producer() == nil && w.Role(v) == work.RoleParam:
			// A table given as an input: its declared size.
			sh := w.Shape(v)
			if !sh.AllKnown() {
				continue
			}
			for _, d := range sh.Dims {
				dims = append(dims, int64(d))
			}
		default:
			continue
		}
		if len(dims) < 2 {
			continue
		}
		// An axis of size 1 holds no positions: a slice of it (GPT-NeoX's
		// cos_cached[:seq_len] of [1, 1, P, d]) keeps or drops the whole
		// table, and another op cuts the positions out of its result.
		if ax < 0 || ax >= len(dims) || dims[ax] == 1 {
			ax = 0
			for i, x := range dims[:len(dims)-1] {
				if x > dims[ax] {
					ax = i
				}
			}
		}
		if r := int(dims[ax]); r > rows {
			best, axis, rows = v, ax, r
		}
	}
	return best, axis, rows
}
