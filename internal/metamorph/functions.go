package metamorph

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
)

// LayersDomain is the domain of the functions OutlineLayers makes.
const LayersDomain = "onnxpe.test.layers"

var layerKey = regexp.MustCompile(`(?:^|[/.])(layers|layer|h|block|blocks)[._](\d+)(?:[/.]|$)`)

// OutlineLayers moves the nodes of every layer of the main graph into a
// model-local function called once per layer. A layer is found by its
// nodes' names (/layers.3/..., /h.0/..., /block.1/...: the outermost
// numbered path), or by prefixes when given (a model whose names number
// only some layers). Constant nodes stay outside. It returns the number of
// layers outlined; ErrNotApplicable when the names do not show two layers
// or a layer holds subgraphs.
func OutlineLayers(m *graph.Model, prefixes []string) (*graph.Model, int, error) {
	g := m.Graph
	groups := map[string][]*graph.Node{}
	var order []string
	key := func(n *graph.Node) string {
		loc := layerKey.FindStringIndex(n.Name)
		if loc == nil {
			return ""
		}
		return n.Name[:loc[1]]
	}
	depth := -1
	for _, n := range g.Nodes() {
		if k := key(n); k != "" && (depth < 0 || strings.Count(k, "/") < depth) {
			depth = strings.Count(k, "/")
		}
	}
	outer := func(k string) bool { return strings.Count(k, "/") == depth }
	if prefixes != nil {
		key = func(n *graph.Node) string {
			for _, p := range prefixes {
				if strings.HasPrefix(n.Name, p) {
					return p
				}
			}
			return ""
		}
		outer = func(string) bool { return true }
	}
	for _, n := range g.Nodes() {
		k := key(n)
		if k == "" || n.OpType == "Constant" || !outer(k) {
			continue
		}
		if len(n.Subgraphs()) > 0 {
			return nil, 0, notApplicable("layer %s holds a node with subgraphs (%s)", k, DisplayName(n))
		}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], n)
	}
	if len(order) < 2 {
		return nil, 0, notApplicable("the node names show %d layers", len(order))
	}
	m.SetOpsetVersion(LayersDomain, 1)
	for li, k := range order {
		nodes := groups[k]
		in := map[*graph.Node]bool{}
		for _, n := range nodes {
			in[n] = true
		}
		var ins, outs []*graph.Value
		for _, n := range nodes {
			for _, v := range n.Inputs() {
				if v != nil && !in[v.Producer()] && !slices.Contains(ins, v) {
					ins = append(ins, v)
				}
			}
			for _, o := range n.Outputs() {
				if o.Name == "" {
					continue
				}
				used := o.IsGraphOutput()
				for _, u := range o.Uses() {
					if !in[u.Node] {
						used = true
					}
				}
				if used {
					outs = append(outs, o)
				}
			}
		}
		f := m.AddFunction(LayersDomain, fmt.Sprintf("layer_%d", li))
		for _, o := range m.Opsets() {
			if o.Domain != LayersDomain {
				f.SetOpsetVersion(o.Domain, o.Version)
			}
		}
		vmap := map[*graph.Value]*graph.Value{}
		for _, v := range ins {
			vmap[v] = f.Body.AddInput(v.Name, nil)
		}
		for _, n := range nodes {
			var bins []*graph.Value
			for _, v := range n.Inputs() {
				bins = append(bins, vmap[v])
			}
			nn := f.Body.NewNode(n.OpType, n.Domain, bins, len(n.Outputs()), n.Attrs...)
			nn.Name = n.Name
			f.Body.Append(nn)
			for i, o := range n.Outputs() {
				vmap[o] = nn.Output(i)
			}
		}
		for _, o := range outs {
			f.Body.AddOutput(vmap[o])
		}
		call := g.NewNode(f.Name, LayersDomain, ins, len(outs))
		call.Name = strings.TrimSuffix(k, "/")
		g.InsertBefore(nodes[0], call)
		for i, o := range outs {
			o.ReplaceAllUsesWith(call.Output(i))
		}
		for i := len(nodes) - 1; i >= 0; i-- {
			if err := g.Remove(nodes[i]); err != nil {
				return nil, 0, fmt.Errorf("layer %s: %w", k, err)
			}
		}
	}
	if err := g.TopoSort(); err != nil {
		return nil, 0, notApplicable("a layer's nodes are not contiguous in dataflow: %v", err)
	}
	out, err := Reencode(m)
	return out, len(order), err
}

