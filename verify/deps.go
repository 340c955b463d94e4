package verify

import (
	"github.com/onnxpe/onnxpe/graph"
)

// bits is a set of feed-input indices.
type bits []uint64

func (b bits) has(i int) bool { return i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0 }

func (b bits) any() bool {
	for _, w := range b {
		if w != 0 {
			return true
		}
	}
	return false
}

func (b *bits) set(i int) {
	for len(*b) <= i/64 {
		*b = append(*b, 0)
	}
	(*b)[i/64] |= 1 << (i % 64)
}

// union adds o to b and reports whether b grew.
func (b *bits) union(o bits) bool {
	grew := false
	for len(*b) < len(o) {
		*b = append(*b, 0)
	}
	for i, w := range o {
		if (*b)[i]|w != (*b)[i] {
			(*b)[i] |= w
			grew = true
		}
	}
	return grew
}

// deps records, for every value of the main graph, which feed inputs it
// depends on: through their values (vals), or at all, shapes included
// (any). Shape and Size cut value dependence: their outputs depend on
// the input's shape only.
type deps struct {
	vals map[*graph.Value]bits
	any  map[*graph.Value]bits
}

func computeDeps(g *graph.Graph, feeds []*graph.Value) *deps {
	d := &deps{vals: map[*graph.Value]bits{}, any: map[*graph.Value]bits{}}
	for i, v := range feeds {
		var b bits
		b.set(i)
		d.vals[v] = b
		d.any[v] = append(bits(nil), b...)
	}
	nodes := g.Nodes()
	// Nodes are stored in topological order in valid models; repeat until
	// nothing changes for the others (subgraph reads make it cheap enough).
	for pass := 0; pass < 8; pass++ {
		changed := false
		for _, n := range nodes {
			var vals, all bits
			for _, in := range n.Inputs() {
				if in == nil {
					continue
				}
				vals.union(d.vals[in])
				all.union(d.any[in])
			}
			for _, sg := range n.Subgraphs() {
				sg.Walk(func(sn *graph.Node) {
					for _, in := range sn.Inputs() {
						if in != nil && in.Graph() == g {
							vals.union(d.vals[in])
							all.union(d.any[in])
						}
					}
				})
			}
			if (n.OpType == "Shape" || n.OpType == "Size") && isONNX(n.Domain) {
				vals = nil
			}
			for _, o := range n.Outputs() {
				v, a := d.vals[o], d.any[o]
				if v.union(vals) {
					changed = true
				}
				if a.union(all) {
					changed = true
				}
				d.vals[o], d.any[o] = v, a
			}
		}
		if !changed {
			break
		}
	}
	return d
}

func isONNX(domain string) bool { return domain == "" || domain == "ai.onnx" }
