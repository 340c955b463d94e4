package disentangled

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
	"math"
	"slices"
)

// DisentangledEvidence is what the disentangled-attention detector read.
type Evidence struct {
	// Buckets is the relative position (before the clamp to the table)
	// of every distance q - k from -MaxDist to MaxDist, index n + MaxDist,
	// as the model computes it.
	Buckets []int
	MaxDist int
	// Span is the offset added to the relative positions (the table has
	// 2·Span rows).
	Span int
	// Index names the value holding the clamped table index of the c2p
	// term (or of p2c without c2p), Relative the relative positions
	// before the clamp.
	Index, Relative string
	// Blocks are the layers' terms.
	Blocks []DisentangledBlock
	// C2PIndex and P2CIndex name the clamped table indexes of the first
	// layer's terms ("" for a term it lacks), RelativePositions the
	// relative positions after the bucket function (the value the c2p
	// index offsets by Span; "" when no one value holds them).
	C2PIndex, P2CIndex, RelativePositions string
	// LogRatio is the constant the bucket function divides the log of
	// large distances by (log((max_relative_positions-1)/(buckets/2)) as
	// the graph holds it) and LogRatioFrom the value holding it; "" when
	// the positions are not bucketed or no constant of the graph holds it.
	LogRatio     float64
	LogRatioFrom string
}

// DisentangledBlock is one layer's position terms (original node names of
// the products; "" for a term the layer lacks).
type DisentangledBlock struct {
	Layer    int
	C2P, P2C string
}

// DisentangledPass finds DeBERTa's disentangled attention.
var Detect = &passes.Pass[[]*passes.Finding]{
	Name: "disentangled",
	Doc: `Find disentangled attention (DeBERTa): content-to-position and position-to-content terms.

A block's scores hold, besides q·k, terms q·P_kᵀ and k·P_qᵀ whose columns
are gathered by an index computed from positions: the products of the
content with a table of relative-position embeddings, read at the
relative position of each query and key. The term whose content is q is
c2p, the one whose content is k p2c. The index, before its clamp to the
table, evaluated over long probes is the bucket function: its exact
range and logarithmic steps give position_buckets and
max_relative_positions. The position tables are the relative embeddings
projected by the content projections when one relative embedding
reproduces both (share_att_key); the scores' divisor sqrt(d·s) gives the
scale factor s.`,
	Requires: []passes.Analyzer{work.Normalize, attn.Blocks},
	Run:      runDisentangled,
}

func runDisentangled(c *passes.Context) ([]*passes.Finding, error) {
	w := work.Of(c)
	var out []*passes.Finding
	for _, b := range passes.Result(c, attn.Blocks) {
		f, why := disentangledAt(w, b)
		if f == nil {
			if why != "" {
				c.Miss("disentangled", w.OrigName(b.Node()), why, 1)
			}
			continue
		}
		out = w.MergeFinding(out, f, nil)
	}
	return out, nil
}

func disentangledAt(w *work.Work, b *attn.Block) (*passes.Finding, string) {
	if b.QK == nil || b.Softmax == nil {
		return nil, ""
	}
	c2p, p2c := positionTerms(w, b)
	if c2p == nil && p2c == nil {
		return nil, ""
	}
	main := c2p
	if main == nil {
		main = p2c
	}
	// The relative positions: the index before its clamp to the table.
	cl := clampOf(w, main.Index)
	if cl == nil {
		return nil, "the term's index is not a clamped function of the positions"
	}
	p := probe.NewProbe(w, 1, probeLen, 0)
	span, why := tableSpan(w, p, main, cl)
	if why != "" {
		return nil, why
	}
	buckets, why := relativeOf(p, cl.x, span, main == p2c)
	if why != "" {
		return nil, why
	}
	params, notes := positionParams(buckets, span)
	params.AttTypes = attTypes(c2p, p2c)
	notes = append(notes, shareAttKey(w, params, c2p, p2c)...)
	notes = append(notes, scaleFactor(w, b, params, c2p, p2c)...)
	ev := &Evidence{Buckets: buckets, MaxDist: probeLen - 1, Span: span, Index: w.Name(main.Index), Relative: w.Name(cl.x)}
	fillEvidence(w, ev, params, cl, c2p, p2c)
	f := &passes.Finding{Scheme: Name, Layers: []int{b.Index}, Params: params, Notes: notes, Evidence: ev}
	f.Nodes = w.OrigNames(termNodes(w, cl.node, c2p, p2c))
	ev.Blocks = []DisentangledBlock{{Layer: b.Index, C2P: origName(w, c2p), P2C: origName(w, p2c)}}
	return f, ""
}

