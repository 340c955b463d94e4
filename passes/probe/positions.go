package probe

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes/work"
)

// Positions says where the positions an encoding is read at come from, in
// the original model: a value holding the position of every token, or,
// when no value holds them, a first position to which each token's index in
// the sequence is added. Rewrites read the positions from there (the
// position_ids of a fused RotaryEmbedding, the rows of a table to slice);
// the detectors find it by probing: the encoding evaluated with the value
// replaced by other positions follows them.
type Positions struct {
	// Value names the value holding the position of every token:
	// [batch, seq] (Batch true), or [seq] or [1, seq] shared by every row
	// (axes of size 1 aside). Empty when no value holds the positions.
	Value string
	Batch bool
	// Start is the first position: the first operand of the Range that
	// computes Value (or the start of a slice of a constant 0, 1, 2, ...),
	// or, when Value is empty, the number added to 0..S-1 (the start of a
	// slice of a stored table). Empty when it is the constant StartConst.
	Start      string
	StartConst int64
	// Limit is the end of that Range or slice (positions Start..Limit-1),
	// empty when there is none or it is the constant LimitConst.
	Limit      string
	LimitConst int64
	// StartIndex and LimitIndex are the elements of Start and Limit that
	// are the bounds when those are vectors (the starts and ends of a Slice
	// over several axes).
	StartIndex, LimitIndex int
	// Ranged reports whether Start and Limit bound the positions
	// (Value is a Range or a slice of 0, 1, 2, ...).
	Ranged bool

	WorkValue, WorkStart, WorkLimit *graph.Value // in the working copy
}

// String describes the positions for reports.
func (p *Positions) String() string {
	switch {
	case p == nil:
		return "unknown"
	case p.Value != "" && p.Ranged:
		return fmt.Sprintf("%s (%s..%s)", p.Value, p.startString(), p.limitString())
	case p.Value != "":
		return p.Value
	default:
		return p.startString() + " + 0..S-1"
	}
}

func (p *Positions) startString() string {
	if p.Start != "" {
		return p.Start
	}
	return fmt.Sprint(p.StartConst)
}

func (p *Positions) limitString() string {
	if p.Limit != "" {
		return p.Limit
	}
	return fmt.Sprint(p.LimitConst)
}

// positionCandidates lists the values of the cone of vs that may hold
// positions, in topological order (graph inputs first): integer or float
// values of the original model that are neither constants nor content,
// shaped [seq], [batch, seq] (axes of size 1 aside), holding consecutive
// numbers along the sequence, the same in every row.
func PositionCandidates(w *work.Work, vs ...*graph.Value) []*graph.Value {
	return PositionCandidatesLen(w, 0, vs...)
}

// positionCandidatesLen is positionCandidates for a model whose shapes fix
// the sequence length to fixed (0: they do not): the sequence axis may
// then be that size rather than a symbol.
func PositionCandidatesLen(w *work.Work, fixed int, vs ...*graph.Value) []*graph.Value {
	cone := w.Cone(vs...)
	seen := map[*graph.Value]bool{}
	var out []*graph.Value
	p := NewProbe(w, 2, 5, 3)
	consider := func(v *graph.Value) {
		if v == nil || seen[v] {
			return
		}
		seen[v] = true
		if w.IsConst(v) || w.IsAct(v) || w.OrigValue(v) == "" {
			return
		}
		dt := w.ElemType(v)
		if !dt.IsInt() && !dt.IsFloat() {
			return
		}
		s := w.Shape(v)
		if !s.Ranked {
			return
		}
		var dims []work.Dim
		for _, d := range s.Dims {
			if d != 1 {
				dims = append(dims, d)
			}
		}
		if len(dims) == 0 || len(dims) > 2 {
			return
		}
		last := dims[len(dims)-1]
		if !(last.IsSym() && !w.IsBatchSym(last) || fixed > 1 && last.Known() && int(last) == fixed) {
			return
		}
		if len(dims) == 2 && !w.IsBatchSym(dims[0]) {
			return
		}
		t, err := p.Value(v)
		if err != nil || t.Len() == 0 || len(t.Shape) == 0 {
			return
		}
		n := t.Shape[len(t.Shape)-1]
		x := t.Float64s()
		for r := 0; r+n <= len(x); r += n {
			for i := 0; i < n; i++ {
				if x[r+i] != x[i] || i > 0 && x[r+i]-x[r+i-1] != 1 {
					return
				}
			}
		}
		out = append(out, v)
	}
	for _, n := range cone {
		for _, in := range n.Inputs() {
			consider(in)
		}
		for _, o := range n.Outputs() {
			consider(o)
		}
	}
	slices.SortStableFunc(out, func(a, b *graph.Value) int { return w.PosOf(a) - w.PosOf(b) })
	return out
}

