package passes

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
)

// tablePlan is what applyTable needs for a learned or sinusoidal table:
// where it is, and how its scheme fills the new rows (vals holds the
// stored rows, laid out by positions, and room for the new ones).
type tablePlan struct {
	ev     *TableEvidence
	offset int // table row of position 0
	n      int // positions the table holds
	// transposed: the scheme extends tables stored transposed too.
	transposed bool
	fill       func(x *Extended, it *ExtendItem, tab *tableConst, vals []float64, rows int) error
}

// planLearned plans the extension of a learned table: hierarchical
// decomposition.
func (x *Extended) planLearned(f *Finding) (*ExtendItem, error) {
	o := x.Opts
	if o.Method != "" && o.Method != MethodHierarchical {
		return nil, extendErr("the model has a learned position table besides RoPE: --method %s does not fit it", o.Method)
	}
	it, where := newTableItem(f)
	p := f.Params.(*LearnedParams)
	ev, ok := f.Evidence.(*TableEvidence)
	if !ok || ev.Table == "" || p.MaxPositions == nil {
		return nil, extendErr("%s: no stored table found", where)
	}
	off := 0
	if p.PositionOffset != nil {
		off = *p.PositionOffset
	}
	n := *p.MaxPositions - off
	if n < 2 {
		return nil, extendErr("%s holds %d positions", where, n)
	}
	if o.To > n*n {
		return nil, extendErr("--method hierarchical reaches at most n² = %d positions from a table of %d; --to %d is more", n*n, n, o.To)
	}
	alpha := o.Alpha
	if alpha == 0 {
		alpha = DefaultAlpha
	}
	it.Form, it.Method, it.OldMax = FormTable, MethodHierarchical, ptr(n)
	it.Params = map[string]any{"method": MethodHierarchical, "alpha": alpha}
	it.Plan = &tablePlan{ev: ev, offset: off, n: n, transposed: true, fill: fillHierarchical}
	if f.Fused {
		it.Form = FormFused
	}
	return it, nil
}

// fillHierarchical fills the new rows of a learned table by hierarchical
// decomposition.
func fillHierarchical(x *Extended, it *ExtendItem, tab *tableConst, vals []float64, rows int) error {
	tp := it.Plan.(*tablePlan)
	hierarchical(vals, tab.vals, tp.offset, tp.n, x.Opts.To, tab.width, it.Params["alpha"].(float64))
	it.note("position p >= %d gets alpha·u_i + (1-alpha)·u_j with i = p div %d, j = p mod %d and u_i = (row_i - alpha·row_0)/(1-alpha) (rows counted from position 0); the first %d rows are the trained table, bit for bit", tp.n, tp.n, tp.n, tp.n)
	return nil
}

// planSinusoidal plans the extension of a stored sinusoidal table: its own
// formula, continued (a computed one needs nothing).
func (x *Extended) planSinusoidal(f *Finding) (*ExtendItem, error) {
	it, where := newTableItem(f)
	if x.Opts.Method != "" {
		return nil, extendErr("--method %s does not fit %s: sinusoidal tables are continued with their own formula (no --method)", x.Opts.Method, where)
	}
	p := f.Params.(*SinusoidalParams)
	if p.Computed || p.MaxPositions == nil {
		it.Form, it.Method = FormComputed, "none"
		it.note("computed in the graph for any position: nothing to enlarge")
		return it, nil
	}
	ev, ok := f.Evidence.(*TableEvidence)
	if !ok || ev.Table == "" {
		return nil, extendErr("%s: no stored table found", where)
	}
	off := 0
	if p.PositionOffset != nil {
		off = *p.PositionOffset
	}
	n := *p.MaxPositions - off
	it.Form, it.Method, it.OldMax = FormTable, MethodOwnFormula, ptr(n)
	if f.Fused {
		it.Form = FormFused
	}
	if p.Base != nil {
		it.Params["base"] = *p.Base
	}
	it.Params["freq_denominator"] = p.FreqDenominator
	it.Params["layout"] = p.Layout
	it.Plan = &tablePlan{ev: ev, offset: off, n: n, fill: (*Extended).sinusoidRows}
	return it, nil
}

