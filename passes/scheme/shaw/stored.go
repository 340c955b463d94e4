package shaw

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/scorebias"
	"github.com/onnxpe/onnxpe/passes/work"
)

// storedLen is the first probe's number of positions for relative
// embeddings stored whole (more than the clipping of most models), and
// maxStoredProbe the most a second probe reads of a longer table (every
// query with every key: its square).
const (
	storedLen      = 16
	maxStoredProbe = 256
)

// storedAt reads a score term whose position-side operand e gathers no
// table by an index: relative embeddings held whole, a stored
// [queries, keys, dim] table cut to the length (Nezha's functional
// relative positions, precomputed at init as one_hot(clamp(j - i) + k) @
// table; or a gather of a table folded at fixed shapes). What the term
// adds to the scores is measured with its content cut to one random
// vector, the same at every position: the added scores are then q·a(i, j),
// which depend on key − query alone when a(i, j) does, and are equal for
// two distances exactly when their embeddings are (almost surely, for a
// random q). Shaw's clipping at k shows as distances -k..k each with its
// own value and every distance beyond ±k with the value of ±k; without a
// clipping, stored embeddings of every distance are not told apart from
// another relative scheme's (Transformer-XL's projected sinusoids, folded
// at fixed shapes) and give no finding.
func storedAt(w *work.Work, b *attn.Block, bs *attn.BlockSides, term *graph.Node, e *graph.Value) (*passes.Finding, *graph.Value, string) {
	// The content is cut where the block's q is projected (the term's own
	// operand may have sizes a probe does not bind: batch times heads).
	content := b.Q
	if bs != nil && bs.Q != nil {
		content = bs.Q.In
	}
	added, why := addedTerm(w, b, term)
	if why != "" {
		return nil, nil, why
	}
	table := storedTable(w, e)
	if table == nil {
		return nil, nil, "the operand gathers no table by a computed index and reads no stored table of relative embeddings"
	}
	// The first probe: storedLen positions, or all the table holds when
	// it holds fewer.
	held := positionsHeld(w, table)
	S := storedLen
	if held > 0 {
		S = min(S, held)
	}
	if S < 3 {
		return nil, nil, fmt.Sprintf("the stored relative embeddings %s hold %d positions: too few to read a clipping", w.Name(table), held)
	}
	g, dim, why := termByDistance(w, term, e, content, added, S)
	if why != "" {
		return nil, nil, why
	}
	k, saturated, why := clipOf(g)
	if why != "" {
		return nil, nil, why
	}
	maxRel := S - 1
	if !saturated {
		// Not clipped within the first probe: the longest the table allows.
		if L := min(held, maxStoredProbe); L > S {
			if g2, _, why2 := termByDistance(w, term, e, content, added, L); why2 == "" {
				if k2, sat2, why2 := clipOf(g2); why2 == "" {
					k, saturated, maxRel = k2, sat2, L-1
				}
			}
		}
	}
	if !saturated {
		// Embeddings of every distance apart, stored whole: as well
		// Transformer-XL's projected sinusoids or any other relative
		// scheme's; only a clipping tells Shaw's apart.
		return nil, nil, fmt.Sprintf("the stored relative embeddings %s differ for every distance up to %d: no clipping shows, which alone tells Shaw's embeddings from other relative schemes", w.Name(table), maxRel)
	}
	params := &Params{Dim: dim, Distance: "key_minus_query", Clipped: true, MaxRelativePosition: passes.Ptr(k)}
	im := make([]int, 2*maxRel+1)
	for i := range im {
		n := i - maxRel
		im[i] = max(-k, min(k, n)) + k
	}
	name := w.Name(table)
	if name == "" {
		name = "an unnamed constant"
	}
	ev := &Evidence{IndexMap: im, MaxRel: maxRel, Radius: k, Stored: name, Held: held,
		Blocks: []Block{{Layer: b.Index, Key: w.Name(table), KeyEmb: w.Name(e)}}}
	nodes := append([]*graph.Node{term}, w.Cone(e)...)
	for _, ot := range b.OutTerms {
		for _, in := range ot.Inputs() {
			if in != nil && !w.IsAct(in) && !w.IsConst(in) && storedTable(w, in) == table {
				params.RelativeValues = true
				ev.Blocks[0].Value = w.Name(table)
				ev.Blocks[0].ValueEmb = w.Name(in)
				nodes = append(nodes, ot)
				nodes = append(nodes, w.Cone(in)...)
			}
		}
	}
	f := &passes.Finding{Scheme: Name, Layers: []int{b.Index}, Params: params, Evidence: ev}
	f.Nodes = w.OrigNames(nodes)
	return f, table, ""
}

