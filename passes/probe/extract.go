package probe

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/work"
)

// ExtractSpec asks for a standalone part of a model: the subgraph that
// computes some of its values for one sequence length, with some values
// given instead of computed.
type ExtractSpec struct {
	// Values are the values to compute (names of the original model, as
	// findings and their evidence give them); they are the outputs of the
	// extracted model, in this order.
	Values []string
	// Seq is the sequence length: every size of the model that is not the
	// batch's or a KV cache's takes it (the batch takes 1, the cache 0).
	Seq int
	// Cuts are values given instead of computed (q at the input of a
	// rotation): each becomes an input of the extracted model. A cut of
	// another shape than the value has for Seq (BoundShape; an empty
	// past) makes the sizes computed from it computed, not bound.
	Cuts map[string]*kernels.Tensor
	// Positions, when set, says where the positions are read (a
	// finding's evidence); the extracted model reads Start, Start+1, ...,
	// Start+Seq-1 there. Otherwise positions are what the model makes of
	// its inputs (position ids Start.., masks of ones, no past).
	Positions *Positions
	Start     int64
}

// Extracted is a standalone model and values for its inputs.
type Extracted struct {
	// Model holds the nodes of the working copy (the caller's model
	// normalised: functions inlined, constants folded) that compute the
	// values asked for, and nothing else. The sizes of other values that
	// the sequence length decides (Shape of the token ids, of q) are
	// constants, so it does not reach the network's weights.
	Model *graph.Model
	// Inputs hold a value for each input of Model: the cuts, and the
	// model's own inputs synthesised by role as the probes do (token ids,
	// position ids Start.., masks of ones).
	Inputs map[string]*kernels.Tensor
	// Given maps the names of spec.Cuts to the inputs of Model that take
	// them (feed other values there to run Model again).
	Given map[string]string
}

// lookup finds the value of the working copy's main graph that stands for
// the original value name (or is so named, for values normalisation made).
func Lookup(w *work.Work, name string) *graph.Value {
	if w.ByName == nil {
		w.ByName = map[string]*graph.Value{}
		add := func(v *graph.Value) {
			if v == nil {
				return
			}
			for _, k := range []string{w.OrigValue(v), v.Name} {
				if _, ok := w.ByName[k]; k != "" && !ok {
					w.ByName[k] = v
				}
			}
		}
		g := w.M.Graph
		for _, v := range g.Inputs {
			add(v)
		}
		for _, v := range g.Initializers {
			add(v)
		}
		for _, n := range g.Nodes() {
			for _, o := range n.Outputs() {
				add(o)
			}
		}
	}
	return w.ByName[name]
}

// BoundShape is the shape and element type of an original value of the
// main graph when the sequence length is seq, the batch 1 and a KV cache
// given as input empty.
func BoundShape(c *passes.Context, value string, seq int) ([]int, graph.DataType, error) {
	w := work.Of(c)
	v := Lookup(w, value)
	if v == nil {
		return nil, 0, fmt.Errorf("no value %q in the main graph", value)
	}
	p := NewProbe(w, 1, seq, 0)
	p.Past = 0
	shape, ok := p.BindShape(w.Shape(v))
	if !ok {
		return nil, 0, fmt.Errorf("the shape %s of %q is not decided by the sequence length", w.ShapeString(w.Shape(v)), value)
	}
	return shape, w.ElemType(v), nil
}