// newPositions describes candidate v, with the bounds of the Range (or of
// the slice of a constant 0, 1, 2, ...) that computes it.
func NewPositions(w *work.Work, v *graph.Value) *Positions {
	p := &Positions{Value: w.OrigValue(v), WorkValue: v}
	for _, d := range w.Shape(v).Dims {
		if d.IsSym() && w.IsBatchSym(d) {
			p.Batch = true
		}
	}
	x := v
	for steps := 0; steps < 8 && x != nil; steps++ {
		if t := w.Const(x); t != nil && t.Len() >= 1 {
			// Consecutive constants (a Range the sequence length fixed by
			// the model's shapes has folded).
			vals := t.Float64s()
			for i, y := range vals {
				if y != vals[0]+float64(i) || y != math.Trunc(y) {
					return p
				}
			}
			p.StartConst, p.LimitConst, p.Ranged = int64(vals[0]), int64(vals[0])+int64(len(vals)), true
			return p
		}
		n := x.Producer()
		if n == nil || !work.IsONNX(n) {
			break
		}
		switch n.OpType {
		case "Cast", "Unsqueeze", "Squeeze", "Reshape", "Expand", "Identity":
			x = n.Input(0)
			continue
		case "Range":
			if d := w.Const(n.Input(2)); d != nil && d.Len() == 1 && d.Float64s()[0] == 1 {
				if bound(w, &p.WorkStart, &p.Start, &p.StartConst, &p.StartIndex, n.Input(0), 0) && bound(w, &p.WorkLimit, &p.Limit, &p.LimitConst, &p.LimitIndex, n.Input(1), 0) {
					p.Ranged = true
				}
			}
		case "Slice":
			// A slice of the constant 0, 1, 2, ... (BERT's position_ids buffer).
			t := w.Const(n.Input(0))
			if t == nil || t.Len() < 2 {
				break
			}
			vals := t.Float64s()
			for i, y := range vals {
				if y != float64(i) {
					return p
				}
			}
			axes, ok := w.Axes(n, 3)
			if n.Input(3) == nil {
				axes, ok = []int64{int64(t.Rank() - 1)}, true
			}
			// The positions are the last axis; any other axis sliced must
			// have one element.
			k := -1
			for i, a := range axes {
				a = int64(work.NormAxis(a, t.Rank()))
				switch {
				case a == int64(t.Rank()-1):
					k = i
				case t.Shape[a] != 1:
					ok = false
				}
			}
			if !ok || k < 0 {
				break
			}
			if st := w.Const(n.Input(4)); n.Input(4) != nil && (st == nil || slices.ContainsFunc(st.Float64s(), func(x float64) bool { return x != 1 })) {
				break
			}
			if bound(w, &p.WorkStart, &p.Start, &p.StartConst, &p.StartIndex, n.Input(1), k) && bound(w, &p.WorkLimit, &p.Limit, &p.LimitConst, &p.LimitIndex, n.Input(2), k) {
				p.Ranged = true
			}
		}
		break
	}
	return p
}