// planALiBi plans the extension of ALiBi: bias constants fixed at export
// are continued with the model's slopes (by widenBounded).
func (x *Extended) planALiBi(f *Finding) (*ExtendItem, error) {
	it, where := newTableItem(f)
	if x.Opts.Method != "" {
		return nil, extendErr("--method %s does not fit %s: ALiBi bias constants are continued with their own slopes (no --method)", x.Opts.Method, where)
	}
	p := f.Params.(*ALiBiParams)
	it.Params["slopes"] = p.Slopes
	if p.MaxPositions == nil {
		it.Form, it.Method = FormComputed, "none"
		it.note("computed from the positions of every call: nothing to enlarge")
		return it, nil
	}
	it.Form, it.Method, it.OldMax = "constants", MethodOwnFormula, ptr(*p.MaxPositions)
	it.note("the bias constants, linear in the key position with the model's slopes, are continued to %d keys", x.Opts.To)
	return it, nil
}

// planFloater refuses FLOATER integrated over a fixed number of positions.
func (x *Extended) planFloater(f *Finding) (*ExtendItem, error) {
	if p := f.Params.(*FloaterParams); p.MaxPositions != nil {
		_, where := newTableItem(f)
		return nil, extendErr("%s is the solution of an ODE integrated over %d positions (%s form): extend does not continue the integration", where, *p.MaxPositions, p.Form)
	}
	return planComputed(x, f)
}

// planRelative is the plan of a relative scheme: computed for any
// distance.
func planRelative(x *Extended, f *Finding) (*ExtendItem, error) {
	return planNothing(x, f, "computed for any distance (relative distances are bucketed, clipped or computed): nothing to enlarge")
}

// planComputed is the plan of an encoding computed for any position.
func planComputed(x *Extended, f *Finding) (*ExtendItem, error) {
	return planNothing(x, f, "computed from the position for any position: nothing to enlarge")
}

func planNothing(x *Extended, f *Finding, note string) (*ExtendItem, error) {
	it, where := newTableItem(f)
	if o := x.Opts; o.Method != "" && o.Method != MethodHierarchical {
		return nil, extendErr("--method %s does not fit %s", o.Method, where)
	}
	it.Form, it.Method = FormComputed, "none"
	it.note("%s", note)
	return it, nil
}

// newTableItem starts the item of a finding other than RoPE, with where
// refusals name it.
func newTableItem(f *Finding) (*ExtendItem, string) {
	it := &ExtendItem{Scheme: f.Scheme, Layers: f.Layers, Params: map[string]any{}, Finding: f,
		OldMaxFrom: fmt.Sprintf("the %s table of layers %s", f.Scheme, layerList(f.Layers))}
	return it, fmt.Sprintf("the %s encoding of layers %s", f.Scheme, layerList(f.Layers))
}

// applyTable enlarges a learned or sinusoidal table.
func (x *Extended) applyTable(it *ExtendItem) error {
	tp, _ := it.Plan.(*tablePlan)
	if tp == nil {
		return nil
	}
	r := x.r
	ch := r.begin("extend", it.Scheme)
	defer r.end(ch)
	base, err := x.baseConst(tp.ev.Table)
	if err != nil {
		return err
	}
	tab, err := x.tableOf(base)
	if err != nil {
		return err
	}
	if ax := tp.ev.Axis; tab.axis != ax {
		// Stored transposed ([dim, positions], read on axis 1): the
		// positions are the axis the reader indexes. Learned tables are
		// extended by positions and written back in the model's layout.
		if !tp.transposed {
			return extendErr("the table %q %v keeps its positions on axis %d: extend continues sinusoidal tables whose positions are the axis before the last ([positions, dim]), not tables stored transposed", base.Name, tab.dims, ax)
		}
		if ax < 0 || ax >= len(tab.dims) || tab.dims[ax] < 2 {
			return extendErr("the table %q %v: the audit read its positions on axis %d", base.Name, tab.dims, ax)
		}
		rows := int(tab.dims[ax])
		tab = &tableConst{dims: tab.dims, axis: ax, rows: rows, width: len(tab.vals) / rows, dt: tab.dt, vals: byPositions(tab.vals, tab.dims, ax)}
	}
	if tab.rows != tp.offset+tp.n {
		return extendErr("the table %q has %d rows, the audit read %d positions from row %d", base.Name, tab.rows, tp.n, tp.offset)
	}
	N := x.Opts.To
	rows := tp.offset + N
	vals := make([]float64, rows*tab.width)
	copy(vals, tab.vals)
	if err := tp.fill(x, it, tab, vals, rows); err != nil {
		return err
	}
	if !finite(vals) {
		return extendErr("the table %q: the extension gives non-finite values", base.Name)
	}
	// The trained rows stay bit for bit what they were.
	dims := withAxis(tab.dims, tab.axis, rows)
	t, err := graph.TensorFromFloat64(base.Name, tab.dt, dims, stored(vals, dims, tab.axis))
	if err != nil {
		return err
	}
	old := x.constTensor(base)
	if err := samePositions(old, t, tab.axis); err != nil {
		return extendErr("the table %q: %v", base.Name, err)
	}
	widen, err := x.widenOneHots(it, base, tab.rows, rows)
	if err != nil {
		return err
	}
	x.replaceConst(base, t)
	it.edit(base.Name, "%s table %v %v to %v (%s)", it.Scheme, tab.dt, tab.dims, withAxis(tab.dims, tab.axis, rows), it.Method)
	widen()
	return nil
}