// Extract makes the standalone model that computes spec.Values: the cone
// of those values in the working copy, cut at spec.Cuts and the positions,
// with the sizes the sequence length decides made constants. It is how
// values of a model are computed by the executor (kernels.Session) without
// running the whole model: codegen's golden vectors come from it.
func Extract(c *passes.Context, spec ExtractSpec) (*Extracted, error) {
	w := work.Of(c)
	if spec.Seq < 1 {
		return nil, fmt.Errorf("extract: sequence length %d", spec.Seq)
	}
	p := NewProbe(w, 1, spec.Seq, spec.Start)
	p.Past = 0
	cuts := map[*graph.Value]*kernels.Tensor{}
	cutName := map[*graph.Value]string{}
	for name, t := range spec.Cuts {
		v := Lookup(w, name)
		if v == nil {
			return nil, fmt.Errorf("extract: no value %q in the main graph", name)
		}
		cuts[v] = t
		cutName[v] = name
	}
	if spec.Positions != nil {
		if err := CutPositions(w, p, spec.Positions, spec.Start, cuts); err != nil {
			return nil, fmt.Errorf("extract: positions: %w", err)
		}
	}
	var targets []*graph.Value
	for _, name := range spec.Values {
		v := Lookup(w, name)
		if v == nil {
			return nil, fmt.Errorf("extract: no value %q in the main graph", name)
		}
		targets = append(targets, v)
	}

	m := w.M.Clone()
	twin := map[*graph.Value]*graph.Value{}
	nodes := map[*graph.Node]*graph.Node{}
	pairClone(w.M.Graph, m.Graph, twin, nodes)
	g := m.Graph
	inputs := map[string]*kernels.Tensor{}
	given := map[string]string{}
	var ins []*graph.Value
	// Cut values become inputs.
	for v, t := range cuts {
		cv := twin[v]
		name := cv.Name
		if !cv.IsGraphInput() || slices.Contains(g.Initializers, cv) {
			in := g.AddInput(m.NewName(v.Name+"_given"), graph.TensorType(t.DType, graph.Dims(toInt64s(t.Shape)...)))
			cv.ReplaceAllUsesWith(in)
			name = in.Name
		}
		inputs[name] = t
		if n, ok := cutName[v]; ok {
			given[n] = name
		}
	}
	// Shape and Size of values whose shape the sequence length decides,
	// but not of values computed from a cut of another shape (an empty
	// past, say): those are computed.
	below := map[*graph.Value]bool{}
	var mark func(v *graph.Value)
	mark = func(v *graph.Value) {
		if below[v] {
			return
		}
		below[v] = true
		for _, u := range v.Uses() {
			for _, o := range u.Node.Outputs() {
				mark(o)
			}
		}
	}
	for v, t := range cuts {
		if shape, ok := p.BindShape(w.Shape(v)); !ok || !slices.Equal(shape, t.Shape) {
			mark(v)
		}
	}
	for n, cn := range nodes {
		if (n.OpType != "Shape" && n.OpType != "Size") || !work.IsONNX(n) || n.Graph() != w.M.Graph || below[n.Input(0)] {
			continue
		}
		shape, ok := p.BindShape(w.Shape(n.Input(0)))
		if !ok {
			continue
		}
		gt, err := shapeTensor(n, shape).ToGraph(m.NewName(n.Output(0).Name + "_bound"))
		if err != nil {
			return nil, fmt.Errorf("extract: %w", err)
		}
		cn.Output(0).ReplaceAllUsesWith(g.AddInitializer(gt))
	}
	g.Outputs = nil
	for _, v := range targets {
		g.AddOutput(twin[v])
	}
	g.EliminateDeadCode()
	used := func(v *graph.Value) bool { return v.NumUses() > 0 || v.IsGraphOutput() }
	back := map[*graph.Value]*graph.Value{}
	for v, cv := range twin {
		back[cv] = v
	}
	for _, in := range g.Inputs {
		if !used(in) || slices.Contains(g.Initializers, in) {
			continue
		}
		ins = append(ins, in)
		if _, ok := inputs[in.Name]; ok {
			continue
		}
		v := back[in]
		if v == nil {
			return nil, fmt.Errorf("extract: input %q has no counterpart", in.Name)
		}
		t, err := p.input(v)
		if err != nil {
			return nil, fmt.Errorf("extract: %w", err)
		}
		inputs[in.Name] = t
	}
	g.Inputs = ins
	g.Initializers = slices.DeleteFunc(g.Initializers, func(v *graph.Value) bool { return !used(v) })
	for name := range inputs {
		if !slices.ContainsFunc(ins, func(v *graph.Value) bool { return v.Name == name }) {
			delete(inputs, name)
		}
	}
	return &Extracted{Model: m, Inputs: inputs, Given: given}, nil
}

// pairClone maps the values and nodes of graph a to those of its clone b
// (same order, subgraphs included).
func pairClone(a, b *graph.Graph, vals map[*graph.Value]*graph.Value, nodes map[*graph.Node]*graph.Node) {
	for i, v := range a.Inputs {
		vals[v] = b.Inputs[i]
	}
	for i, v := range a.Initializers {
		vals[v] = b.Initializers[i]
	}
	an, bn := a.Nodes(), b.Nodes()
	for i, n := range an {
		nodes[n] = bn[i]
		for j, o := range n.Outputs() {
			vals[o] = bn[i].Output(j)
		}
		as, bs := n.Subgraphs(), bn[i].Subgraphs()
		for k := range as {
			pairClone(as[k], bs[k], vals, nodes)
		}
	}
}
