package attn

import (
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/work"
)

// canonicalOrder orders the nodes of the blocks and generation ops by what
// the graph computes, not by the order its nodes are listed in, so that a
// model whose nodes are listed in another topological order (ONNX Runtime's
// saves, a reordering tool) numbers its layers the same: a node comes after
// every other that it depends on, and of the nodes whose dependencies are
// placed, the one whose values depend on the earliest graph input comes
// first (an encoder, reading input 0, before a decoder's self-attention,
// reading the decoder's ids), then the first in the listed order. It
// returns the nodes reordered.
func canonicalOrder(w *work.Work, nodes []*graph.Node) []*graph.Node {
	if len(nodes) < 2 {
		return nodes
	}
	f := newFlow(w, nodes)
	f.graph(w.M.Graph)
	type item struct {
		n    *graph.Node
		deps bitset
		key  int
	}
	items := make([]item, len(nodes))
	for i, n := range nodes {
		items[i] = item{n: n, deps: f.deps[i], key: f.key(n)}
	}
	placed := newBitset(len(nodes))
	out := make([]*graph.Node, 0, len(nodes))
	for len(out) < len(nodes) {
		best := -1
		for i, it := range items {
			if placed.has(i) || !it.deps.within(placed, i) {
				continue
			}
			if best < 0 || it.key < items[best].key || it.key == items[best].key && w.Pos(it.n) < w.Pos(items[best].n) {
				best = i
			}
		}
		if best < 0 { // a cycle cannot happen in a sorted graph; keep the listed order
			for i, it := range items {
				if !placed.has(i) {
					placed.set(i)
					out = append(out, it.n)
				}
			}
			break
		}
		placed.set(best)
		out = append(out, items[best].n)
	}
	return out
}

// flow carries two facts forward through every graph of the copy: which of
// the ordered nodes each value depends on, and the smallest index of a
// main-graph input each value depends on by value (Shape and Size read no
// values).
type flow struct {
	w     *work.Work
	at    map[*graph.Node]int // the ordered nodes' indexes
	n     int
	up    map[*graph.Value]bitset
	minIn map[*graph.Value]int
	deps  []bitset // what each ordered node depends on
}

const noInput = 1 << 30

func newFlow(w *work.Work, nodes []*graph.Node) *flow {
	f := &flow{w: w, at: map[*graph.Node]int{}, n: len(nodes), up: map[*graph.Value]bitset{}, minIn: map[*graph.Value]int{},
		deps: make([]bitset, len(nodes))}
	for i, n := range nodes {
		f.at[n] = i
	}
	for i, v := range w.M.Graph.Inputs {
		if v.Const == nil {
			f.minIn[v] = i
		}
	}
	return f
}

func (f *flow) in(v *graph.Value) int {
	if v == nil {
		return noInput
	}
	if k, ok := f.minIn[v]; ok {
		return k
	}
	return noInput
}

// key is the earliest input n's outputs depend on by value.
func (f *flow) key(n *graph.Node) int {
	k := noInput
	for _, o := range n.Outputs() {
		k = min(k, f.in(o))
	}
	return k
}

// graph walks g's nodes in order; a node holding subgraphs reads what its
// subgraphs read.
func (f *flow) graph(g *graph.Graph) {
	for n := range g.All() {
		var up bitset
		key := noInput
		byValue := n.OpType != "Shape" && n.OpType != "Size" || !work.IsONNX(n)
		for _, v := range n.Inputs() {
			up = up.or(f.up[v])
			if byValue {
				key = min(key, f.in(v))
			}
		}
		for _, sg := range n.Subgraphs() {
			for _, v := range sg.Inputs {
				f.up[v], f.minIn[v] = up, key
			}
			f.graph(sg)
			for _, v := range sg.Outputs {
				up = up.or(f.up[v])
				key = min(key, f.in(v))
			}
			// Values of enclosing graphs read inside the subgraph.
			for m := range sg.All() {
				for _, v := range m.Inputs() {
					if v != nil && v.Graph() != sg {
						up = up.or(f.up[v])
						key = min(key, f.in(v))
					}
				}
			}
		}
		if i, ok := f.at[n]; ok {
			f.deps[i] = up
			up = up.or(newBitset(f.n).with(i))
		}
		for _, o := range n.Outputs() {
			if len(up) > 0 {
				f.up[o] = up
			}
			if key != noInput {
				f.minIn[o] = key
			}
		}
	}
}

// bitset is a set of small integers; nil is the empty set.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) has(i int) bool { return i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0 }

func (b bitset) set(i int) { b[i/64] |= 1 << (i % 64) }

func (b bitset) with(i int) bitset { b.set(i); return b }

// or is the union, sharing a or b when one holds the other.
func (b bitset) or(c bitset) bitset {
	switch {
	case len(c) == 0:
		return b
	case len(b) == 0:
		return c
	}
	if len(b) < len(c) {
		b, c = c, b
	}
	for i := range c {
		if c[i]&^b[i] != 0 {
			out := slices.Clone(b)
			for j := range c {
				out[j] |= c[j]
			}
			return out
		}
	}
	return b
}

// within reports whether every element of b but self is in placed.
func (b bitset) within(placed bitset, self int) bool {
	for i, x := range b {
		if i == self/64 {
			x &^= 1 << (self % 64)
		}
		if x&^placed[i] != 0 {
			return false
		}
	}
	return true
}
