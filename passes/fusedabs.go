package passes

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
)

// fusedAbsolute reads the position tables of EmbedLayerNormalization ops:
// x = word[input_ids] + position[position_ids] (+ segment[segment_ids]),
// with positions 0..S-1 when the op has no position_ids input.
func (w *Work) fusedAbsolute(c *Context, blocks []*Block) []*Finding {
	var out []*Finding
	for _, g := range w.detectGraphs() {
		for n := range g.All() {
			if n.OpType != "EmbedLayerNormalization" || n.Domain != "com.microsoft" {
				continue
			}
			if f := w.embedLayerNorm(c, n, blocks); f != nil {
				out = append(out, f)
			}
		}
	}
	return out
}

func (w *Work) embedLayerNorm(c *Context, n *graph.Node, blocks []*Block) *Finding {
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
			layers = append(layers, w.reachedBlocks(o, blocks)...)
		}
	}
	f := &Finding{Scheme: LearnedAbsolute, Fused: true, Layers: sortedUnique(layers)}
	nodes := []*graph.Node{n}
	nodes = append(nodes, w.cone(table, posIDs)...)
	f.Nodes = w.origNames(nodes)
	dim := 0
	if ts.Dims[1].Known() {
		dim = int(ts.Dims[1])
	}
	rowsN := 0
	if ts.Dims[0].Known() {
		rowsN = int(ts.Dims[0])
	}
	ev := &TableEvidence{Add: at, Value: w.OrigValue(table), Table: w.name(table), Rows: rowsN}
	f.Evidence = ev
	learned := func(notes ...string) *Finding {
		p := &LearnedParams{Dim: dim}
		if rowsN > 0 {
			p.MaxPositions = ptr(rowsN)
		}
		f.Params = p
		f.Notes = append(f.Notes, notes...)
		return f
	}
	t := w.Const(table)
	if t == nil {
		why := "it is a graph input"
		if table.Const != nil {
			why = fmt.Sprintf("it could not be read (%v)", w.constErr[table])
		}
		return learned(fmt.Sprintf("the position table is not in the file (%s): reported as learned, its values not checked; position_offset unknown", why))
	}
	// The positions the op reads: position_ids as a probe gives them
	// (positions 0..15), or 0..S-1 without them.
	pos := make([]int64, 16)
	for i := range pos {
		pos[i] = int64(i)
	}
	if posIDs != nil {
		p := w.NewProbe(1, 16, 0)
		pt, err := p.Value(posIDs)
		if err != nil || pt.Len() < 3 {
			c.Miss("fused", at, "the position_ids of EmbedLayerNormalization could not be evaluated", 1)
			return learned("position_offset: the position_ids could not be evaluated")
		}
		v := pt.Int64s()
		pos = v[:min(len(v), pt.Shape[pt.Rank()-1])]
	}
	vals := t.Float64s()
	var rows [][]float64
	for _, r := range pos {
		if r < 0 || int(r) >= rowsN {
			return learned(fmt.Sprintf("position_offset: the positions reach row %d of a %d-row table", r, rowsN))
		}
		rows = append(rows, slices.Clone(vals[int(r)*dim:(int(r)+1)*dim]))
	}
	ev.Rows0 = rows
	off := int(pos[0])
	if sp, ok := w.fitSinusoidal(rows, dim); ok {
		ev.Omega = sp.omega
		f.Scheme = Sinusoidal
		p := &SinusoidalParams{Layout: sp.layout, Dim: dim, Computed: false, FreqDenominator: sp.denom, MaxPositions: ptr(rowsN), PositionOffset: ptr(off)}
		if sp.base == sp.base { // not NaN
			p.Base = ptr(sp.base)
		}
		if sp.note != "" {
			f.Notes = append(f.Notes, sp.note)
		}
		if pad, ok := w.paddingRow(table, 0); ok {
			p.PaddingIdx = ptr(pad)
		}
		f.Params = p
		return f
	}
	lp := &LearnedParams{Dim: dim, PositionOffset: ptr(off)}
	if rowsN > 0 {
		lp.MaxPositions = ptr(rowsN)
	}
	f.Params = lp
	return f
}