// widenOneHots gives the one-hots multiplied with the table base (the
// product normalisation reads as a Gather: MatMul(OneHot(i, depth), T) or
// MatMul(T, OneHot(i, depth, axis=0)), through casts and layout ops) the
// depth of the enlarged table: a constant depth equal to the table's old
// rows becomes rows (a new constant, for that OneHot only). A one-hot of
// another depth is refused. The one-hots are found before the table is
// replaced and changed by the function returned, after it.
func (x *Extended) widenOneHots(it *ExtendItem, base *graph.Value, old, rows int) (func(), error) {
	layout := func(n *graph.Node) bool {
		switch n.OpType {
		case "Cast", "Identity", "Transpose", "Reshape", "Unsqueeze", "Squeeze":
			return isONNX(n)
		}
		return false
	}
	var products []*graph.Node
	seen := map[*graph.Value]bool{}
	var down func(v *graph.Value, depth int)
	down = func(v *graph.Value, depth int) {
		if v == nil || seen[v] || depth > 8 {
			return
		}
		seen[v] = true
		for _, u := range v.Uses() {
			switch n := u.Node; {
			case layout(n) && u.Index == 0:
				down(n.Output(0), depth+1)
			case isONNX(n) && (n.OpType == "MatMul" || n.OpType == "Gemm") && u.Index < 2:
				products = append(products, n)
			}
		}
	}
	down(base, 0)
	var later []func()
	for _, mm := range products {
		for i := range 2 {
			v := mm.Input(i)
			for steps := 0; v != nil && v.Producer() != nil && layout(v.Producer()) && steps < 8; steps++ {
				v = v.Producer().Input(0)
			}
			if v == nil || seen[v] || v.Producer() == nil || v.Producer().OpType != "OneHot" || !isONNX(v.Producer()) {
				continue
			}
			oh := v.Producer()
			dt := x.constTensor(oh.Input(1))
			if dt == nil {
				continue // a depth computed at run time follows the inputs
			}
			d, err := dt.Float64s()
			if err != nil || len(d) != 1 || int(d[0]) != old {
				return nil, extendErr("the table %q is multiplied with a one-hot (%s) of depth %v, not its %d rows: onnxpe cannot enlarge them together", base.Name, nodeName(oh), d, old)
			}
			var nd *graph.Tensor
			if dt.DataType().IsInt() {
				nd, err = graph.NewTensor(base.Name+"_depth", dt.DataType(), dt.Dims(), intSlice(dt.DataType(), []int64{int64(rows)}))
			} else {
				nd, err = graph.TensorFromFloat64(base.Name+"_depth", dt.DataType(), dt.Dims(), []float64{float64(rows)})
			}
			if err != nil {
				return nil, err
			}
			nv, err := x.r.addConst(nd)
			if err != nil {
				return nil, err
			}
			later = append(later, func() {
				oh.SetInput(1, nv)
				x.changed = append(x.changed, nv)
				it.edit(nodeName(oh), "depth of the one-hot multiplied with %s: %d to %d", base.Name, old, rows)
			})
		}
	}
	return func() {
		for _, f := range later {
			f()
		}
	}, nil
}

func withAxis(dims []int64, axis, n int) []int64 {
	d := slices.Clone(dims)
	d[axis] = int64(n)
	return d
}

// hierarchical fills rows offset+n..offset+N-1 of dst from the table src
// (Su, 2020, kexue.fm/archives/7947: with 1-based positions,
// q_{(i-1)·n+j} = α·u_i + (1-α)·u_j and u_i = (p_i - α·p_1)/(1-α), so
// that q_1..q_n = p_1..p_n; here with 0-based positions, position
// i·n + j gets α·u_i + (1-α)·u_j).
func hierarchical(dst, src []float64, offset, n, N, width int, alpha float64) {
	row := func(i int) []float64 { return src[(offset+i)*width : (offset+i+1)*width] }
	p0 := row(0)
	u := func(i, c int) float64 { return (row(i)[c] - alpha*p0[c]) / (1 - alpha) }
	for p := n; p < N; p++ {
		i, j := p/n, p%n
		for c := 0; c < width; c++ {
			dst[(offset+p)*width+c] = alpha*u(i, c) + (1-alpha)*u(j, c)
		}
	}
}