// addedTerm is the value a score term adds to the block's scores: the
// term's product followed through layout ops and constant scales to the
// addition of the score path that adds it.
func addedTerm(w *work.Work, b *attn.Block, term *graph.Node) (*graph.Value, string) {
	v := term.Output(0)
	for steps := 0; steps < 12; steps++ {
		var next *graph.Node
		for _, u := range v.Uses() {
			if n := u.Node; (n.OpType == "Add" || n.OpType == "Sub" || n.OpType == "Sum") && slices.Contains(b.ScorePath, n) {
				return v, ""
			}
			next = u.Node
		}
		if len(v.Uses()) != 1 || !work.LayoutOps[next.OpType] && !scaleOp(w, next) {
			break
		}
		v = next.Output(0)
	}
	return nil, "the term's product does not reach the scores through layout ops"
}

// scaleOp reports whether n multiplies or divides by a constant scalar.
func scaleOp(w *work.Work, n *graph.Node) bool {
	if n.OpType != "Mul" && n.OpType != "Div" {
		return false
	}
	c := w.Const(n.Input(1))
	return c != nil && c.Len() == 1
}

// storedTable is the largest constant of rank 3 or more in the cone of e
// (or folded into it): a table of relative embeddings per query and key.
func storedTable(w *work.Work, e *graph.Value) *graph.Value {
	var best *graph.Value
	size := 0
	for _, n := range probe.FoldedCone(w, w.Cone(e), e) {
		for _, in := range n.Inputs() {
			if in == nil || !w.IsConst(in) {
				continue
			}
			if s := w.Shape(in); s.Rank() >= 3 {
				if c := w.Const(in); c != nil && work.IsFloatType(c.DType) && c.Len() > size {
					best, size = in, c.Len()
				}
			}
		}
	}
	return best
}

// positionsHeld is the number of positions a stored [.., queries, keys,
// dim] table holds: the smaller of its two largest axes but the last.
func positionsHeld(w *work.Work, table *graph.Value) int {
	c := w.Const(table)
	if c == nil || c.Rank() < 3 {
		return 0
	}
	axes := slices.Clone(c.Shape[:c.Rank()-1])
	slices.Sort(axes)
	return min(axes[len(axes)-1], axes[len(axes)-2])
}

