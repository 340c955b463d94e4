package shaw

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/scorebias"
	"github.com/onnxpe/onnxpe/passes/work"
)

// ShawEvidence is what the relative-embedding detector read.
type Evidence struct {
	// Blocks: per layer, the original tables of keys and values (Value
	// empty without relative values) and the index value.
	Blocks []Block
	// IndexMap is the table row of every relative position key - query
	// from -MaxRel to MaxRel (index n + MaxRel) in the probe.
	IndexMap []int
	MaxRel   int
	// Radius is the table's row of distance 0: the table holds the
	// distances -Radius..Radius (2·Radius + 1 rows).
	Radius int
	// Stored names the constant holding the relative embeddings whole,
	// [queries, keys, dim], when no index reads a table of distances
	// (storedAt): IndexMap then numbers the distances by their
	// embeddings (equal embeddings, one number), Radius is the clipping,
	// and Held the number of queries and keys the table holds.
	Stored string
	Held   int
}

// ShawBlock is one layer's relative tables.
type Block struct {
	Layer             int
	Key, Value, Index string
	// KeyEmb and ValueEmb are the relative embeddings the layer gathers
	// from its tables, [query, key, dim] (ValueEmb empty without relative
	// values): what codegen's golden vectors compare.
	KeyEmb, ValueEmb string
}

// Shaw finds relative position embeddings in the style of Shaw et al.
var Detect = &passes.Pass[[]*passes.Finding]{
	Name: "relative_clipped",
	Doc: `Find relative position embeddings added through products (Shaw et al. 2018).

A block's extra score term, q times a value that does not depend on
content, is a relative key embedding when that value gathers a table by
an index computed from positions. Evaluating the index over the probe's
query and key positions gives its relation to key - query: the direction
(key_minus_query or query_minus_key), the clipping (the index saturates),
and max_relative_position from the table's rows. Embeddings stored whole
as a [queries, keys, dim] table (no index in the graph) are read by what
the term adds to the scores with q cut to one vector at every position:
a function of key - query whose distances beyond ±k read the values of
±k. A product of the attention weights with such a table on the output
side is the relative value embedding.`,
	Requires: []passes.Analyzer{work.Normalize, attn.Blocks, attn.Sides},
	Run:      runShaw,
}

func runShaw(c *passes.Context) ([]*passes.Finding, error) {
	w := work.Of(c)
	var out []*passes.Finding
	tables := map[*graph.Value]bool{}
	sides := passes.Result(c, attn.Sides)
	for _, b := range passes.Result(c, attn.Blocks) {
		for _, term := range b.Terms {
			f, table, why := shawAt(w, b, sides, term)
			if f == nil {
				c.Miss("relative_clipped", w.OrigName(term), why, 1)
				continue
			}
			tables[table] = true
			out = w.MergeFinding(out, f, sameForm)
		}
	}
	for _, f := range out {
		p := f.Params.(*Params)
		p.PerLayerTables = len(f.Layers) > 1 && len(tables) >= len(f.Layers)
	}
	return out, nil
}

// sameForm reports whether two findings read their embeddings alike:
// both gathered by an index, or both stored whole (their evidence is not
// merged across the two).
func sameForm(g, f *passes.Finding) bool {
	ge, _ := g.Evidence.(*Evidence)
	fe, _ := f.Evidence.(*Evidence)
	return ge != nil && fe != nil && (ge.Stored == "") == (fe.Stored == "")
}

// relTable finds the table a position-side value gathers by a computed
// index.
func relTable(w *work.Work, v *graph.Value) (*graph.Node, bool) {
	for _, n := range w.Cone(v) {
		if n.OpType == "Gather" && w.IsConst(n.Input(0)) && len(n.Input(0).Const.Dims()) == 2 && !w.IsConst(n.Input(1)) {
			return n, true
		}
	}
	return nil, false
}