// bound records a bound of positions, element k of x: a constant, or a
// value of the original model (with the element's index).
func bound(w *work.Work, v **graph.Value, name *string, c *int64, idx *int, x *graph.Value, k int) bool {
	if x == nil {
		return false
	}
	if t := w.Const(x); t != nil {
		if k >= t.Len() || k > 0 && t.Rank() != 1 {
			return false
		}
		*c = int64(t.Float64s()[k])
		return true
	}
	if w.OrigValue(x) == "" || w.Shape(x).Rank() > 1 {
		return false
	}
	*v, *name, *idx = x, w.OrigValue(x), k
	return true
}

// implicitPositions describes positions no value holds: 0..S-1 offset by
// the start of the slice that reads a stored table at positions, when the
// cone has one.
func ImplicitPositions(w *work.Work, vs ...*graph.Value) *Positions {
	p := &Positions{}
	for _, n := range w.Cone(vs...) {
		if n.OpType != "Slice" || !work.IsONNX(n) {
			continue
		}
		src := n.Input(0)
		for steps := 0; steps < 8 && src != nil && !w.IsConst(src); steps++ {
			q := src.Producer()
			if q == nil || !work.LayoutOps[q.OpType] && q.OpType != "Slice" {
				src = nil
				break
			}
			src = q.Input(0)
		}
		if src == nil || !w.IsConst(src) || n.Input(2) == nil || w.IsConst(n.Input(2)) {
			continue
		}
		// The end follows the sequence: the start is the first position.
		if bound(w, &p.WorkStart, &p.Start, &p.StartConst, &p.StartIndex, n.Input(1), 0) {
			return p
		}
	}
	return p
}

// cutPositions makes probe pr read positions first, first+1, ... wherever
// pos says they come from (pr.Seq of them).
func CutPositions(w *work.Work, pr *Probe, pos *Positions, first int64, cuts map[*graph.Value]*kernels.Tensor) error {
	switch {
	case pos.WorkValue != nil:
		shape, ok := pr.BindShape(w.Shape(pos.WorkValue))
		if !ok {
			return fmt.Errorf("the shape of the positions %s is not known", pos.Value)
		}
		total := 1
		for _, d := range shape {
			total *= d
		}
		n := 1
		if len(shape) > 0 {
			n = shape[len(shape)-1]
		}
		vals := make([]float64, total)
		for i := range vals {
			vals[i] = float64(first + int64(i%n))
		}
		t := FromFloat64Any(w.ElemType(pos.WorkValue), shape, vals)
		if t == nil {
			return fmt.Errorf("positions of element type %v cannot be set", w.ElemType(pos.WorkValue))
		}
		cuts[pos.WorkValue] = t
	case pos.WorkStart != nil:
		shape, ok := pr.BindShape(w.Shape(pos.WorkStart))
		if !ok {
			return fmt.Errorf("the shape of %s is not known", pos.Start)
		}
		vals := make([]float64, max(1, len(shape)))
		vals[0] = float64(first)
		t := FromFloat64Any(w.ElemType(pos.WorkStart), shape, vals[:1])
		if t == nil {
			return fmt.Errorf("a first position of element type %v cannot be set", w.ElemType(pos.WorkStart))
		}
		cuts[pos.WorkStart] = t
	default:
		if first != pos.StartConst {
			return fmt.Errorf("the positions start at %d in the graph", pos.StartConst)
		}
	}
	return nil
}

// positionsIn evaluates the positions a probe reads, per token of the
// sequence (first row).
func PositionsIn(w *work.Work, pr *Probe, pos *Positions) ([]float64, error) {
	if pos.WorkValue != nil {
		t, err := pr.Value(pos.WorkValue)
		if err != nil {
			return nil, err
		}
		n := t.Shape[len(t.Shape)-1]
		return t.Float64s()[:n], nil
	}
	first := float64(pos.StartConst)
	if pos.WorkStart != nil {
		t, err := pr.Value(pos.WorkStart)
		if err != nil {
			return nil, err
		}
		first = t.Float64s()[0]
	}
	out := make([]float64, pr.Seq)
	for i := range out {
		out[i] = first + float64(i)
	}
	return out, nil
}