// blocks splits dims at axis: the number of blocks before it (the
// product of the axes before) and of elements after it (of the axes
// after). Position r of block o starts at element (o·dims[axis] + r)·inner.
func blocks(dims []int64, axis int) (outer, inner int) {
	outer, inner = 1, 1
	for _, d := range dims[:axis] {
		outer *= int(d)
	}
	for _, d := range dims[axis+1:] {
		inner *= int(d)
	}
	return outer, inner
}

// byPositions lays out vals, a table of shape dims keeping its positions
// on axis, as [positions][outer·inner]: row r holds what the table holds
// at position r, in the order of its elements (the stored order when no
// axis before the positions' is longer than 1).
func byPositions(vals []float64, dims []int64, axis int) []float64 {
	outer, inner := blocks(dims, axis)
	if outer == 1 {
		return vals
	}
	n := int(dims[axis])
	out := make([]float64, 0, len(vals))
	for r := range n {
		for o := range outer {
			out = append(out, vals[(o*n+r)*inner:(o*n+r+1)*inner]...)
		}
	}
	return out
}

// stored is the inverse of byPositions: rows [positions][outer·inner]
// laid out as a table of shape dims keeping its positions on axis.
func stored(rows []float64, dims []int64, axis int) []float64 {
	outer, inner := blocks(dims, axis)
	if outer == 1 {
		return rows
	}
	n := int(dims[axis])
	out := make([]float64, len(rows))
	for r := range n {
		for o := range outer {
			copy(out[(o*n+r)*inner:(o*n+r+1)*inner], rows[(r*outer+o)*inner:(r*outer+o+1)*inner])
		}
	}
	return out
}

// samePositions checks that t, a table enlarged on axis, holds at the
// positions of old what old holds there, bit for bit: the first elements
// of t when the positions are its first long axis, the first positions of
// every block before them otherwise.
func samePositions(old, t *graph.Tensor, axis int) error {
	a, err := old.RawBytes()
	if err != nil {
		return err
	}
	b, err := t.RawBytes()
	if err != nil {
		return err
	}
	od, nd := old.Dims(), t.Dims()
	outer, _ := blocks(od, axis)
	if len(od) != len(nd) || len(b) < len(a) || outer == 0 || len(a)%outer != 0 {
		return fmt.Errorf("the trained rows would change")
	}
	// Bytes per block: old positions, new positions.
	ob := len(a) / outer
	nb := ob / max(int(od[axis]), 1) * int(nd[axis])
	for o := range outer {
		if (o+1)*nb > len(b) || !slices.Equal(a[o*ob:(o+1)*ob], b[o*nb:o*nb+ob]) {
			return fmt.Errorf("the trained rows would change")
		}
	}
	return nil
}