// probeLen is the length the relative positions are evaluated at: long
// enough for the logarithmic buckets of every published configuration.
const probeLen = 512

// positionTerms are the block's score terms gathered by an index that is
// not a sinusoid of distances (relative_sinusoidal): c2p when the content
// it multiplies is the block's query (up to layout and a constant scale),
// p2c when it is the key.
func positionTerms(w *work.Work, b *attn.Block) (c2p, p2c *attn.ScoreTerm) {
	qRoot, _ := scaledRoot(w, b.QK.Input(0))
	kRoot, _ := scaledRoot(w, b.QK.Input(1))
	for _, t := range attn.ScoreTerms(w, b) {
		if t.Gather == nil {
			continue
		}
		if a, _, _ := probe.SinCosOf(w.Cone(t.Pos)); a != nil {
			continue
		}
		t := t
		switch root, _ := scaledRoot(w, t.Content); root {
		case qRoot:
			c2p = &t
		case kRoot:
			p2c = &t
		}
	}
	return c2p, p2c
}

func attTypes(c2p, p2c *attn.ScoreTerm) []string {
	var out []string
	if c2p != nil {
		out = append(out, "c2p")
	}
	if p2c != nil {
		out = append(out, "p2c")
	}
	return out
}

// tableSpan is half the rows of the position table the term's index
// reads (the table holds 2·span rows, distance 0 at row span): the
// product's last axis when the shapes fix it, else the clamp's upper
// bound plus one, evaluated at the probe's length (DeBERTa v1 slices its
// table to 2·min(length, max_relative_positions) rows).
func tableSpan(w *work.Work, p *probe.Probe, t *attn.ScoreTerm, cl *clamp) (int, string) {
	rows := 0
	if s := w.Shape(t.Prod.Output(0)); s.Last().Known() {
		rows = int(s.Last())
	} else if cl.hi != nil {
		hi, err := p.Value(cl.hi)
		if err != nil || hi.Len() != 1 {
			return 0, "the position table's size is not known: its clamp's upper bound could not be evaluated"
		}
		rows = int(math.Round(hi.Float64s()[0])) + 1
	}
	if rows < 2 || rows%2 != 0 {
		return 0, "the position table's size is not known"
	}
	return rows / 2, ""
}

// relativeOf evaluates the relative positions rel (the index before its
// clamp) over the probe and returns the relative position of every
// distance q - k = n from -(S-1) to S-1 (index n + S-1): rel - span, or
// span - rel for p2c's index. It fails unless rel is [query, key] and a
// function of q - k.
func relativeOf(p *probe.Probe, rel *graph.Value, span int, p2c bool) ([]int, string) {
	const S = probeLen
	t, err := p.Value(rel)
	if err != nil {
		return nil, "the relative positions could not be evaluated: " + err.Error()
	}
	if t.Len() < S*S {
		return nil, fmt.Sprintf("the relative positions are not [query, key] (%v)", t.Shape)
	}
	v := t.Float64s()
	buckets := make([]int, 2*S-1)
	for i := 0; i < S; i++ {
		for j := 0; j < S; j++ {
			x := int(math.Round(v[i*S+j])) - span
			if p2c {
				x = -x
			}
			k := i - j + S - 1
			if i == 0 || j == 0 {
				buckets[k] = x
			} else if x != buckets[k] {
				return nil, "the index is not a function of q - k"
			}
		}
	}
	return buckets, ""
}

// positionParams reads position_buckets and max_relative_positions from
// the relative positions of the distances: the distances themselves are
// relative positions clamped to the table (span), logarithmic buckets
// give the distance they reach.
func positionParams(buckets []int, span int) (*Params, []string) {
	S := (len(buckets) + 1) / 2
	at := func(n int) int { return buckets[n+S-1] }
	exact := true
	for n := -(S - 1); n < S; n++ {
		if at(n) != n {
			exact = false
		}
	}
	params := &Params{}
	if exact {
		params.MaxRelativePositions = passes.Ptr(span)
		return params, nil
	}
	params.PositionBuckets = passes.Ptr(span)
	if m, ok := fitLogBuckets(at, span/2, S-1); ok {
		params.MaxRelativePositions = passes.Ptr(m)
		return params, nil
	}
	return params, []string{fmt.Sprintf("max_relative_positions: the relative positions follow no logarithmic bucketing of %d buckets", span)}
}