func shawAt(w *work.Work, b *attn.Block, sides map[*attn.Block]*attn.BlockSides, term *graph.Node) (*passes.Finding, *graph.Value, string) {
	var e *graph.Value
	for _, in := range term.Inputs() {
		if in != nil && !w.IsAct(in) && !w.IsConst(in) {
			e = in
		}
	}
	if e == nil {
		return nil, nil, "no position-side operand"
	}
	g, ok := relTable(w, e)
	if !ok {
		return storedAt(w, b, sides[b], term, e)
	}
	table := g.Input(0)
	rows, dim := int(table.Const.Dims()[0]), int(table.Const.Dims()[1])
	const S = 16
	im, why := indexMap(w, g.Input(1), S)
	if why != "" {
		return nil, nil, why
	}
	// index(n) = clamp(s·n, -k, k) + k with s = ±1.
	s := im[S] - im[S-1] // n = 1 minus n = 0
	if s != 1 && s != -1 {
		return nil, nil, fmt.Sprintf("the index changes by %d per position", s)
	}
	center := im[S-1]
	if rows != 2*center+1 {
		return nil, nil, fmt.Sprintf("the index of distance 0 is %d, not the middle of %d rows", center, rows)
	}
	clipped, why := followsClamp(im, s, center, rows)
	if why != "" {
		return nil, nil, why
	}
	var notes []string
	unclamped := false
	if !clipped {
		clipped, unclamped, notes = beyondTable(w, g.Input(1), s, center, rows)
	}
	params := &Params{Dim: dim, Distance: "key_minus_query", Clipped: clipped}
	if !unclamped {
		params.MaxRelativePosition = passes.Ptr(center)
	}
	if s < 0 {
		params.Distance = "query_minus_key"
	}
	ev := &Evidence{IndexMap: im, MaxRel: S - 1, Radius: center, Blocks: []Block{{Layer: b.Index, Key: w.Name(table), Index: w.Name(g.Input(1)), KeyEmb: w.Name(g.Output(0))}}}
	nodes := append([]*graph.Node{term}, w.Cone(e)...)
	for _, ot := range b.OutTerms {
		for _, in := range ot.Inputs() {
			if in != nil && !w.IsAct(in) && !w.IsConst(in) {
				if gv, ok := relTable(w, in); ok {
					params.RelativeValues = true
					ev.Blocks[0].Value = w.Name(gv.Input(0))
					ev.Blocks[0].ValueEmb = w.Name(gv.Output(0))
					nodes = append(nodes, ot)
					nodes = append(nodes, w.Cone(in)...)
				}
			}
		}
	}
	f := &passes.Finding{Scheme: Name, Layers: []int{b.Index}, Params: params, Notes: notes, Evidence: ev}
	f.Nodes = w.OrigNames(nodes)
	return f, table, ""
}

// indexMap evaluates the index idx over a probe of S positions and returns
// the table row of every relative position key - query from -(S-1) to S-1
// (index n + S-1).
func indexMap(w *work.Work, idx *graph.Value, S int) ([]int, string) {
	p := probe.NewProbe(w, 1, S, 0)
	t, err := p.Value(idx)
	if err != nil {
		return nil, "the index could not be evaluated: " + err.Error()
	}
	bv, ok := scorebias.NewBiasView(t)
	if !ok || bv.Q != S || bv.K != S {
		return nil, fmt.Sprintf("the index is not [query, key] (%v)", t.Shape)
	}
	im := make([]int, 2*S-1)
	for i := range im {
		im[i] = -1 << 40
	}
	for i := 0; i < S; i++ {
		for j := 0; j < S; j++ {
			x := int(bv.At(0, i, j))
			k := j - i + S - 1
			if im[k] != -1<<40 && im[k] != x {
				return nil, "the index is not a function of key - query"
			}
			im[k] = x
		}
	}
	return im, ""
}

// followsClamp checks the index map against clamp(s·n + center, 0,
// rows-1) and reports whether it saturated (clipped).
func followsClamp(im []int, s, center, rows int) (bool, string) {
	S := (len(im) + 1) / 2
	clipped := false
	for k, x := range im {
		n := k - (S - 1)
		want := max(0, min(rows-1, s*n+center))
		if x != want {
			return false, fmt.Sprintf("the index of distance %d is %d, not %d", n, x, want)
		}
		if s*n+center < 0 || s*n+center > rows-1 {
			clipped = true
		}
	}
	return clipped, ""
}

// maxTableProbe is the longest table whose edges beyondTable probes.
const maxTableProbe = 4096

// beyondTable decides clipped for an index that did not saturate on the
// first probe: evaluated at distances one past the table's edges, it
// either saturates there (clipped) or leaves the table (unclamped: an
// index without a clamp, Hugging Face's relative_key, whose table's
// radius is how far the model reaches, not a clipping distance). A note
// says what was measured.
func beyondTable(w *work.Work, idx *graph.Value, s, center, rows int) (clipped, unclamped bool, notes []string) {
	L := center + 2
	if L > maxTableProbe {
		return false, false, []string{fmt.Sprintf("clipped: the index did not saturate for distances up to 15; the table's %d rows are too many to probe its edges", rows)}
	}
	im, why := indexMap(w, idx, L)
	if why != "" {
		return false, false, []string{"clipped: the index could not be evaluated past the table's edges: " + why}
	}
	if clipped, why := followsClamp(im, s, center, rows); why == "" && clipped {
		return true, false, nil
	}
	for k, x := range im {
		if n := k - (L - 1); x != s*n+center {
			return false, false, []string{fmt.Sprintf("clipped: past the table's edges the index of distance %d is %d, neither clamped nor %d", n, x, s*n+center)}
		}
	}
	dist := "key - query"
	if s < 0 {
		dist = "query - key"
	}
	return false, true, []string{fmt.Sprintf("max_relative_position: no clamp; the index is %s + %d, so the table's %d rows hold the distances -%d..%d and an input of more than %d tokens reads outside it (%d is the table's radius, not a clipping distance)", dist, center, rows, center, center, center+1, center)}
}

// MergeEvidence takes the blocks of another finding's evidence.
func (ev *Evidence) MergeEvidence(from any, _ func([]string) []string) {
	ev.Blocks = append(ev.Blocks, from.(*Evidence).Blocks...)
}