// sinusoidRows continues a stored sinusoidal table with the formula the
// audit measured: column pairs (sin, cos) of frequency ω_k at angle
// ω_k·(row - row0), checked on every stored row first.
func (x *Extended) sinusoidRows(it *ExtendItem, tab *tableConst, vals []float64, rows int) error {
	ev := it.Plan.(*tablePlan).ev
	p := it.Finding.Params.(*SinusoidalParams)
	if len(ev.Pairs) == 0 || len(ev.Pairs) != len(ev.Omega) {
		return extendErr("the sinusoidal table has no measured frequencies")
	}
	omega := slices.Clone(ev.Omega)
	// The formula's frequencies, when they are those measured.
	if p.Base != nil && p.Dim > 0 {
		den := float64(p.Dim / 2)
		if p.FreqDenominator == "d/2-1" {
			den--
		}
		exact := make([]float64, len(omega))
		ok := den > 0
		order := make([]int, len(omega))
		for k := range order {
			order[k] = k
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case omega[a] > omega[b]:
				return -1
			case omega[a] < omega[b]:
				return 1
			}
			return 0
		})
		for rank, k := range order {
			exact[k] = math.Pow(*p.Base, -float64(rank)/den)
			if math.Abs(exact[k]/omega[k]-1) > 1e-4 {
				ok = false
			}
		}
		if ok {
			omega = exact
		} else {
			it.note("the measured frequencies are not base^(-k/%s) exactly: the new rows use the measured ones", p.FreqDenominator)
		}
	}
	// Which column holds what, and the row of angle 0.
	kind := make([]int, tab.width) // -1 zero, else 2k (sin) or 2k+1 (cos)
	for j := range kind {
		kind[j] = -1
	}
	for k, pr := range ev.Pairs {
		if pr[0] >= tab.width || pr[1] >= tab.width {
			return extendErr("the sinusoidal pairs do not fit the table's %d columns", tab.width)
		}
		kind[pr[0]], kind[pr[1]] = 2*k, 2*k+1
	}
	isZero := func(r int) bool {
		for j := 0; j < tab.width; j++ {
			if tab.vals[r*tab.width+j] != 0 {
				return false
			}
		}
		return true
	}
	row0 := -1
	for r := 0; r < tab.rows && row0 < 0; r++ {
		ok := true
		for j, kd := range kind {
			v := tab.vals[r*tab.width+j]
			if kd >= 0 && kd%2 == 0 && math.Abs(v) > 1e-6 || kd >= 0 && kd%2 == 1 && math.Abs(v-1) > 1e-6 {
				ok = false
				break
			}
		}
		if ok {
			row0 = r
		}
	}
	if row0 < 0 {
		return extendErr("no row of the sinusoidal table has angle 0")
	}
	value := func(r, j int) float64 {
		kd := kind[j]
		if kd < 0 {
			return 0
		}
		th := omega[kd/2] * float64(r-row0)
		if kd%2 == 0 {
			return math.Sin(th)
		}
		return math.Cos(th)
	}
	tol := 2e-4
	if isHalfType(tab.dt) {
		tol = 4e-3
	}
	zeros := 0
	for r := 0; r < tab.rows; r++ {
		if isZero(r) {
			zeros++
			continue
		}
		for j := range kind {
			om := 0.0
			if kind[j] >= 0 {
				om = omega[kind[j]/2]
			}
			if d := math.Abs(tab.vals[r*tab.width+j] - value(r, j)); d > tol*(1+math.Abs(float64(r-row0))*om*1e-3) {
				return extendErr("row %d, column %d of the sinusoidal table is %.7g, its formula gives %.7g: the table does not follow it", r, j, tab.vals[r*tab.width+j], value(r, j))
			}
		}
	}
	for r := tab.rows; r < rows; r++ {
		for j := range kind {
			vals[r*tab.width+j] = value(r, j)
		}
	}
	if zeros > 0 {
		it.note("%d zero row(s) of the table (padding) kept", zeros)
	}
	it.note("new rows: sin/cos of ω_k·(row - %d) in float64, ω_k from base %s", row0, baseOrMeasured(p))
	return nil
}

func baseOrMeasured(p *SinusoidalParams) string {
	if p.Base == nil {
		return "(measured)"
	}
	return fmt.Sprintf("%g, denominator %s", *p.Base, p.FreqDenominator)
}

// boundedRead is a node reading a constant at positions: a Gather,
// GatherElements, GatherND or Slice of a constant (through layout ops)
// whose indices or bounds depend on the inputs' sizes, position ids or
// masks (not on token ids or content).
type boundedRead struct {
	node  *graph.Node
	base  *graph.Value
	t     *graph.Tensor
	axes  []int // the axes of size n
	index []*graph.Value
}