// shareAttKey sets share_att_key: one relative embedding R gives both
// tables through the content projections (P_k = R·W_k + b_k, P_q = R·W_q
// + b_q).
func shareAttKey(w *work.Work, params *Params, c2p, p2c *attn.ScoreTerm) []string {
	if c2p == nil || p2c == nil {
		return []string{"share_att_key: one position term only; the projections cannot be compared"}
	}
	shared, why := sharedProjection(w, c2p, p2c)
	params.ShareAttKey = shared
	if why != "" {
		return []string{"share_att_key: " + why}
	}
	return nil
}

// scaleFactor sets scale_factor: s of the division of q·kᵀ and of every
// position term by sqrt(d·s), d the head size, measured as the constants
// each is divided by on its way to the Softmax (before the product, on
// the term's path, after the scores are summed).
func scaleFactor(w *work.Work, b *attn.Block, params *Params, terms ...*attn.ScoreTerm) []string {
	qk, ok := qkDivisor(w, b)
	d := w.Shape(b.QK.Input(0)).Last()
	if !ok || !d.Known() || d == 0 {
		return []string{"scale_factor: q·kᵀ is not divided by one constant on its way to the Softmax"}
	}
	for _, t := range terms {
		if t == nil {
			continue
		}
		if td, ok := termDivisor(w, b, t); !ok || math.Abs(td/qk-1) > 1e-4 {
			return []string{fmt.Sprintf("scale_factor: a position term is not divided like q·kᵀ (by %.6g)", qk)}
		}
	}
	s := qk * qk / float64(d)
	if math.Abs(s-math.Round(s)) > 1e-4 || math.Round(s) < 1 {
		return []string{fmt.Sprintf("scale_factor: the scores are divided by %.6g, not by sqrt(%d·s) with a whole s", qk, int(d))}
	}
	params.ScaleFactor = passes.Ptr(math.Round(s))
	return nil
}

// fillEvidence names the values the codegen and rewrite read.
func fillEvidence(w *work.Work, ev *Evidence, params *Params, cl *clamp, c2p, p2c *attn.ScoreTerm) {
	if c2p != nil {
		ev.C2PIndex = w.Name(c2p.Index)
		if r := offsetOperand(w, cl.x); r != nil {
			ev.RelativePositions = w.Name(r)
		}
	}
	if p2c != nil {
		ev.P2CIndex = w.Name(p2c.Index)
	}
	if params.PositionBuckets != nil && params.MaxRelativePositions != nil {
		mid := *params.PositionBuckets / 2
		ev.LogRatio, ev.LogRatioFrom = probe.LogRatio(w, w.Cone(cl.x), math.Log(float64(*params.MaxRelativePositions-1)/float64(mid)))
	}
}

// termNodes are the nodes of the finding: the clamp, the terms' products
// and paths, and the cones of their position operands and indexes, less
// the nodes that compute from constants alone (the relative embedding's
// norm, slices and projections): normalisation folds those into tables,
// except over weights stored outside the model file, which it does not
// read, and the finding is the same either way.
func termNodes(w *work.Work, clip *graph.Node, terms ...*attn.ScoreTerm) []*graph.Node {
	nodes := []*graph.Node{clip}
	for _, tm := range terms {
		if tm == nil {
			continue
		}
		nodes = append(nodes, tm.Prod)
		nodes = append(nodes, tm.Path...)
		nodes = append(nodes, w.Cone(tm.Pos, tm.Index)...)
	}
	memo := map[*graph.Value]bool{}
	return slices.DeleteFunc(nodes, func(n *graph.Node) bool {
		for _, o := range n.Outputs() {
			if !fromConstants(w, o, memo, 0) {
				return false
			}
		}
		return true
	})
}

// fromConstants reports whether v is computed from constants alone (no
// graph input, no control flow).
func fromConstants(w *work.Work, v *graph.Value, memo map[*graph.Value]bool, depth int) bool {
	if v == nil || w.IsConst(v) {
		return true
	}
	if r, ok := memo[v]; ok {
		return r
	}
	n := v.Producer()
	if n == nil || depth >= 256 || w.IsAct(v) || len(n.Subgraphs()) > 0 {
		return false
	}
	r := true
	for _, in := range n.Inputs() {
		if r = fromConstants(w, in, memo, depth+1); !r {
			break
		}
	}
	memo[v] = r
	return r
}

