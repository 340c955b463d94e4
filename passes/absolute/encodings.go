package absolute

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
	"math"
	"slices"
)

// TableEvidence is what the absolute detector read: the position table
// added to the token embeddings.
type TableEvidence struct {
	// Add is the original node adding the encoding to the embeddings;
	// Value the original value added.
	Add, Value string
	// Table names the stored table (an initializer), when there is one,
	// Rows its number of positions and Axis the axis that holds them (the
	// axis its reader indexes: 0 for [positions, dim], 1 for a table
	// stored transposed, [dim, positions]).
	Table string
	Rows  int
	Axis  int
	// Rows0 are the first rows of the encoding as the probe evaluated them
	// (positions Offset, Offset+1, ...), [len][dim].
	Rows0 [][]float64
	// Omega are the frequencies of a sinusoidal table, per sin/cos pair.
	Omega []float64
	// Change is the largest difference between the rows of two positions
	// (Rows0), TokenChange between the rows of the same positions for
	// other tokens (-1 when that probe could not run).
	Change, TokenChange float64
	// Sample is the encoding at more positions (0, 1, ... up to 64) as one
	// probe evaluated it, for reports; Rows0 when the model takes no more.
	Sample [][]float64
	// Positions says where the rows are read (nil when the rows do not
	// follow positions; PositionsWhy says why).
	Positions    *probe.Positions
	PositionsWhy string
	// Pairs are the (sin, cos) columns of a sinusoidal encoding, in the
	// order of Omega.
	Pairs [][2]int
	// Angles is the exact arithmetic of a computed sinusoidal encoding
	// (nil for a stored table, or when it could not be confirmed on the
	// measured rows: ExactWhy says why).
	Angles   *probe.Angles
	ExactWhy string
}

// Encoding is a value added to the token embeddings that changes with the
// position, as the absolute detectors share it: where it is added, its
// rows at probe positions, the stored table it reads and the sinusoid its
// rows lie on. The sinusoidal and the learned detector each claim the
// encodings of their scheme.
type Encoding struct {
	// X is the value added (the position table of a fused op); Dim its
	// width.
	X   *graph.Value
	Dim int
	// Rows are X's rows at consecutive probe positions; Probe the probe
	// that evaluated them.
	Rows  [][]float64
	Probe *probe.Probe
	// Varies reports whether the rows differ (equal rows read by an index
	// that follows the position are kept, with a note).
	Varies bool
	// Table is the stored table the rows are read from (nil when they are
	// computed), TableRows its positions and TableAxis the axis holding
	// them.
	Table                *graph.Value
	TableRows, TableAxis int
	// Layers are the blocks it reaches; Nodes the original nodes carrying
	// it; Notes what a finding of it says.
	Layers []int
	Nodes  []string
	Notes  []string
	// Evidence is the finding's evidence (the claiming detector adds what
	// its scheme measures).
	Evidence *TableEvidence
	// Sin is the sinusoid the rows lie on (nil when they lie on none, or
	// were not read).
	Sin *SinFit
	// Fused reports an EmbedLayerNormalization's position table: Offset is
	// the row of its first position, Unread (when set) why its values
	// could not be read (the finding is then learned, with that note).
	Fused  bool
	Offset int
	Unread string
	// NotEvaluated, when set, says why the added value could not be
	// evaluated at any size a probe allows (a model whose shapes fix more
	// positions than a probe may hold, its rows not computed position by
	// position): whether it changes with the position is not known. No
	// absolute scheme claims it (Rows, Dim and the table are not set);
	// the audit reports its layers as unknown with that reason.
	NotEvaluated string
}

