package graph

import (
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// Clone returns a deep copy of the model's IR: new graphs, nodes, values
// and functions, in the same order as m's (walking both visits
// corresponding nodes together). Tensors, types, attributes that hold no
// graph, and the fields kept as loaded are shared with m: the IR's edit
// methods replace them and never change them in place, so edits of the
// copy (SetInput, ReplaceAllUsesWith, InsertBefore, Remove, new
// initializers) leave m as it was. Do not rename or rewrite a shared
// tensor itself.
//
// It is how analyses get a working copy without encoding and decoding the
// model. The copy's values are numbered 1 to c.NumCloned() (Value.Num),
// its nodes 1 to c.NumClonedNodes() (Node.Num).
func (m *Model) Clone() *Model {
	c := &Model{Dir: m.Dir, shell: proto.Clone(m.shell).(*onnxpb.ModelProto), repairs: slices.Clone(m.repairs)}
	if m.names.used != nil {
		// m's names, shared: the copy's new names are its own.
		c.names = nameSet{used: map[string]bool{}, next: map[string]int{}, of: &m.names}
	}
	// Every value of the main graph is seen: the list is made at about its
	// final size (growing it by doubling cost a tenth of a 100k-node copy).
	cl := &cloner{m: c, seen: make([]*Value, 0, len(m.Graph.scope)+len(m.Graph.Inputs)+len(m.Graph.Initializers))}
	defer func() {
		for _, v := range cl.seen {
			v.twin = nil
		}
	}()
	c.Graph = cl.graph(m.Graph, nil)
	for _, f := range m.Functions {
		nf := *f
		nf.Body = cl.graph(f.Body, nil)
		c.Functions = append(c.Functions, &nf)
	}
	c.cloned, c.clonedN = len(cl.seen), cl.nn
	return c
}

// cloner maps values to their copies through Value.twin (a map of 100k
// pointers costs more than the copy itself); seen lists them to reset.
// Values, nodes, their input/output lists and use lists are carved from
// chunks allocated together (a few objects per thousand nodes instead of
// five per node: the collector's work and the cache misses of a 100k-node
// copy halve).
type cloner struct {
	m      *Model
	seen   []*Value
	values []Value
	nodes  []Node
	ptrs   []*Value
	uses   []Use
	nn     int // nodes made
}

const cloneChunk = 1024

func (cl *cloner) value(v *Value, g *Graph) *Value {
	if v == nil {
		return nil
	}
	if v.twin != nil {
		return v.twin
	}
	if len(cl.values) == 0 {
		cl.values = make([]Value, cloneChunk)
	}
	nv := &cl.values[0]
	cl.values = cl.values[1:]
	cl.seen = append(cl.seen, v)
	*nv = Value{Name: v.Name, Type: v.Type, Const: v.Const, index: v.index, num: int32(len(cl.seen)), graph: g, info: v.info, sparse: v.sparse}
	nv.uses = cl.useList(len(v.uses))
	v.twin = nv
	return nv
}

// node is a new node from the chunk.
func (cl *cloner) node() *Node {
	if len(cl.nodes) == 0 {
		cl.nodes = make([]Node, cloneChunk)
	}
	n := &cl.nodes[0]
	cl.nodes = cl.nodes[1:]
	cl.nn++
	return n
}

// valueList is an empty list of values with room for k (appending beyond
// k moves it out of the chunk).
func (cl *cloner) valueList(k int) []*Value {
	if k > cloneChunk/4 {
		return make([]*Value, 0, k)
	}
	if len(cl.ptrs) < k {
		cl.ptrs = make([]*Value, cloneChunk)
	}
	l := cl.ptrs[:0:k]
	cl.ptrs = cl.ptrs[k:]
	return l
}

// useList is an empty list of uses with room for k.
func (cl *cloner) useList(k int) []Use {
	if k == 0 {
		return nil
	}
	if k > cloneChunk/4 {
		return make([]Use, 0, k)
	}
	if len(cl.uses) < k {
		cl.uses = make([]Use, cloneChunk)
	}
	l := cl.uses[:0:k]
	cl.uses = cl.uses[k:]
	return l
}

// graph copies g (and, through its nodes' attributes, its subgraphs);
// parent is the copy of the graph enclosing g.
func (cl *cloner) graph(g *Graph, parent *Graph) *Graph {
	ng := &Graph{Name: g.Name, parent: parent, model: cl.m, shell: g.shell, scope: make(map[string]*Value, len(g.scope))}
	// Every value g defines first: nodes may read values defined after
	// them (files out of order) and subgraphs read values of g.
	for _, v := range g.Inputs {
		ng.Inputs = append(ng.Inputs, cl.value(v, ng))
	}
	for _, v := range g.Initializers {
		ng.Initializers = append(ng.Initializers, cl.value(v, ng))
	}
	for _, v := range g.sparse {
		ng.sparse = append(ng.sparse, cl.value(v, ng))
	}
	ng.nodes = make([]*Node, len(g.nodes))
	for i, n := range g.nodes {
		nn := cl.node()
		*nn = Node{Name: n.Name, OpType: n.OpType, Domain: n.Domain, Overload: n.Overload, graph: ng, shell: n.shell, num: int32(cl.nn)}
		nn.outputs = cl.valueList(len(n.outputs))
		for _, o := range n.outputs {
			no := cl.value(o, ng)
			no.producer = nn
			nn.outputs = append(nn.outputs, no)
		}
		ng.nodes[i] = nn
	}
	for name, v := range g.scope {
		ng.scope[name] = cl.value(v, ng)
	}
	for i, n := range g.nodes {
		nn := ng.nodes[i]
		nn.Attrs = make([]*Attr, len(n.Attrs))
		for j, a := range n.Attrs {
			if a.Graph == nil && len(a.Graphs) == 0 {
				nn.Attrs[j] = a
				continue
			}
			na := *a
			if a.Graph != nil {
				na.Graph = cl.graph(a.Graph, ng)
				na.Graph.owner = nn
			}
			if len(a.Graphs) > 0 {
				na.Graphs = make([]*Graph, len(a.Graphs))
				for k, sg := range a.Graphs {
					na.Graphs[k] = cl.graph(sg, ng)
					na.Graphs[k].owner = nn
				}
			}
			nn.Attrs[j] = &na
		}
		nn.inputs = cl.valueList(len(n.inputs))[:len(n.inputs)]
		for k, v := range n.inputs {
			if v == nil {
				continue
			}
			nv := v.twin
			if nv == nil { // defined nowhere the copy has seen: keep a stand-in
				nv = cl.value(v, ng)
			}
			nn.inputs[k] = nv
			nv.uses = append(nv.uses, Use{nn, k})
		}
	}
	for _, v := range g.Outputs {
		ng.Outputs = append(ng.Outputs, cl.value(v, ng))
	}
	for _, v := range g.ValueInfo {
		ng.ValueInfo = append(ng.ValueInfo, cl.value(v, ng))
	}
	if g.overrides != nil {
		ng.overrides = make(map[declKey]declOverride, len(g.overrides))
		for k, o := range g.overrides {
			ng.overrides[declKey{k.list, cl.value(k.v, ng)}] = o
		}
	}
	return ng
}