func origName(w *work.Work, t *attn.ScoreTerm) string {
	if t == nil {
		return ""
	}
	return w.OrigName(t.Prod)
}

// clamp is an index clamped to a table: x the value clamped, node the
// clamp (Clip, or the outer of Max and Min), hi its upper bound (nil when
// it has none).
type clamp struct {
	x    *graph.Value
	node *graph.Node
	hi   *graph.Value
}

// clampOf follows an index back through layout ops to a clamp: Clip, or
// Max and Min whose bounds are constants or values of one element (a
// bound computed from the length). Nil when there is none.
func clampOf(w *work.Work, idx *graph.Value) *clamp {
	v := idx
	for steps := 0; steps < 12 && v != nil; steps++ {
		n := v.Producer()
		if n == nil {
			return nil
		}
		switch n.OpType {
		case "Clip":
			return &clamp{x: n.Input(0), node: n, hi: n.Input(2)}
		case "Max", "Min":
			return minMaxClamp(w, n)
		case "Cast", "Reshape", "Unsqueeze", "Squeeze", "Expand", "Transpose", "Identity", "Tile", "Slice":
			v = n.Input(0)
		default:
			return nil
		}
	}
	return nil
}

// minMaxClamp reads max(min(x, hi), lo) or min(max(x, lo), hi) from its
// outer node n.
func minMaxClamp(w *work.Work, n *graph.Node) *clamp {
	inner, outerBound := clampOperands(w, n)
	if inner == nil || inner.Producer() == nil {
		return nil
	}
	m := inner.Producer()
	if m.OpType != "Max" && m.OpType != "Min" || m.OpType == n.OpType {
		return nil
	}
	x, innerBound := clampOperands(w, m)
	if x == nil {
		return nil
	}
	hi := outerBound
	if m.OpType == "Min" {
		hi = innerBound
	}
	return &clamp{x: x, node: n, hi: hi}
}

// clampOperands splits a two-input Max or Min into the value it bounds
// and the bound: a constant or a value of one element, the other input
// not.
func clampOperands(w *work.Work, n *graph.Node) (x, bound *graph.Value) {
	if len(n.Inputs()) != 2 {
		return nil, nil
	}
	a, b := n.Input(0), n.Input(1)
	switch {
	case isBound(w, b) && !isBound(w, a):
		return a, b
	case isBound(w, a) && !isBound(w, b):
		return b, a
	}
	return nil, nil
}

// isBound: v is a constant or holds one element (its shape says so).
func isBound(w *work.Work, v *graph.Value) bool {
	if v == nil {
		return false
	}
	if w.IsConst(v) {
		return true
	}
	s := w.Shape(v)
	if !s.Ranked {
		return false
	}
	for _, d := range s.Dims {
		if d != 1 {
			return false
		}
	}
	return true
}

// offsetOperand is x of a value computed as x plus a constant (an Add
// with one constant input, through Cast), or nil.
func offsetOperand(w *work.Work, v *graph.Value) *graph.Value {
	n := v.Producer()
	for steps := 0; steps < 4 && n != nil && n.OpType == "Cast"; steps++ {
		n = n.Input(0).Producer()
	}
	if n == nil || n.OpType != "Add" || len(n.Inputs()) != 2 {
		return nil
	}
	return nonConstInput(w, n)
}

// nonConstInput is the one input of a two-input node that is not a
// constant (nil otherwise).
func nonConstInput(w *work.Work, n *graph.Node) *graph.Value {
	var out *graph.Value
	for _, x := range n.Inputs() {
		if x != nil && !w.IsConst(x) {
			if out != nil {
				return nil
			}
			out = x
		}
	}
	return out
}

// fitLogBuckets finds max_position for DeBERTa's make_log_bucket_position
// with mid (bucket_size / 2) that reproduces at(n) for |n| <= maxDist,
// computed as the model computes it (float32).
func fitLogBuckets(at func(int) int, mid, maxDist int) (int, bool) {
	if mid < 2 {
		return 0, false
	}
	// ceil(log(a/mid)/L·(mid-1)) = at(a) - mid bounds L = log((M-1)/mid).
	lo, hi := 0.0, math.Inf(1)
	for a := mid + 1; a <= maxDist; a++ {
		k := float64(at(a) - mid)
		if k < 1 {
			return 0, false
		}
		x := math.Log(float64(a)/float64(mid)) * float64(mid-1)
		lo = math.Max(lo, x/k)
		if k > 1 {
			hi = math.Min(hi, x/(k-1))
		}
	}
	if lo <= 0 || lo > hi {
		return 0, false
	}
	guess := int(math.Ceil(1 + float64(mid)*math.Exp(lo)))
	hiM := math.Inf(1)
	if !math.IsInf(hi, 1) {
		hiM = 1 + float64(mid)*math.Exp(hi)
	}
	for m := max(mid+2, guess-3); m <= guess+3 && float64(m) <= hiM+3; m++ {
		if logBucketsMatch(at, mid, m, maxDist) {
			return m, true
		}
	}
	return 0, false
}