// Absolute finds the position-dependent values added to the embeddings.
var Absolute = &passes.Pass[[]*Encoding]{
	Name: "absolute",
	Doc: `Find absolute position encodings: values added to the embeddings that change with the position.

A candidate is a value that does not depend on the tokens' content (or a
constant with a row per position) added to an activation, outside the
score paths of the attention blocks. It is evaluated on probe positions:
rows that do not change with the position are not an encoding (token-type
embeddings). The rows are fitted by sin/cos circles whose angles grow
linearly with the position (the sinusoidal detector claims those; the
learned detector the others). A stored table in the value's cone gives
its number of positions. EmbedLayerNormalization's position-embedding
input is such a table too, read at the op's position_ids. The encoding
reaches the blocks downstream of the addition.`,
	Requires: []passes.Analyzer{work.Normalize, attn.Blocks},
	Run:      runAbsolute,
}

func runAbsolute(c *passes.Context) ([]*Encoding, error) {
	w := work.Of(c)
	blocks := passes.Result(c, attn.Blocks)
	onScores := map[*graph.Node]bool{}
	for _, b := range blocks {
		for _, n := range b.ScorePath {
			onScores[n] = true
		}
	}
	var out []*Encoding
	for _, g := range attn.DetectGraphs(w) {
		for n := range g.All() {
			if n.OpType != "Add" || !work.IsONNX(n) || onScores[n] {
				continue
			}
			acts := w.ActInputs(n)
			if len(acts) != 1 || len(n.Inputs()) != 2 {
				continue
			}
			act, x := n.Input(acts[0]), n.Input(1-acts[0])
			if e := absoluteAt(w, c, n, act, x, blocks); e != nil {
				out = append(out, e)
			}
		}
	}
	for _, g := range attn.DetectGraphs(w) {
		for n := range g.All() {
			if n.OpType != "EmbedLayerNormalization" || n.Domain != "com.microsoft" {
				continue
			}
			if e := embedLayerNorm(w, c, n, blocks); e != nil {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// claimAbsolute turns the encodings claim accepts into findings: those
// added by a node first (merged when their params are the same), then
// those of fused ops (merged when their notes are the same too).
func ClaimAbsolute(c *passes.Context, claim func(e *Encoding) *passes.Finding) []*passes.Finding {
	w := work.Of(c)
	var out, fused []*passes.Finding
	alike := func(g, f *passes.Finding) bool { return g.Fused == f.Fused && slices.Equal(g.Notes, f.Notes) }
	for _, e := range passes.Result(c, Absolute) {
		if e.NotEvaluated != "" {
			continue // no scheme's: the audit's unknown
		}
		f := claim(e)
		switch {
		case f == nil:
		case e.Fused:
			if f.Layers == nil {
				f.Layers = []int{}
			}
			fused = w.MergeFinding(fused, f, alike)
		default:
			out = w.MergeFinding(out, f, nil)
		}
	}
	return append(out, fused...)
}

func absoluteAt(w *work.Work, c *passes.Context, add *graph.Node, act, x *graph.Value, blocks []*attn.Block) *Encoding {
	at := w.OrigName(add)
	sa, sx := w.Shape(act), w.Shape(x)
	if sa.Rank() < 2 || sx.Rank() < 2 {
		return nil
	}
	d := sa.Last()
	if !d.Known() || sx.Last() != d {
		return nil
	}
	if !mayHoldRows(w, sa, sx, w.IsConst(x)) {
		return nil
	}
	if attentionTerm(w, add.Output(0), blocks) {
		c.Miss("absolute", at, "a term of the attention, not an encoding of the embeddings: the value reaches q, k or v after their projection, or the scores", 1)
		return nil
	}
	rows, pr, err := probeRows(w, x)
	if err != nil {
		c.Miss("absolute", at, "the added value could not be evaluated: "+err.Error(), 1)
		if !tooLarge(err) {
			return nil
		}
		// Maybe an encoding: the audit says it could not be probed.
		return &Encoding{X: x, Layers: ReachedBlocks(w, add.Output(0), blocks), Nodes: w.OrigNames(append([]*graph.Node{add}, w.Cone(x)...)),
			NotEvaluated: fmt.Sprintf("the value added at %s could not be evaluated at any size a probe allows: %v", at, err)}
	}
	if pr.Synthetic(x) {
		c.Miss("absolute", at, "the added value comes from parameters given as inputs", 1)
		return nil
	}
	change := rowsChange(rows)
	varies := change > 0
	tokens, terr := tokenChange(w, pr, x, rows)
	if terr == nil && tokens > rowsTol(w, x, rows) {
		c.Miss("absolute", at, fmt.Sprintf("the added value changes when the tokens change at the same positions (by up to %.3g): it depends on the tokens, it is not an encoding of positions", tokens), 3)
		return nil
	}
	cone := w.Cone(x)
	var notes []string
	if !varies {
		// The same rows everywhere, but maybe read from a table by an index
		// that follows the position (a table whose rows happen to be equal).
		if !indexFollowsPosition(w, pr, probe.FoldedCone(w, cone, x)) {
			c.Miss("absolute", at, "the added value is the same at every position (not a position encoding)", 2)
			return nil
		}
		notes = append(notes, equalRowsNote)
	}
	e := &Encoding{X: x, Dim: int(d), Rows: rows, Probe: pr, Varies: varies, Notes: notes}
	// The table: a stored table read at the positions, or else the added
	// constant itself.
	e.Table, e.TableAxis, e.TableRows = storedTable(w, x, cone, int(d))
	if e.Table == nil && w.IsConst(x) {
		e.Table, e.TableRows, e.TableAxis = x, len(rows), RowsAxis(w.Const(x))
	}
	ev := &TableEvidence{Add: at, Value: w.OrigValue(x), Rows0: rows, Sample: sampleRows(w, x, rows), Change: change, TokenChange: tokens}
	if terr != nil {
		ev.TokenChange = -1
	}
	ev.Positions, ev.PositionsWhy = tablePositions(w, x)
	if e.Table != nil {
		ev.Table, ev.Rows, ev.Axis = w.Name(e.Table), e.TableRows, e.TableAxis
	}
	e.Evidence = ev
	e.Layers = ReachedBlocks(w, add.Output(0), blocks)
	e.Nodes = w.OrigNames(append([]*graph.Node{add}, cone...))
	if sp, ok := FitSinusoid(rows, int(d)); ok {
		e.Sin = &sp
	}
	return e
}

// rowsChange is the largest difference between an element of a row and
// of the first row.
func rowsChange(rows [][]float64) float64 {
	out := 0.0
	for _, r := range rows[1:] {
		for j, x := range r {
			out = max(out, math.Abs(x-rows[0][j]))
		}
	}
	return out
}

// tokenChange evaluates x with every token id moved (another token at
// every position, the positions the same) and returns the largest
// difference from rows: an encoding of positions does not change.
func tokenChange(w *work.Work, p *probe.Probe, x *graph.Value, rows [][]float64) (float64, error) {
	q := probe.NewProbe(w, p.Batch, p.Seq, p.Start)
	q.Past, q.TokenShift = p.Past, 1
	other, err := evalRows(q, x)
	if err != nil {
		return 0, err
	}
	if len(other) != len(rows) {
		return math.Inf(1), nil
	}
	out := 0.0
	for i, r := range other {
		for j, v := range r {
			out = max(out, math.Abs(v-rows[i][j]))
		}
	}
	return out, nil
}

// rowsTol is what two evaluations of x may differ by: 64 rounding steps
// of its type, relative to its largest element.
func rowsTol(w *work.Work, x *graph.Value, rows [][]float64) float64 {
	top := 0.0
	for _, r := range rows {
		for _, v := range r {
			top = max(top, math.Abs(v))
		}
	}
	eps := 0x1p-23
	switch w.ElemType(x) {
	case graph.Float16:
		eps = 0x1p-10
	case graph.BFloat16:
		eps = 0x1p-7
	}
	return 64 * eps * (1 + top)
}

// ReachedBlocks lists the blocks whose scores depend on v.
func ReachedBlocks(w *work.Work, v *graph.Value, blocks []*attn.Block) []int {
	return attn.Downstream(w, []*graph.Value{v}, blocks)
}

// startOffset is the table row read at the first position of a sequence
// without cache: the row of the first probed row, less the probe's cache
// length when the rows move with it (positions counted from the length of
// a KV cache given as input, GPT-2's past_key_values_length: a second probe
// with a longer cache shows it).
func startOffset(w *work.Work, p *probe.Probe, x, tv *graph.Value, axis int, rows [][]float64) (int, bool) {
	off, ok := rowOffset(w, tv, axis, rows)
	if !ok || p.Past == 0 {
		return off, ok
	}
	const more = 2
	p2 := probe.NewProbe(w, p.Batch, p.Seq, p.Start)
	p2.Past = p.Past + more
	rows2, _ := TableRows(w, p2, x)
	if rows2 == nil {
		return off, ok
	}
	if off2, ok2 := rowOffset(w, tv, axis, rows2); ok2 && off2-off == more && off >= p.Past {
		return off - p.Past, true
	}
	return off, ok
}

// rowOffset is the index of the table row (the table's elements at one
// index of its axis of positions) equal to the first probed row.
func rowOffset(w *work.Work, tv *graph.Value, axis int, rows [][]float64) (int, bool) {
	t, ok := ViewTable(w, tv, axis)
	if !ok || len(rows) == 0 || t.Width() != len(rows[0]) {
		return 0, false
	}
	buf := make([]float64, t.Width())
	for r := 0; r < t.N; r++ {
		if slices.Equal(t.Row(r, buf), rows[0]) {
			return r, true
		}
	}
	return 0, false
}

// tableView is a stored table read as rows of positions: row r holds the
// elements whose index on the axis of positions is r, in the order of the
// other axes ([positions, dim] and its transpose [dim, positions] give
// the same rows).
type tableView struct {
	v               []float64
	N, outer, inner int // positions; elements before and after the axis
}

// viewTable views the constant tv with its positions on axis.
func ViewTable(w *work.Work, tv *graph.Value, axis int) (tableView, bool) {
	return newTableView(w.Const(tv), axis)
}

func newTableView(t *kernels.Tensor, axis int) (tableView, bool) {
	if t == nil || axis < 0 || axis >= t.Rank() {
		return tableView{}, false
	}
	v := tableView{v: t.Float64s(), N: t.Shape[axis], outer: 1, inner: 1}
	for _, x := range t.Shape[:axis] {
		v.outer *= x
	}
	for _, x := range t.Shape[axis+1:] {
		v.inner *= x
	}
	return v, v.N > 0
}

// RowMajor lays out t, the stored table of the evidence, as [positions]
// [width] row-major values whichever of its axes holds the positions
// (Axis): what the table holds at position r is row r.
func (ev *TableEvidence) RowMajor(t *kernels.Tensor) (vals []float64, width int, ok bool) {
	v, ok := newTableView(t, ev.Axis)
	if !ok {
		return nil, 0, false
	}
	if v.outer == 1 {
		return v.v, v.inner, true
	}
	vals = make([]float64, 0, len(v.v))
	buf := make([]float64, v.Width())
	for r := 0; r < v.N; r++ {
		vals = append(vals, v.Row(r, buf)...)
	}
	return vals, v.Width(), true
}

// width is the number of elements per position.
func (t tableView) Width() int { return t.outer * t.inner }

// row is row r, in buf when its elements are not contiguous.
func (t tableView) Row(r int, buf []float64) []float64 {
	if t.outer == 1 {
		return t.v[r*t.inner : (r+1)*t.inner]
	}
	for o := 0; o < t.outer; o++ {
		copy(buf[o*t.inner:(o+1)*t.inner], t.v[(o*t.N+r)*t.inner:(o*t.N+r+1)*t.inner])
	}
	return buf
}

// SinFit is a sinusoidal table read from rows (FitSinusoid).
type SinFit struct {
	Layout string
	Pairs  [][2]int // (sin column, cos column)
	Omega  []float64
	Base   float64
	Denom  string
	Offset int
	Note   string
}

// FitSinusoid checks whether rows (consecutive positions, ascending) are
// sin/cos pairs with angles linear in the position: the layout (which
// columns pair), the frequency of every pair, the base and denominator
// that give them (the denominator whose base is round) and the first
// row's position. Stored sinusoids of other schemes (a relative sinusoid's
// rows of consecutive distances) are read with it too.
func FitSinusoid(rows [][]float64, d int) (SinFit, bool) {
	if d%2 != 0 || len(rows) < 3 {
		return SinFit{}, false
	}
	layouts := []struct {
		name  string
		pairs func(i int) (int, int)
	}{
		{"interleaved", func(i int) (int, int) { return 2 * i, 2*i + 1 }},
		{"concat_sin_cos", func(i int) (int, int) { return i, i + d/2 }},
	}
	for _, l := range layouts {
		f := SinFit{Layout: l.name}
		ok := true
		for i := 0; i < d/2 && ok; i++ {
			s, c := l.pairs(i)
			f.Pairs = append(f.Pairs, [2]int{s, c})
			theta := make([]float64, len(rows))
			for p, r := range rows {
				if math.Abs(r[s]*r[s]+r[c]*r[c]-1) > 2e-3 {
					ok = false
					break
				}
				theta[p] = math.Atan2(r[s], r[c])
			}
			if !ok {
				break
			}
			om := probe.UnwrapSlope(theta)
			for p := range theta {
				if math.Abs(math.Remainder(theta[p]-theta[0]-om*float64(p), 2*math.Pi)) > 2e-3 {
					ok = false
				}
			}
			f.Omega = append(f.Omega, om)
		}
		if !ok || f.Omega[0] <= 0 {
			continue
		}
		// Base and denominator: ω_i = base^(-i/D), D = d/2 or d/2-1; the
		// denominator is the one whose base is a round number.
		n := d / 2
		x := make([]float64, n)
		y := make([]float64, n)
		sig := make([]float64, n)
		for i, om := range f.Omega {
			x[i], y[i] = float64(i), math.Log(om)
			sig[i] = 1e-3/(om*float64(len(rows))) + 1e-6
		}
		_, slope := probe.Wlinreg(x, y, sig)
		cands := []struct {
			denom string
			D     float64
		}{{"d/2", float64(n)}, {"d/2-1", float64(n - 1)}}
		f.Base = math.NaN()
		for _, cd := range cands {
			if b, ok := roundNumber(math.Exp(-slope*cd.D), 1e-4); ok {
				f.Base, f.Denom = b, cd.denom
				break
			}
		}
		if math.IsNaN(f.Base) {
			f.Base, f.Denom = probe.Snap(math.Exp(-slope*float64(n)), 1e-4), "d/2"
			f.Note = "freq_denominator: neither d/2 nor d/2-1 gives a round base; reported d/2"
		}
		// The first row's position: its phase over the frequency, from a
		// slow pair (no wrap-around for offsets below π/ω).
		k := n / 2
		s, cc := f.Pairs[k][0], f.Pairs[k][1]
		th := math.Atan2(rows[0][s], rows[0][cc])
		f.Offset = int(math.Round(th / f.Omega[k]))
		return f, true
	}
	return SinFit{}, false
}

// roundNumber returns the number of at most three significant digits
// within rel of v.
func roundNumber(v, rel float64) (float64, bool) {
	for digits := 1; digits <= 3; digits++ {
		if r := snapDigits(v, digits); math.Abs(r-v) <= rel*math.Abs(v) {
			return r, true
		}
	}
	return v, false
}

func snapDigits(v float64, digits int) float64 {
	if v == 0 {
		return 0
	}
	e := math.Pow(10, math.Floor(math.Log10(math.Abs(v)))-float64(digits-1))
	return math.Round(v/e) * e
}

// equalRowsNote is the note of a table whose rows are equal.
const equalRowsNote = "the table's rows are equal: it adds the same vector at every position"

// indexFollowsPosition reports whether nodes (a cone, with what was folded
// into its constants) gather a table by an index that changes from
// position to position (constant where the model's shapes fix the
// positions).
func indexFollowsPosition(w *work.Work, p *probe.Probe, nodes []*graph.Node) bool {
	for _, n := range nodes {
		if n.OpType != "Gather" || !w.IsConst(n.Input(0)) {
			continue
		}
		t := w.Const(n.Input(1))
		if t == nil {
			var err error
			if t, err = p.Value(n.Input(1)); err != nil {
				continue
			}
		}
		if t.Len() < 2 || t.Rank() == 0 {
			continue
		}
		idx := t.Int64s()
		last := t.Shape[t.Rank()-1]
		for i := 1; i < last; i++ {
			if idx[i] != idx[0] {
				return true
			}
		}
	}
	return false
}

// embedLayerNorm reads the position table of an EmbedLayerNormalization
// op: x = word[input_ids] + position[position_ids] (+ segment[segment_ids]),
// with positions 0..S-1 when the op has no position_ids input.
func embedLayerNorm(w *work.Work, c *passes.Context, n *graph.Node, blocks []*attn.Block) *Encoding {
	at := w.OrigName(n)
	in := func(i int) *graph.Value {
		if i < len(n.Inputs()) {
			return n.Input(i)
		}
		return nil
	}
	table, posIDs := in(3), in(8)
	ts := w.Shape(table)
	if table == nil || ts.Rank() != 2 {
		c.Miss("fused", at, "EmbedLayerNormalization without a 2-D position_embedding", 0)
		return nil
	}
	var layers []int
	for _, o := range n.Outputs() {
		if o.Name != "" {
			layers = append(layers, ReachedBlocks(w, o, blocks)...)
		}
	}
	e := &Encoding{X: table, Fused: true, Layers: passes.SortedUnique(layers), Table: table}
	nodes := []*graph.Node{n}
	nodes = append(nodes, w.Cone(table, posIDs)...)
	e.Nodes = w.OrigNames(nodes)
	if ts.Dims[1].Known() {
		e.Dim = int(ts.Dims[1])
	}
	if ts.Dims[0].Known() {
		e.TableRows = int(ts.Dims[0])
	}
	e.Evidence = &TableEvidence{Add: at, Value: w.OrigValue(table), Table: w.Name(table), Rows: e.TableRows}
	t := w.Const(table)
	if t == nil {
		why := "it is a graph input"
		if table.Const != nil {
			why = fmt.Sprintf("it could not be read (%v)", w.ConstErr[table])
		}
		e.Unread = fmt.Sprintf("the position table is not in the file (%s): reported as learned, its values not checked; position_offset unknown", why)
		return e
	}
	// The positions the op reads: position_ids as a probe gives them
	// (positions 0..15, fewer for a shorter table), or 0..S-1 without
	// them.
	seq := 16
	if e.TableRows > 0 {
		seq = min(seq, e.TableRows)
	}
	pos := make([]int64, seq)
	for i := range pos {
		pos[i] = int64(i)
	}
	if posIDs != nil {
		p := probe.NewProbe(w, 1, seq, 0)
		pt, err := p.Value(posIDs)
		if err != nil || pt.Len() < 3 {
			c.Miss("fused", at, "the position_ids of EmbedLayerNormalization could not be evaluated", 1)
			e.Unread = "position_offset: the position_ids could not be evaluated"
			return e
		}
		v := pt.Int64s()
		pos = v[:min(len(v), pt.Shape[pt.Rank()-1])]
	}
	vals := t.Float64s()
	var rows [][]float64
	for _, r := range pos {
		if r < 0 || int(r) >= e.TableRows {
			e.Unread = fmt.Sprintf("position_offset: the positions reach row %d of a %d-row table", r, e.TableRows)
			return e
		}
		rows = append(rows, slices.Clone(vals[int(r)*e.Dim:(int(r)+1)*e.Dim]))
	}
	e.Evidence.Rows0, e.Rows = rows, rows
	e.Offset = int(pos[0])
	if !slices.ContainsFunc(rows, func(r []float64) bool { return !slices.Equal(r, rows[0]) }) {
		e.Notes = append(e.Notes, equalRowsNote)
	}
	if sp, ok := FitSinusoid(rows, e.Dim); ok {
		e.Sin = &sp
	}
	return e
}