// widenBounded enlarges the other constants read at positions that have
// n entries along an axis (causal masks, 0, 1, 2, ... buffers, ALiBi
// bias constants): each is continued with the rule its values follow
// (0, 1, 2, ...; a function of i - j that is constant off the
// diagonal; linear), and constants equal to n in the computation of
// where it is read (MPT's max_seq_len - key_length) become N. A
// constant that follows none of these is refused.
func (x *Extended) widenBounded(n int) error {
	r := x.r
	ch := r.begin("extend", "")
	defer r.end(ch)
	N := x.Opts.To
	reads := x.boundedReads(n)
	var bases []*graph.Value
	byBase := map[*graph.Value][]boundedRead{}
	for _, rd := range reads {
		if _, ok := byBase[rd.base]; !ok {
			bases = append(bases, rd.base)
		}
		byBase[rd.base] = append(byBase[rd.base], rd)
	}
	for _, base := range bases {
		rds := byBase[base]
		rd := rds[0]
		it := x.itemReading(rd.node)
		// Constants equal to n where the reads' bounds are computed: a
		// read that counts from n counts from N, and the constant is
		// continued so that its last n entries stay.
		anchored := 0
		for _, rd := range rds {
			cs := x.indexConsts(rd, n)
			if len(cs) > 0 {
				anchored++
			}
			for _, c := range cs {
				t := x.constTensor(c)
				ints, err := t.Int64s()
				if err != nil {
					continue
				}
				for i := range ints {
					ints[i] = int64(N)
				}
				nt, err := graph.NewTensor(c.Name, t.DataType(), t.Dims(), intSlice(t.DataType(), ints))
				if err != nil {
					return err
				}
				x.widened = append(x.widened, widened{c.Name, nt})
				x.replaceConst(c, nt)
				x.record(it, ExtendEdit{Where: c.Name, What: fmt.Sprintf("bound %d of %s (%s): %d", n, nodeName(rd.node), rd.node.OpType, N)})
			}
		}
		if anchored != 0 && anchored != len(rds) {
			return extendErr("the constant %q is read at positions by %d nodes, %d of which count from its end: onnxpe cannot enlarge it for all", base.Name, len(rds), anchored)
		}
		nt, what, err := continueConst(rd.t, rd.axes, n, N, anchored > 0)
		if err != nil {
			return extendErr("the constant %q %v is read at positions by %s (%s) and has %d entries along an axis, but %v: onnxpe cannot enlarge it", base.Name, rd.t.Dims(), nodeName(rd.node), rd.node.OpType, n, err)
		}
		nt.SetName(base.Name)
		x.widened = append(x.widened, widened{base.Name, nt})
		x.replaceConst(base, nt)
		x.record(it, ExtendEdit{Where: base.Name, What: fmt.Sprintf("%s %v %v to %v, read by %s", what, rd.t.DataType(), rd.t.Dims(), nt.Dims(), readers(rds))})
	}
	return nil
}

func readers(rds []boundedRead) string {
	var s []string
	for _, rd := range rds {
		s = append(s, fmt.Sprintf("%s (%s)", nodeName(rd.node), rd.node.OpType))
	}
	if len(s) > 3 {
		return fmt.Sprintf("%s and %d more", strings.Join(s[:2], ", "), len(s)-2)
	}
	return strings.Join(s, ", ")
}

// record adds an edit to the item it belongs to, or to the report's
// other constants.
func (x *Extended) record(it *ExtendItem, e ExtendEdit) {
	if it != nil {
		it.Edits = append(it.Edits, e)
		return
	}
	x.Report.Bounded = append(x.Report.Bounded, e)
}

// itemReading is the item whose finding names node n (the ALiBi bias
// slice), or nil.
func (x *Extended) itemReading(n *graph.Node) *ExtendItem {
	name := nodeName(n)
	for _, it := range x.Report.Items {
		if it.Finding != nil && slices.Contains(it.Finding.Nodes, name) {
			return it
		}
	}
	return nil
}

// boundedReads lists the reads at positions of constants having n
// entries along some axis.
func (x *Extended) boundedReads(n int) []boundedRead {
	var out []boundedRead
	for _, nd := range x.r.M.Graph.Nodes() {
		if !isONNX(nd) {
			continue
		}
		switch nd.OpType {
		case "Gather", "GatherElements", "GatherND", "Slice":
		default:
			continue
		}
		v := nd.Input(0)
		for steps := 0; steps < 8 && v != nil && x.constTensor(v) == nil; steps++ {
			p := v.Producer()
			if p == nil || !isONNX(p) || !layoutOps[p.OpType] {
				v = nil
				break
			}
			v = p.Input(0)
		}
		if v == nil {
			continue
		}
		t := x.constTensor(v)
		if t == nil {
			continue
		}
		var axes []int
		for i, d := range t.Dims() {
			if d == int64(n) {
				axes = append(axes, i)
			}
		}
		if len(axes) == 0 {
			continue
		}
		idx := slices.DeleteFunc(slices.Clone(nd.Inputs()[1:]), func(v *graph.Value) bool { return v == nil })
		if !x.positional(idx) {
			continue
		}
		out = append(out, boundedRead{node: nd, base: v, t: t, axes: axes, index: idx})
	}
	return out
}

// positional reports whether indices vs depend on the inputs (not only on
// constants) and not on the values of token ids or content: sizes,
// positions and masks only.
func (x *Extended) positional(vs []*graph.Value) bool {
	w := x.ctx.Work()
	seen := map[*graph.Value]bool{}
	dynamic, tokens := false, false
	var walk func(v *graph.Value, depth int)
	walk = func(v *graph.Value, depth int) {
		if v == nil || seen[v] || depth > 64 {
			return
		}
		seen[v] = true
		if v.IsGraphInput() {
			dynamic = true
			if wv := w.M.Graph.Lookup(v.Name); wv != nil {
				switch w.Role(wv) {
				case RoleTokens, RoleTokenType, RoleContent:
					tokens = true
				}
			}
			return
		}
		p := v.Producer()
		if p == nil {
			return
		}
		if p.OpType == "Shape" || p.OpType == "Size" {
			dynamic = true // sizes only
			return
		}
		for _, in := range p.Inputs() {
			walk(in, depth+1)
		}
	}
	for _, v := range vs {
		walk(v, 0)
	}
	return dynamic && !tokens
}