// logBucket is make_log_bucket_position(n, 2·mid, maxPos) in float32.
func logBucket(n, mid, maxPos int) int {
	a := n
	if a < 0 {
		a = -a
	}
	if n < mid && n > -mid {
		a = mid - 1
	}
	if a <= mid {
		return n
	}
	lx := float32(math.Log(float64(float32(a) / float32(mid))))
	lm := float32(math.Log(float64(float32(float64(maxPos-1) / float64(mid)))))
	r := int(math.Ceil(float64(lx/lm*float32(mid-1)))) + mid
	if n < 0 {
		return -r
	}
	return r
}

func logBucketsMatch(at func(int) int, mid, maxPos, maxDist int) bool {
	for n := -maxDist; n <= maxDist; n++ {
		if logBucket(n, mid, maxPos) != at(n) {
			return false
		}
	}
	return true
}

// sharedProjection reports whether one relative embedding R gives both
// position tables through the block's content projections: P_k = R·W_k +
// b_k (c2p) and P_q = R·W_q + b_q (p2c), R solved from the first and
// checked on the second. The projections are those of the terms' own
// contents: the query c2p multiplies and the key p2c multiplies.
func sharedProjection(w *work.Work, c2p, p2c *attn.ScoreTerm) (bool, string) {
	wq, bq := projectionOf(w, c2p.Content)
	wk, bk := projectionOf(w, p2c.Content)
	if wq == nil || wk == nil {
		return false, "the content projections are not found"
	}
	pk, err := positionTable2D(w, c2p)
	if err != nil {
		return false, err.Error()
	}
	pq, err := positionTable2D(w, p2c)
	if err != nil {
		return false, err.Error()
	}
	hid, n := wk.rows, wk.cols
	if len(pk) == 0 || len(pk[0]) != n || len(pq) != len(pk) || len(pq[0]) != wq.cols || wq.rows != hid || hid > n {
		return false, "the tables and projections have different sizes"
	}
	// R = (P_k - b_k)·W_kᵀ·(W_k·W_kᵀ)⁻¹.
	g := make([][]float64, hid) // W_k·W_kᵀ
	for i := range g {
		g[i] = make([]float64, hid)
		for j := range g[i] {
			for c := 0; c < n; c++ {
				g[i][j] += wk.at(i, c) * wk.at(j, c)
			}
		}
	}
	inv, ok := invert(g)
	if !ok {
		return false, "the key projection is singular"
	}
	var errK, errQ, scale float64
	for r := range pk {
		y := make([]float64, hid) // (P_k - b_k)·W_kᵀ
		for i := 0; i < hid; i++ {
			for c := 0; c < n; c++ {
				y[i] += (pk[r][c] - bk[c]) * wk.at(i, c)
			}
		}
		rr := make([]float64, hid)
		for i := range rr {
			for j := range rr {
				rr[i] += y[j] * inv[j][i]
			}
		}
		for c := 0; c < n; c++ {
			x := bk[c]
			for i := range rr {
				x += rr[i] * wk.at(i, c)
			}
			errK = math.Max(errK, math.Abs(x-pk[r][c]))
			scale = math.Max(scale, math.Abs(pk[r][c]))
		}
		for c := 0; c < wq.cols; c++ {
			x := bq[c]
			for i := range rr {
				x += rr[i] * wq.at(i, c)
			}
			errQ = math.Max(errQ, math.Abs(x-pq[r][c]))
			scale = math.Max(scale, math.Abs(pq[r][c]))
		}
	}
	tol := 1e-3 * math.Max(1, scale)
	if errK > tol {
		return false, "the key table is not a projection of the key weights"
	}
	return errQ <= tol, ""
}

// matrix is a constant 2-D weight, [rows][cols] row-major.
type matrix struct {
	rows, cols int
	v          []float64
}

func (m *matrix) at(i, j int) float64 { return m.v[i*m.cols+j] }

