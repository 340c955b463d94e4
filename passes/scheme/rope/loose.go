package rope

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/work"
)

// Rotations of tensors that are not a block's q or k: RoPE applied in a
// fragment without attention, or where the walk back from the scores did
// not reach it. Every product of content with a value that does not depend
// on content but changes (cos or sin at positions), outside the blocks'
// sides, is followed forward through the ops a rotation is written with
// to the value its region ends at; that value is walked back as a score
// operand is (attn.RegionOf) and measured with the same unit-vector probes
// as q. What does not rotate pairs of lanes is not reported (--trace says
// why).

// maxLoose bounds the region ends probed per model.
const maxLoose = 16

// rotationOps are the ops a rotation's region is written with between
// its products with cos/sin and the rotated value.
var rotationOps = map[string]bool{"Add": true, "Sub": true, "Neg": true, "Mul": true, "Concat": true, "Split": true,
	"Slice": true, "Gather": true, "Unsqueeze": true, "Squeeze": true, "Reshape": true, "Transpose": true,
	"Expand": true, "Cast": true, "Identity": true, "Flatten": true}

// looseRotations finds and measures the rotations outside the blocks'
// sides; each hit's layers are the blocks its rotated value reaches.
func looseRotations(c *passes.Context, w *work.Work, blocks []*attn.Block, sides map[*attn.Block]*attn.BlockSides, cache map[string]*ropeMeasure) []hit {
	held := map[*graph.Node]bool{}
	for _, bs := range sides {
		for _, s := range []*attn.Side{bs.Q, bs.K} {
			if s != nil {
				for _, n := range s.Nodes {
					held[n] = true
				}
			}
		}
	}
	var hits []hit
	for i, end := range regionEnds(w, held) {
		if i == maxLoose {
			c.Miss("rope", w.Name(end), fmt.Sprintf("more than %d products of content with position values outside attention: the others are not probed", maxLoose), 0)
			break
		}
		s, m, why := measureRegion(w, end, held, cache)
		if m == nil {
			if why != "" {
				c.Miss("rope", w.Name(end), "outside attention: "+why, 1)
			}
			continue
		}
		for _, n := range s.Nodes {
			held[n] = true
		}
		hits = append(hits, looseHit(w, blocks, s, m))
	}
	return hits
}

// regionEnds are the values where the regions of the products of content
// with position values end, in the graph's order: followed forward through
// rotationOps to a value read by another op or a graph output.
func regionEnds(w *work.Work, held map[*graph.Node]bool) []*graph.Value {
	var ends []*graph.Value
	seen := map[*graph.Node]bool{}
	outputs := map[*graph.Value]bool{}
	for _, o := range w.M.Graph.Outputs {
		outputs[o] = true
	}
	var forward func(v *graph.Value)
	forward = func(v *graph.Value) {
		inside := false
		for _, n := range v.Consumers() {
			if rotationOps[n.OpType] && work.IsONNX(n) && !held[n] && w.IsAct(v) {
				inside = true
				if !seen[n] {
					seen[n] = true
					for _, o := range n.Outputs() {
						forward(o)
					}
				}
			}
		}
		if (!inside || outputs[v]) && !slices.Contains(ends, v) {
			ends = append(ends, v)
		}
	}
	for _, n := range w.M.Graph.Nodes() {
		if n.OpType == "Mul" && work.IsONNX(n) && !held[n] && !seen[n] && mixesPosition(w, n) {
			seen[n] = true
			forward(n.Outputs()[0])
		}
	}
	slices.SortFunc(ends, func(a, b *graph.Value) int { return w.PosOf(a) - w.PosOf(b) })
	return ends
}

// mixesPosition reports whether the product n multiplies content by a
// value that does not depend on content and is not a constant over the
// positions (cos or sin at the positions, or a folded table of them).
func mixesPosition(w *work.Work, n *graph.Node) bool {
	acts := w.ActInputs(n)
	if len(acts) != 1 || len(n.Inputs()) != 2 {
		return false
	}
	x := n.Input(1 - acts[0])
	if w.IsConst(x) {
		return w.FixedPositionTable(x)
	}
	return !w.IsWeight(x) && w.Shape(x).Rank() >= 2
}

// measureRegion walks back from end as from a score operand, for each
// head width the layout ops before end give (the rotated value may be
// viewed as [..., heads, head_dim] only inside the region), and measures
// the first region that rotates pairs of lanes.
func measureRegion(w *work.Work, end *graph.Value, held map[*graph.Node]bool, cache map[string]*ropeMeasure) (*attn.Side, *ropeMeasure, string) {
	var why string
	for _, hd := range headWidths(w, end) {
		s, _ := attn.RegionOf(w, end, hd)
		if s == nil || len(s.Nodes) == 0 || len(s.Pos) == 0 || slices.ContainsFunc(s.Nodes, func(n *graph.Node) bool { return held[n] }) {
			continue
		}
		if n := fusedIn(s.Nodes); n != nil {
			return nil, nil, fmt.Sprintf("rotated by the fused op %v", n)
		}
		m, w2 := measureCached(w, cache, s)
		if m != nil {
			return s, m, ""
		}
		why = w2
	}
	return nil, nil, why
}

// headWidths are the last dims of end and of the values the layout ops
// before it read, each once.
func headWidths(w *work.Work, end *graph.Value) []work.Dim {
	var out []work.Dim
	v := end
	for steps := 0; steps < 8 && v != nil; steps++ {
		if d := w.Shape(v).Last(); d.Known() && d >= 2 && !slices.Contains(out, d) {
			out = append(out, d)
		}
		n := v.Producer()
		if n == nil || !work.IsONNX(n) || !work.LayoutOps[n.OpType] && n.OpType != "Concat" {
			break
		}
		v = n.Input(0)
	}
	return out
}

// looseHit is the hit of a rotation outside the blocks' sides.
func looseHit(w *work.Work, blocks []*attn.Block, s *attn.Side, m *ropeMeasure) hit {
	p, notes := ropeParams(w, &attn.BlockSides{Q: s}, m, nil)
	layers := reachedBlocks(blocks, s.Out)
	if len(layers) == 0 {
		p.NumKVHeads = nil
		notes = append(notes, fmt.Sprintf("the rotation of %s reaches no attention block found: num_kv_heads null (num_heads is the rotated tensor's heads axis)", w.OrigValue(s.Out)))
	}
	ev := sideEvidence(w, s)
	return hit{layers: layers, params: p, loose: &ev, m: m, side: s, nodes: s.Nodes, pos: s.Pos, notes: notes}
}

// reachedBlocks are the blocks whose q or k depends on v.
func reachedBlocks(blocks []*attn.Block, v *graph.Value) []int {
	reach := map[*graph.Value]bool{v: true}
	queue := []*graph.Value{v}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		for _, n := range x.Consumers() {
			for _, o := range n.Outputs() {
				if !reach[o] {
					reach[o] = true
					queue = append(queue, o)
				}
			}
		}
	}
	var out []int
	for _, b := range blocks {
		if reach[b.Q] || reach[b.K] {
			out = append(out, b.Index)
		}
	}
	return out
}
