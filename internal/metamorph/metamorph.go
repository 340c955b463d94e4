// Package metamorph holds transformations of ONNX models that keep what a
// model computes: renaming every value and node, another topological
// order, MatMul written as Einsum, a newer opset, weights in an external
// file, the graph wrapped in an If, functions inlined, layers outlined into
// functions, initializers as Constant nodes, values folded into stored
// tables. Metamorphic tests run an analysis (the audit) on a model and on
// its transforms and compare the answers.
//
// It is a test-support package: no command of onnxpe uses it. It imports
// graph and kernels only (kernels to evaluate the values it folds). Each
// transformation works on the model it is given (callers pass a copy) and
// returns the model saved and loaded again, so that the result is what a
// file would hold; it returns ErrNotApplicable (wrapped, with the reason)
// when the model has nothing it changes.
package metamorph

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/onnxpe/onnxpe/graph"
)

// ErrNotApplicable says that a transformation has nothing to change in a
// model (no MatMul of known ranks, no functions, no layer names, ...).
var ErrNotApplicable = errors.New("not applicable")

func notApplicable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotApplicable, fmt.Sprintf(format, args...))
}

// Reencode saves and reloads a model: a clean IR after edits, and the form
// a file holds.
func Reencode(m *graph.Model) (*graph.Model, error) {
	b, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	return graph.DecodeWith(b, m.Dir, graph.LoadOptions{AllowMissingExternal: true})
}

// Graphs lists the main graph, every subgraph and every function body of m.
func Graphs(m *graph.Model) []*graph.Graph {
	var out []*graph.Graph
	var walk func(g *graph.Graph)
	walk = func(g *graph.Graph) {
		out = append(out, g)
		for _, n := range g.Nodes() {
			for _, sg := range n.Subgraphs() {
				walk(sg)
			}
		}
	}
	walk(m.Graph)
	for _, f := range m.Functions {
		walk(f.Body)
	}
	return out
}

// DisplayName is the name a report gives a node: its name, or its first
// output's when it has none.
func DisplayName(n *graph.Node) string {
	if n.Name != "" {
		return n.Name
	}
	if len(n.Outputs()) > 0 {
		return n.Output(0).Name
	}
	return ""
}

// Rename gives every node and value a new random name (graph inputs and
// outputs included). It returns the map from old node names (as reports
// print them, DisplayName) to new ones, and from old value names to new.
func Rename(m *graph.Model, seed uint64) (*graph.Model, map[string]string, map[string]string, error) {
	rng := rand.New(rand.NewPCG(seed, 7))
	used := map[string]bool{}
	fresh := func(prefix string) string {
		for {
			s := fmt.Sprintf("%s%08x", prefix, rng.Uint32())
			if !used[s] {
				used[s] = true
				return s
			}
		}
	}
	names, values := map[string]string{}, map[string]string{}
	for _, g := range Graphs(m) {
		renamed := map[*graph.Value]bool{}
		rename := func(v *graph.Value) {
			if v != nil && v.Name != "" && !renamed[v] {
				renamed[v] = true
				old := v.Name
				v.Name = fresh("v")
				values[old] = v.Name
			}
		}
		for _, v := range g.Inputs {
			rename(v)
		}
		for _, v := range g.Initializers {
			rename(v)
		}
		for _, n := range g.Nodes() {
			old := DisplayName(n)
			for _, o := range n.Outputs() {
				rename(o)
			}
			n.Name = fresh("n")
			names[old] = n.Name
		}
	}
	out, err := Reencode(m)
	return out, names, values, err
}

// Shuffle puts the nodes of every graph (subgraphs and function bodies
// too) in a random topological order. It returns the number of graphs
// whose order changed.
func Shuffle(m *graph.Model, seed uint64) (*graph.Model, int, error) {
	rng := rand.New(rand.NewPCG(seed, 11))
	changed := 0
	for _, g := range Graphs(m) {
		nodes := g.Nodes()
		index := make(map[*graph.Node]int, len(nodes))
		for i, n := range nodes {
			index[n] = i
		}
		succ := make([][]int, len(nodes))
		indeg := make([]int, len(nodes))
		for i, n := range nodes {
			for _, p := range producersIn(g, n) {
				if j, ok := index[p]; ok && j != i {
					succ[j] = append(succ[j], i)
					indeg[i]++
				}
			}
		}
		var ready []int
		for i := range nodes {
			if indeg[i] == 0 {
				ready = append(ready, i)
			}
		}
		order := make([]*graph.Node, 0, len(nodes))
		for len(ready) > 0 {
			k := rng.IntN(len(ready))
			i := ready[k]
			ready[k] = ready[len(ready)-1]
			ready = ready[:len(ready)-1]
			order = append(order, nodes[i])
			for _, s := range succ[i] {
				if indeg[s]--; indeg[s] == 0 {
					ready = append(ready, s)
				}
			}
		}
		if len(order) != len(nodes) {
			return nil, 0, fmt.Errorf("graph %q has a cycle", g.Name)
		}
		for i := range order {
			if order[i] != nodes[i] {
				changed++
				break
			}
		}
		if err := g.SetOrder(order); err != nil {
			return nil, 0, err
		}
	}
	if changed == 0 {
		return nil, 0, notApplicable("no graph has two orders")
	}
	out, err := Reencode(m)
	return out, changed, err
}

// producersIn lists the nodes of g that n depends on: the producers of its
// inputs and of the values of g its subgraphs read.
func producersIn(g *graph.Graph, n *graph.Node) []*graph.Node {
	var out []*graph.Node
	add := func(v *graph.Value) {
		if v != nil && v.Producer() != nil && v.Producer().Graph() == g {
			out = append(out, v.Producer())
		}
	}
	for _, v := range n.Inputs() {
		add(v)
	}
	for _, sg := range n.Subgraphs() {
		sg.Walk(func(m *graph.Node) {
			for _, v := range m.Inputs() {
				add(v)
			}
		})
		for _, v := range sg.Outputs {
			add(v)
		}
	}
	return out
}

// ToConstants turns every initializer (of every graph) that is not also a
// graph input into a Constant node.
func ToConstants(m *graph.Model) (*graph.Model, int, error) {
	count := 0
	for _, g := range Graphs(m) {
		var keep []*graph.Value
		for _, v := range g.Initializers {
			if v.IsGraphInput() || v.IsGraphOutput() || len(g.Nodes()) == 0 || v.Const.IsExternal() && v.Const.External().Missing() {
				keep = append(keep, v)
				continue
			}
			c := g.NewNode("Constant", "", nil, 1, graph.TensorAttr("value", v.Const))
			g.InsertBefore(g.Nodes()[0], c)
			v.ReplaceAllUsesWith(c.Output(0))
			count++
		}
		g.Initializers = keep
	}
	if count == 0 {
		return nil, 0, notApplicable("no initializer")
	}
	out, err := Reencode(m)
	return out, count, err
}