// projectionOf finds the linear projection x·W + b of the content a score
// operand comes from (through layout ops): W [hidden, out] and b (zeros
// without a bias).
func projectionOf(w *work.Work, v *graph.Value) (*matrix, []float64) {
	v, _ = scaledRoot(w, v)
	var bias []float64
	for steps := 0; steps < 4 && v != nil; steps++ {
		n := v.Producer()
		if n == nil {
			return nil, nil
		}
		switch n.OpType {
		case "Add":
			acts := w.ActInputs(n)
			if len(acts) != 1 {
				return nil, nil
			}
			if k := w.Const(n.Input(1 - acts[0])); k != nil {
				bias = k.Float64s()
			}
			v = n.Input(acts[0])
		case "MatMul":
			acts := w.ActInputs(n)
			if len(acts) != 1 || acts[0] != 0 {
				return nil, nil
			}
			k := w.Const(n.Input(1))
			if k == nil || k.Rank() != 2 {
				return nil, nil
			}
			m := &matrix{rows: k.Shape[0], cols: k.Shape[1], v: k.Float64s()}
			if bias == nil {
				bias = make([]float64, m.cols)
			}
			if len(bias) != m.cols {
				return nil, nil
			}
			return m, bias
		default:
			if !work.LayoutOps[n.OpType] {
				return nil, nil
			}
			v = n.Input(0)
		}
	}
	return nil, nil
}

// positionTable2D evaluates a term's position operand at batch 1 and joins
// its heads: [row][head·d + j], the layout the content projection writes.
func positionTable2D(w *work.Work, t *attn.ScoreTerm) ([][]float64, error) {
	p := probe.NewProbe(w, 1, 8, 0)
	x, err := p.Value(t.Pos)
	if err != nil {
		return nil, fmt.Errorf("the position table could not be evaluated: %w", err)
	}
	// The product contracts the content's last axis with the operand's
	// next-to-last: [heads, d, rows].
	if x.Rank() != 3 {
		return nil, fmt.Errorf("the position operand has shape %v", x.Shape)
	}
	// Rows first when the operand's last axis is the contracted one: the
	// first operand of a product, or the second of a FusedMatMul with
	// transB (and the reverse with transA).
	first := t.Prod.Input(0) == t.Pos
	rowsFirst := first
	if t.Prod.OpType == "FusedMatMul" {
		if first && t.Prod.AttrInt("transA", 0) != 0 || !first && t.Prod.AttrInt("transB", 0) != 0 {
			rowsFirst = !rowsFirst
		}
	}
	h, d, n := x.Shape[0], x.Shape[1], x.Shape[2]
	if rowsFirst {
		h, n, d = x.Shape[0], x.Shape[1], x.Shape[2]
	}
	v := x.Float64s()
	out := make([][]float64, n)
	for r := range out {
		out[r] = make([]float64, h*d)
		for hh := 0; hh < h; hh++ {
			for j := 0; j < d; j++ {
				if rowsFirst {
					out[r][hh*d+j] = v[(hh*n+r)*d+j]
				} else {
					out[r][hh*d+j] = v[(hh*d+j)*n+r]
				}
			}
		}
	}
	return out, nil
}

// invert inverts a square matrix by Gauss-Jordan elimination with partial
// pivoting.
func invert(a [][]float64) ([][]float64, bool) {
	n := len(a)
	m := make([][]float64, n)
	for i := range m {
		m[i] = make([]float64, 2*n)
		copy(m[i], a[i])
		m[i][n+i] = 1
	}
	for c := 0; c < n; c++ {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(m[r][c]) > math.Abs(m[p][c]) {
				p = r
			}
		}
		if math.Abs(m[p][c]) < 1e-12 {
			return nil, false
		}
		m[c], m[p] = m[p], m[c]
		d := m[c][c]
		for j := range m[c] {
			m[c][j] /= d
		}
		for r := 0; r < n; r++ {
			if r == c || m[r][c] == 0 {
				continue
			}
			f := m[r][c]
			for j := range m[r] {
				m[r][j] -= f * m[c][j]
			}
		}
	}
	out := make([][]float64, n)
	for i := range out {
		out[i] = slices.Clone(m[i][n:])
	}
	return out, true
}

// MergeEvidence takes the blocks of another finding's evidence.
func (ev *Evidence) MergeEvidence(from any, _ func([]string) []string) {
	ev.Blocks = append(ev.Blocks, from.(*Evidence).Blocks...)
}