// indexConsts lists the integer constants equal to n (scalars or one
// element) in the computation of a read's indices or bounds.
func (x *Extended) indexConsts(rd boundedRead, n int) []*graph.Value {
	var out []*graph.Value
	seen := map[*graph.Value]bool{}
	var walk func(v *graph.Value, depth int)
	walk = func(v *graph.Value, depth int) {
		if v == nil || seen[v] || depth > 24 || v == rd.base {
			return
		}
		seen[v] = true
		if t := x.constTensor(v); t != nil {
			if t.Len() == 1 && t.DataType().IsInt() {
				if ints, err := t.Int64s(); err == nil && ints[0] == int64(n) {
					out = append(out, v)
				}
			}
			return
		}
		p := v.Producer()
		if p == nil || p.OpType == "Shape" {
			return
		}
		for _, in := range p.Inputs() {
			walk(in, depth+1)
		}
	}
	for _, v := range rd.index {
		walk(v, 0)
	}
	return out
}

// intSlice converts int64 values to the Go slice NewTensor wants for dt.
func intSlice(dt graph.DataType, v []int64) any {
	switch dt {
	case graph.Int32:
		out := make([]int32, len(v))
		for i, x := range v {
			out[i] = int32(x)
		}
		return out
	case graph.Int16:
		out := make([]int16, len(v))
		for i, x := range v {
			out[i] = int16(x)
		}
		return out
	case graph.Int8:
		out := make([]int8, len(v))
		for i, x := range v {
			out[i] = int8(x)
		}
		return out
	case graph.Uint8:
		out := make([]uint8, len(v))
		for i, x := range v {
			out[i] = uint8(x)
		}
		return out
	}
	return v
}

// continueConst enlarges t from n to N entries along axes, by the rule
// its values follow: 0, 1, 2, ... (plus a constant) along one axis; a
// function of i - j over two axes that is constant for i > j and for
// i < j (causal masks); linear along one axis. endAnchored keeps the last
// n entries equal (the read counts from the end) instead of the first.
func continueConst(t *graph.Tensor, axes []int, n, N int, endAnchored bool) (*graph.Tensor, string, error) {
	vals, err := t.Float64s()
	if err != nil {
		return nil, "", err
	}
	dims := t.Dims()
	nd := slices.Clone(dims)
	for _, a := range axes {
		nd[a] = int64(N)
	}
	strides := func(d []int64) []int {
		s := make([]int, len(d))
		acc := 1
		for i := len(d) - 1; i >= 0; i-- {
			s[i] = acc
			acc *= int(d[i])
		}
		return s
	}
	so, sn := strides(dims), strides(nd)
	total := 1
	for _, d := range nd {
		total *= int(d)
	}
	out := make([]float64, total)
	// index decomposes a flat index of the new tensor.
	idx := func(flat int, st []int, d []int64) []int {
		ix := make([]int, len(d))
		for i := range d {
			ix[i] = flat / st[i] % int(d[i])
		}
		return ix
	}
	at := func(ix []int) float64 {
		f := 0
		for i, x := range ix {
			f += x * so[i]
		}
		return vals[f]
	}
	var what string
	switch {
	case len(axes) == 2 && isToeplitz(vals, dims, axes, at):
		a, b := axes[0], axes[1]
		what = "function of i - j (causal mask), continued"
		for f := range out {
			ix := idx(f, sn, nd)
			d := ix[a] - ix[b]
			o := slices.Clone(ix)
			switch {
			case d > 0:
				o[a], o[b] = 1, 0
			case d < 0:
				o[a], o[b] = 0, 1
			default:
				o[a], o[b] = 0, 0
			}
			out[f] = at(o)
		}
	default:
		ax := -1
		for _, a := range axes {
			if ok, _ := isLinear(vals, dims, a, at); ok {
				ax = a
				break
			}
		}
		if ax < 0 {
			return nil, "", fmt.Errorf("its values are neither 0, 1, 2, ... nor linear along that axis, nor a function of i - j")
		}
		_, arange := isLinear(vals, dims, ax, at)
		what = "linear along an axis, continued"
		if arange {
			what = "0, 1, 2, ... continued"
		}
		nd = slices.Clone(dims)
		nd[ax] = int64(N)
		sn = strides(nd)
		total = 1
		for _, d := range nd {
			total *= int(d)
		}
		out = make([]float64, total)
		shift := 0
		if endAnchored {
			shift = N - n
		}
		for f := range out {
			ix := idx(f, sn, nd)
			k := ix[ax] - shift
			o0 := slices.Clone(ix)
			o0[ax] = 0
			o1 := slices.Clone(ix)
			o1[ax] = 1
			v0, v1 := at(o0), at(o1)
			out[f] = v0 + (v1-v0)*float64(k)
		}
		// Keep the stored entries exactly.
		for f := range out {
			ix := idx(f, sn, nd)
			k := ix[ax] - shift
			if k >= 0 && k < n {
				o := slices.Clone(ix)
				o[ax] = k
				out[f] = at(o)
			}
		}
	}
	var nt *graph.Tensor
	dt := t.DataType()
	switch {
	case dt.IsFloat():
		nt, err = graph.TensorFromFloat64(t.Name(), dt, nd, out)
	case dt == graph.Bool:
		b := make([]bool, len(out))
		for i, v := range out {
			b[i] = v != 0
		}
		nt, err = graph.NewTensor(t.Name(), dt, nd, b)
	case dt.IsInt():
		ints := make([]int64, len(out))
		for i, v := range out {
			ints[i] = int64(math.Round(v))
		}
		nt, err = graph.NewTensor(t.Name(), dt, nd, intSlice(dt, ints))
	default:
		return nil, "", fmt.Errorf("element type %v", dt)
	}
	return nt, what, err
}

