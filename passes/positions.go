package passes

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
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

	value, start, limit *graph.Value // in the working copy
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
func (w *Work) positionCandidates(vs ...*graph.Value) []*graph.Value {
	return w.positionCandidatesLen(0, vs...)
}

// positionCandidatesLen is positionCandidates for a model whose shapes fix
// the sequence length to fixed (0: they do not): the sequence axis may
// then be that size rather than a symbol.
func (w *Work) positionCandidatesLen(fixed int, vs ...*graph.Value) []*graph.Value {
	cone := w.cone(vs...)
	seen := map[*graph.Value]bool{}
	var out []*graph.Value
	p := w.NewProbe(2, 5, 3)
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
		var dims []Dim
		for _, d := range s.Dims {
			if d != 1 {
				dims = append(dims, d)
			}
		}
		if len(dims) == 0 || len(dims) > 2 {
			return
		}
		last := dims[len(dims)-1]
		if !(last.IsSym() && !w.isBatchSym(last) || fixed > 1 && last.Known() && int(last) == fixed) {
			return
		}
		if len(dims) == 2 && !w.isBatchSym(dims[0]) {
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
	slices.SortStableFunc(out, func(a, b *graph.Value) int { return w.posOf(a) - w.posOf(b) })
	return out
}

// newPositions describes candidate v, with the bounds of the Range (or of
// the slice of a constant 0, 1, 2, ...) that computes it.
func (w *Work) newPositions(v *graph.Value) *Positions {
	p := &Positions{Value: w.OrigValue(v), value: v}
	for _, d := range w.Shape(v).Dims {
		if d.IsSym() && w.isBatchSym(d) {
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
		if n == nil || !isONNX(n) {
			break
		}
		switch n.OpType {
		case "Cast", "Unsqueeze", "Squeeze", "Reshape", "Expand", "Identity":
			x = n.Input(0)
			continue
		case "Range":
			if d := w.Const(n.Input(2)); d != nil && d.Len() == 1 && d.Float64s()[0] == 1 {
				if w.bound(&p.start, &p.Start, &p.StartConst, &p.StartIndex, n.Input(0), 0) && w.bound(&p.limit, &p.Limit, &p.LimitConst, &p.LimitIndex, n.Input(1), 0) {
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
				a = int64(normAxis(a, t.Rank()))
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
			if w.bound(&p.start, &p.Start, &p.StartConst, &p.StartIndex, n.Input(1), k) && w.bound(&p.limit, &p.Limit, &p.LimitConst, &p.LimitIndex, n.Input(2), k) {
				p.Ranged = true
			}
		}
		break
	}
	return p
}

// bound records a bound of positions, element k of x: a constant, or a
// value of the original model (with the element's index).
func (w *Work) bound(v **graph.Value, name *string, c *int64, idx *int, x *graph.Value, k int) bool {
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
func (w *Work) implicitPositions(vs ...*graph.Value) *Positions {
	p := &Positions{}
	for _, n := range w.cone(vs...) {
		if n.OpType != "Slice" || !isONNX(n) {
			continue
		}
		src := n.Input(0)
		for steps := 0; steps < 8 && src != nil && !w.IsConst(src); steps++ {
			q := src.Producer()
			if q == nil || !layoutOps[q.OpType] && q.OpType != "Slice" {
				src = nil
				break
			}
			src = q.Input(0)
		}
		if src == nil || !w.IsConst(src) || n.Input(2) == nil || w.IsConst(n.Input(2)) {
			continue
		}
		// The end follows the sequence: the start is the first position.
		if w.bound(&p.start, &p.Start, &p.StartConst, &p.StartIndex, n.Input(1), 0) {
			return p
		}
	}
	return p
}

// cutPositions makes probe pr read positions first, first+1, ... wherever
// pos says they come from (pr.Seq of them).
func (w *Work) cutPositions(pr *Probe, pos *Positions, first int64, cuts map[*graph.Value]*kernels.Tensor) error {
	switch {
	case pos.value != nil:
		shape, ok := pr.BindShape(w.Shape(pos.value))
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
		t := fromFloat64Any(w.ElemType(pos.value), shape, vals)
		if t == nil {
			return fmt.Errorf("positions of element type %v cannot be set", w.ElemType(pos.value))
		}
		cuts[pos.value] = t
	case pos.start != nil:
		shape, ok := pr.BindShape(w.Shape(pos.start))
		if !ok {
			return fmt.Errorf("the shape of %s is not known", pos.Start)
		}
		vals := make([]float64, max(1, len(shape)))
		vals[0] = float64(first)
		t := fromFloat64Any(w.ElemType(pos.start), shape, vals[:1])
		if t == nil {
			return fmt.Errorf("a first position of element type %v cannot be set", w.ElemType(pos.start))
		}
		cuts[pos.start] = t
	default:
		if first != pos.StartConst {
			return fmt.Errorf("the positions start at %d in the graph", pos.StartConst)
		}
	}
	return nil
}

// positionsIn evaluates the positions a probe reads, per token of the
// sequence (first row).
func (w *Work) positionsIn(pr *Probe, pos *Positions) ([]float64, error) {
	if pos.value != nil {
		t, err := pr.Value(pos.value)
		if err != nil {
			return nil, err
		}
		n := t.Shape[len(t.Shape)-1]
		return t.Float64s()[:n], nil
	}
	first := float64(pos.StartConst)
	if pos.start != nil {
		t, err := pr.Value(pos.start)
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

// ropePositions finds where the rotation of side s reads the positions:
// the candidate whose values, times the measured frequencies, are the
// angles of the rotation, at positions from 0 and further on.
func (w *Work) ropePositions(s *side, r *rotation) (*Positions, string) {
	if r.synthetic || r.dynamic != nil {
		return nil, "the cos/sin depend on inputs other than the positions (frequencies given as inputs, or rescaled with the sequence length)"
	}
	starts := []int64{0, 1000}
	if r.tableRows > 0 {
		starts = []int64{0, int64(max(0, r.tableRows-8))}
	}
	check := func(pos *Positions) string {
		for i, st := range starts {
			pr := w.NewProbe(1, 8, st)
			shape, ok := pr.BindShape(w.Shape(s.In))
			if !ok {
				return "the shape of q is not known"
			}
			theta, _, err := w.angles(pr, s, shape, r.pairs)
			if err == nil {
				var ps []float64
				if ps, err = w.positionsIn(pr, pos); err == nil {
					if why := anglesFollow(theta, ps, r, shape); why != "" {
						return why
					}
				}
			}
			if err != nil {
				if i == 0 {
					return "probe: " + err.Error()
				}
				// Far positions the model refuses (a table cut to the
				// sequence) say nothing.
				continue
			}
		}
		return ""
	}
	// The candidates nearest the cos/sin first: a value the positions go
	// through on their way (HF's masked_fill of padding: Where(mask == 0,
	// 1, cumsum(mask) - 1); one row of position_ids shared by the batch)
	// holds what the rotation reads, an earlier one only agrees with it
	// on probes without padding.
	// Of one value's casts and reshapes the first is named: the same
	// numbers, as the model has them.
	cands := w.positionCandidates(s.Pos...)
	isCand := map[*graph.Value]bool{}
	for _, v := range cands {
		isCand[v] = true
	}
	slices.Reverse(cands)
	var why string
	for _, v := range cands {
		pos := w.newPositions(v)
		if why = check(pos); why != "" {
			continue
		}
		for steps := 0; steps < 8; steps++ {
			n := v.Producer()
			if n == nil || !isONNX(n) || !isCand[n.Input(0)] {
				break
			}
			switch n.OpType {
			case "Cast", "Unsqueeze", "Squeeze", "Reshape", "Expand", "Identity":
				v = n.Input(0)
				continue
			}
			break
		}
		if first := w.newPositions(v); first.value != pos.value && check(first) == "" {
			return first, ""
		}
		return pos, ""
	}
	pos := w.implicitPositions(s.Pos...)
	if why2 := check(pos); why2 == "" {
		return pos, ""
	} else if why == "" {
		why = why2
	}
	return nil, "no value holds the positions the rotation reads: " + why
}

// anglesFollow checks that angles per pair and slot are the positions of
// the slots times the frequencies.
func anglesFollow(theta [][]float64, ps []float64, r *rotation, shape []int) string {
	stride := 1
	for _, x := range shape[r.posAxis+1 : len(shape)-1] {
		stride *= x
	}
	n := shape[r.posAxis]
	if len(ps) != n {
		return fmt.Sprintf("%d positions for %d tokens", len(ps), n)
	}
	tol := 1e-3
	if r.half {
		tol = 3e-2
	}
	for k, om := range r.omega {
		for sl := range theta[k] {
			p := ps[(sl/stride)%n]
			d := math.Abs(math.Remainder(theta[k][sl]-p*om, 2*math.Pi))
			if d2 := math.Abs(math.Remainder(theta[k][sl]+p*om, 2*math.Pi)); d2 < d {
				d = d2
			}
			if d > tol+2e-7*math.Abs(p*om) {
				return fmt.Sprintf("at position %v the angle of pair %d is %.6g, not %.6g", p, k, theta[k][sl], p*om)
			}
		}
	}
	return ""
}

// tablePositions finds where the rows of an absolute encoding x are read:
// the candidate that, set to a+0..a+S-1, gives the rows of positions a..
// (rows shift with the positions), or the implicit 0..S-1 when the rows of
// a short sequence are the first rows of a longer one.
func (w *Work) tablePositions(x *graph.Value) (*Positions, string) {
	n, shift := 8, 3
	// A model whose shapes fix the sequence length gives that many rows
	// at any probe length: the positions are probed at that length.
	fixed := 0
	if a, _ := w.tableRows(w.NewProbe(1, n, 0), x); len(a) != n && len(a) > 1 {
		if b, _ := w.tableRows(w.NewProbe(1, n+shift, 0), x); len(b) == len(a) {
			fixed = len(a)
			n, shift = fixed, 1 // the table may hold no more rows than that
		}
	}
	rows := func(pos *Positions, seq int, first int64) ([][]float64, error) {
		pr := w.NewProbe(1, seq, first)
		cuts := map[*graph.Value]*kernels.Tensor{}
		if err := w.cutPositions(pr, pos, first, cuts); err != nil {
			return nil, err
		}
		pr.SetCuts(cuts)
		rs, why := w.tableRows(pr, x)
		if rs == nil {
			return nil, fmt.Errorf("%s", why)
		}
		if len(rs) != seq {
			return nil, fmt.Errorf("%d rows for %d positions", len(rs), seq)
		}
		return rs, nil
	}
	check := func(pos *Positions) string {
		a, err := rows(pos, n, pos.StartConst)
		if err != nil {
			return err.Error()
		}
		var b [][]float64
		if pos.value == nil && pos.start == nil {
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
		if slices.Equal(a[0], a[1]) && !w.gathersTableAt(x, pos.value) {
			return "the rows do not change with the positions"
		}
		return ""
	}
	var why string
	for _, v := range w.positionCandidatesLen(fixed, x) {
		pos := w.newPositions(v)
		if why = check(pos); why == "" {
			return pos, ""
		}
	}
	pos := w.implicitPositions(x)
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
func (w *Work) gathersTableAt(x, pos *graph.Value) bool {
	if pos == nil {
		return false
	}
	for steps := 0; steps < 8 && x != nil; steps++ {
		n := x.Producer()
		if n == nil || !isONNX(n) {
			return false
		}
		if n.OpType == "Gather" && n.AttrInt("axis", 0) == 0 {
			idx := n.Input(1)
			for k := 0; k < 8 && idx != nil && idx != pos; k++ {
				q := idx.Producer()
				if q == nil || !isONNX(q) || !layoutOps[q.OpType] && q.OpType != "Cast" {
					break
				}
				idx = q.Input(0)
			}
			t := n.Input(0)
			for k := 0; k < 8 && t != nil && !w.IsConst(t); k++ {
				q := t.Producer()
				if q == nil || !isONNX(q) || !layoutOps[q.OpType] && q.OpType != "Cast" {
					break
				}
				t = q.Input(0)
			}
			return idx == pos && t != nil && w.IsConst(t)
		}
		if !layoutOps[n.OpType] && n.OpType != "Cast" {
			return false
		}
		x = n.Input(0)
	}
	return false
}