// termByDistance evaluates the added scores over a probe of S positions
// with the content (the block's q) cut to one random vector at every
// position, and returns them per head as a function of key − query
// (index n + S - 1), with dim the width the term's product contracts.
func termByDistance(w *work.Work, term *graph.Node, e, content, added *graph.Value, S int) ([][]float64, int, string) {
	p := probe.NewProbe(w, 1, S, 0)
	p.Past = 0
	cut, err := attn.FixedContent(w, p, content, 11)
	if err != nil {
		return nil, 0, "the term's content could not be cut: " + err.Error()
	}
	p.SetCuts(map[*graph.Value]*kernels.Tensor{content: cut})
	et, err := p.Value(e)
	if err != nil {
		return nil, 0, "the term's embeddings could not be evaluated: " + err.Error()
	}
	dim := contracted(term, e, et.Shape)
	if dim <= 0 {
		return nil, 0, fmt.Sprintf("the width the term's %s contracts of its embeddings %v is not known", term.OpType, et.Shape)
	}
	t, err := p.Value(added)
	if err != nil {
		return nil, 0, "the term could not be evaluated: " + err.Error()
	}
	bv, ok := scorebias.NewBiasView(t)
	if !ok || bv.Q != S || bv.K != S {
		return nil, 0, fmt.Sprintf("the term is not [query, key] (%v)", t.Shape)
	}
	heads, _, _ := bv.Dims()
	scale := 0.0
	for h := 0; h < heads; h++ {
		for i := 0; i < S; i++ {
			for j := 0; j < S; j++ {
				scale = max(scale, math.Abs(bv.At(h, i, j)))
			}
		}
	}
	tol := 1e-5 * max(scale, 1e-30)
	g := make([][]float64, heads)
	for h := range g {
		g[h] = make([]float64, 2*S-1)
		set := make([]bool, 2*S-1)
		for i := 0; i < S; i++ {
			for j := 0; j < S; j++ {
				x, n := bv.At(h, i, j), j-i+S-1
				if set[n] && math.Abs(g[h][n]-x) > tol {
					return nil, 0, "the term's embeddings are not a function of key - query"
				}
				g[h][n], set[n] = x, true
			}
		}
	}
	return g, dim, ""
}

// clipOf reads Shaw's clipping from the added scores per distance: the
// smallest k for which every distance beyond ±k reads the value of ±k,
// the distances -k..k reading values of their own; saturated is false
// when every distance has its own value.
func clipOf(g [][]float64) (k int, saturated bool, why string) {
	S := (len(g[0]) + 1) / 2
	scale := 0.0
	for _, row := range g {
		for _, x := range row {
			scale = max(scale, math.Abs(x))
		}
	}
	tol := 1e-5 * max(scale, 1e-30)
	same := func(a, b int) bool {
		for _, row := range g {
			if math.Abs(row[a+S-1]-row[b+S-1]) > tol {
				return false
			}
		}
		return true
	}
	// k: the last distance (on both sides) whose value differs from the
	// next one in.
	k = S - 1
	for k > 0 && same(k, k-1) && same(-k, -(k-1)) {
		k--
	}
	saturated = k < S-1
	for a := -k; a <= k; a++ {
		for b := a + 1; b <= k; b++ {
			if same(a, b) {
				return 0, false, fmt.Sprintf("the term's embeddings of distances %d and %d are equal: not clipped distances", a, b)
			}
		}
	}
	return k, saturated, ""
}

// contracted is the size of the axis of e (of shape) that the product n
// contracts: a MatMul's K (the second last axis of its B operand, the
// last of its A operand), an Einsum's letter of e absent from its output
// (labels before an ellipsis name the first axes, after it the last); 0
// when not known.
func contracted(n *graph.Node, e *graph.Value, shape []int) int {
	r := len(shape)
	switch {
	case r < 2:
		return 0
	case n.OpType == "MatMul" || n.OpType == "FusedMatMul":
		if n.Input(1) == e {
			return shape[r-2]
		}
		return shape[r-1]
	case n.OpType == "Einsum":
		eq := strings.ReplaceAll(n.AttrString("equation", ""), " ", "")
		lhs, out, explicit := strings.Cut(eq, "->")
		ops := strings.Split(lhs, ",")
		i := slices.Index(n.Inputs(), e)
		if i < 0 || i >= len(ops) {
			return 0
		}
		before, after, ell := strings.Cut(ops[i], "...")
		if len(before)+len(after) > r || !ell && len(before) != r {
			return 0
		}
		kept := func(c rune) bool {
			if explicit {
				return strings.ContainsRune(out, c)
			}
			// Implicit output: the labels that occur once in the equation.
			return strings.Count(lhs, string(c)) == 1
		}
		for a, c := range before {
			if !kept(c) {
				return shape[a]
			}
		}
		for a, c := range after {
			if !kept(c) {
				return shape[r-len(after)+a]
			}
		}
	}
	return 0
}