// isToeplitz reports whether t's values over axes a, b depend only on
// i - j (the same for every other index), constant for i > j and for
// i < j.
func isToeplitz(vals []float64, dims []int64, axes []int, at func([]int) float64) bool {
	a, b := axes[0], axes[1]
	n := int(dims[a])
	ok := true
	forEach(dims, func(ix []int) {
		if !ok {
			return
		}
		d := ix[a] - ix[b]
		o := slices.Clone(ix)
		switch {
		case d > 0:
			o[a], o[b] = 1, 0
		case d < 0:
			o[a], o[b] = 0, 1
		default:
			o[a], o[b] = 0, 0
		}
		if n < 2 || at(o) != at(ix) {
			ok = false
		}
	})
	return ok
}

// isLinear reports whether t's values are linear along axis a (exactly
// for integers, within float rounding otherwise), and whether they are
// 0, 1, 2, ... plus a constant.
func isLinear(vals []float64, dims []int64, a int, at func([]int) float64) (bool, bool) {
	if dims[a] < 2 {
		return false, false
	}
	ok, arange := true, true
	forEach(dims, func(ix []int) {
		if !ok {
			return
		}
		o0 := slices.Clone(ix)
		o0[a] = 0
		o1 := slices.Clone(ix)
		o1[a] = 1
		v0, v1 := at(o0), at(o1)
		want := v0 + (v1-v0)*float64(ix[a])
		if math.Abs(at(ix)-want) > 1e-6*max(1, math.Abs(want)) {
			ok = false
		}
		if v1-v0 != 1 {
			arange = false
		}
	})
	return ok, ok && arange
}

// forEach calls f with every index of dims.
func forEach(dims []int64, f func([]int)) {
	ix := make([]int, len(dims))
	total := 1
	for _, d := range dims {
		total *= int(d)
	}
	for k := 0; k < total; k++ {
		rem := k
		for i := len(dims) - 1; i >= 0; i-- {
			ix[i] = rem % int(dims[i])
			rem /= int(dims[i])
		}
		f(ix)
	}
}

// forgetShapes removes the value_info declarations of values computed
// from the constants the extension changed (their sizes may have
// changed); graph outputs keep theirs.
func (x *Extended) forgetShapes() {
	g := x.r.M.Graph
	down := map[*graph.Value]bool{}
	stack := slices.Clone(x.changed)
	for _, v := range stack {
		down[v] = true
	}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, u := range v.Uses() {
			for _, o := range u.Node.Outputs() {
				if !down[o] {
					down[o] = true
					stack = append(stack, o)
				}
			}
		}
	}
	g.ValueInfo = slices.DeleteFunc(g.ValueInfo, func(v *graph.Value) bool { return down[v] && !v.IsGraphOutput() })
}