// InlineFunctions replaces every call of a model-local function (in the
// main graph, its subgraphs and other functions' bodies) by a copy of the
// function's body, attribute references resolved, until no call is left;
// the functions are then removed. It returns the number of calls inlined
// and names: the name of every node made (as a report prints it) to the
// call it came from (the outermost one for nested calls).
func InlineFunctions(m *graph.Model) (*graph.Model, int, map[string]string, error) {
	if len(m.Functions) == 0 {
		return nil, 0, nil, notApplicable("no model-local function")
	}
	origin := map[string]string{}
	count := 0
	for round := 0; ; round++ {
		if round > 64 {
			return nil, 0, nil, fmt.Errorf("functions still called after 64 rounds of inlining (recursion?)")
		}
		var calls []*graph.Node
		var graphs []*graph.Graph
		var walk func(g *graph.Graph)
		walk = func(g *graph.Graph) {
			graphs = append(graphs, g)
			for _, n := range g.Nodes() {
				for _, sg := range n.Subgraphs() {
					walk(sg)
				}
			}
		}
		walk(m.Graph)
		for _, g := range graphs {
			for _, n := range g.Nodes() {
				if m.Function(n.Domain, n.OpType, "") != nil {
					calls = append(calls, n)
				}
			}
		}
		if len(calls) == 0 {
			break
		}
		for _, call := range calls {
			made, err := inlineCall(m, call, m.Function(call.Domain, call.OpType, ""))
			if err != nil {
				return nil, 0, nil, err
			}
			from := DisplayName(call)
			if o, ok := origin[from]; ok {
				from = o
			}
			for _, n := range made {
				origin[DisplayName(n)] = from
			}
			count++
		}
	}
	m.Functions = nil
	out, err := Reencode(m)
	return out, count, origin, err
}

// inlineCall puts a copy of f's body in place of call and returns the
// nodes it made.
func inlineCall(m *graph.Model, call *graph.Node, f *graph.Function) ([]*graph.Node, error) {
	g := call.Graph()
	vmap := map[*graph.Value]*graph.Value{}
	for i, in := range f.Body.Inputs {
		if i < len(call.Inputs()) {
			vmap[in] = call.Input(i)
		} else {
			vmap[in] = nil
		}
	}
	attr := func(a *graph.Attr) (*graph.Attr, bool) {
		ref := a.RefAttrName()
		if ref == "" {
			return a, true
		}
		if ca := call.Attr(ref); ca != nil {
			return ca.Renamed(a.Name()), true
		}
		for _, d := range f.AttrDefaults {
			if d.Name() == ref {
				return d.Renamed(a.Name()), true
			}
		}
		return nil, false
	}
	prefix := DisplayName(call)
	var made []*graph.Node
	for _, bn := range f.Body.Nodes() {
		if len(bn.Subgraphs()) > 0 {
			return nil, notApplicable("function %s has a node with subgraphs (%s)", f.Name, DisplayName(bn))
		}
		var ins []*graph.Value
		for _, v := range bn.Inputs() {
			if v == nil {
				ins = append(ins, nil)
				continue
			}
			w, ok := vmap[v]
			if !ok {
				return nil, fmt.Errorf("function %s: node %s reads %q, which the body does not define", f.Name, DisplayName(bn), v.Name)
			}
			ins = append(ins, w)
		}
		var attrs []*graph.Attr
		for _, a := range bn.Attrs {
			if b, ok := attr(a); ok {
				attrs = append(attrs, b)
			}
		}
		nn := g.NewNode(bn.OpType, bn.Domain, ins, len(bn.Outputs()), attrs...)
		nn.Name = m.NewName(prefix + "/" + DisplayName(bn))
		g.InsertBefore(call, nn)
		made = append(made, nn)
		for i, o := range bn.Outputs() {
			vmap[o] = nn.Output(i)
		}
	}
	for i, o := range call.Outputs() {
		if i >= len(f.Body.Outputs) {
			return nil, fmt.Errorf("call %s: %d outputs, function %s has %d", prefix, len(call.Outputs()), f.Name, len(f.Body.Outputs))
		}
		w := vmap[f.Body.Outputs[i]]
		if w == nil {
			return nil, fmt.Errorf("call %s: output %d of function %s is not computed by its body", prefix, i, f.Name)
		}
		if o.Name == "" {
			continue
		}
		if w.Producer() == nil || w.Producer().Graph() != g {
			// The output is one of the call's inputs: an Identity keeps a
			// producer for the value.
			id := g.NewNode("Identity", "", []*graph.Value{w}, 1)
			id.Name = m.NewName(prefix + "/identity")
			g.InsertBefore(call, id)
			made = append(made, id)
			w = id.Output(0)
		}
		o.ReplaceKeepingName(w)
	}
	return made, g.Remove(call)
}
