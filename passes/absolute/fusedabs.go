package absolute

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

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
	// (positions 0..15), or 0..S-1 without them.
	pos := make([]int64, 16)
	for i := range pos {
		pos[i] = int64(i)
	}
	if posIDs != nil {
		p := probe.NewProbe(w, 1, 16, 0)
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
	if sp, ok := fitSinusoidal(w, rows, e.Dim); ok {
		e.Sin = &sp
	}
	return e
}
