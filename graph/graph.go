package graph

import (
	"fmt"
	"iter"
	"slices"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// Graph is an ordered list of nodes over values, with the graph's inputs,
// outputs and initializers. It is the model's main graph, the body of an
// If/Loop/Scan attribute, or the body of a model-local function.
//
// The node order is kept as loaded; it changes only through the edit
// methods and TopoSort.
type Graph struct {
	Name string
	// Inputs are the graph's inputs in order (function parameters for a
	// function body).
	Inputs []*Value
	// Outputs are the graph's outputs in order.
	Outputs []*Value
	// Initializers are the constant values defined by the graph, in order.
	// A value may be both an input and an initializer (IR < 4 models).
	Initializers []*Value
	// ValueInfo lists the values whose types the model declares besides
	// inputs and outputs, in order.
	ValueInfo []*Value

	nodes     []*Node
	parent    *Graph // enclosing graph for attribute subgraphs
	owner     *Node  // node whose attribute holds this graph
	model     *Model
	shell     *onnxpb.GraphProto // fields this package does not model, kept as loaded
	sparse    []*Value           // values defined by sparse initializers (kept in shell)
	scope     map[string]*Value  // names defined in this graph
	overrides map[declKey]declOverride
}

// Node is one operator call. Its inputs are values (nil for an optional
// input left out); it owns its output values.
type Node struct {
	Name     string
	OpType   string
	Domain   string
	Overload string
	Attrs    []*Attr

	inputs  []*Value
	outputs []*Value
	graph   *Graph
	shell   *onnxpb.NodeProto // doc_string, metadata, device configurations, unknown fields
	pos     int32             // scratch: index in graph.nodes during topoOrder
	num     int32             // number given by Model.Clone in the copy (see Num), else 0
}

// Use is one place where a value is read: input Index of Node. Node may be
// in a subgraph of the value's graph (an outer-scope reference).
type Use struct {
	Node  *Node
	Index int
}

// Value is an edge of the graph: a graph input, an initializer, or a node
// output, with its consumers.
type Value struct {
	Name  string
	Type  *Type   // declared type, or nil
	Const *Tensor // set for initializers

	producer *Node
	index    int32 // output index in producer
	num      int32 // number given by Model.Clone in the copy (see Num), else 0
	uses     []Use
	graph    *Graph
	info     *onnxpb.ValueInfoProto // doc_string, metadata_props of its declaration
	sparse   *onnxpb.SparseTensorProto
	twin     *Value // scratch: v's copy while Model.Clone runs, nil otherwise
}

// Producer is the node that computes v, or nil for graph inputs and
// initializers.
func (v *Value) Producer() *Node { return v.producer }

// OutputIndex is v's position among its producer's outputs.
func (v *Value) OutputIndex() int { return int(v.index) }

// Num is v's number in the copy Model.Clone made it in: 1 to the copy's
// NumCloned, each value of the copy its own, so that analyses of the copy
// can keep per-value facts in slices rather than maps keyed by *Value.
// Values made any other way (loaded, or added to the copy after it was
// made) are numbered 0, and numbers of different copies overlap: check
// v.Graph().Model() before taking a number for a place in a slice.
func (v *Value) Num() int { return int(v.num) }

// Uses lists the node inputs that read v, in the order they were added.
// The slice is a copy: edits made while walking it do not disturb it.
func (v *Value) Uses() []Use { return slices.Clone(v.uses) }

// NumUses is the number of node inputs that read v.
func (v *Value) NumUses() int { return len(v.uses) }

// Consumers lists the distinct nodes that read v.
func (v *Value) Consumers() []*Node {
	var out []*Node
	for _, u := range v.uses {
		if !slices.Contains(out, u.Node) {
			out = append(out, u.Node)
		}
	}
	return out
}

// Graph is the graph that defines v.
func (v *Value) Graph() *Graph { return v.graph }

// IsGraphInput reports whether v is an input of its graph.
func (v *Value) IsGraphInput() bool { return v.graph != nil && slices.Contains(v.graph.Inputs, v) }

// IsGraphOutput reports whether v is an output of its graph.
func (v *Value) IsGraphOutput() bool { return v.graph != nil && slices.Contains(v.graph.Outputs, v) }

// IsSparseInitializer reports whether v is defined by a sparse initializer.
func (v *Value) IsSparseInitializer() bool { return v.sparse != nil }

// Doc is the doc_string of v's declaration.
func (v *Value) Doc() string { return v.info.GetDocString() }

func (v *Value) String() string {
	if v == nil {
		return "<absent>"
	}
	return v.Name
}

// Graph is the graph that holds n.
func (n *Node) Graph() *Graph { return n.graph }

// Num is n's number in the copy Model.Clone made it in: 1 to the copy's
// NumClonedNodes, as Value.Num for values (0 for nodes made any other way).
func (n *Node) Num() int { return int(n.num) }

// Inputs are n's inputs; nil entries are optional inputs left out. The slice
// is n's own: change inputs with SetInput.
func (n *Node) Inputs() []*Value { return n.inputs }

// Input returns input i, or nil when it is absent or i is past the end.
func (n *Node) Input(i int) *Value {
	if i < 0 || i >= len(n.inputs) {
		return nil
	}
	return n.inputs[i]
}

// Outputs are n's outputs. An output left out has an empty name.
func (n *Node) Outputs() []*Value { return n.outputs }

// Output returns output i.
func (n *Node) Output(i int) *Value { return n.outputs[i] }

// Doc is the node's doc_string.
func (n *Node) Doc() string { return n.shell.GetDocString() }

// Attr returns the attribute with the given name, or nil.
func (n *Node) Attr(name string) *Attr {
	for _, a := range n.Attrs {
		if a.Name() == name {
			return a
		}
	}
	return nil
}

// AttrInt returns an int attribute, or def when it is not set.
func (n *Node) AttrInt(name string, def int64) int64 {
	if a := n.Attr(name); a != nil {
		return a.Int()
	}
	return def
}

// AttrFloat returns a float attribute, or def when it is not set.
func (n *Node) AttrFloat(name string, def float32) float32 {
	if a := n.Attr(name); a != nil {
		return a.Float()
	}
	return def
}

// AttrString returns a string attribute, or def when it is not set.
func (n *Node) AttrString(name, def string) string {
	if a := n.Attr(name); a != nil {
		return a.String()
	}
	return def
}

// AttrInts returns an ints attribute, or nil when it is not set.
func (n *Node) AttrInts(name string) []int64 {
	if a := n.Attr(name); a != nil {
		return a.Ints()
	}
	return nil
}

// SetAttr adds a or replaces the attribute of the same name.
func (n *Node) SetAttr(a *Attr) {
	if a.Graph != nil {
		a.Graph.owner = n
	}
	for _, g := range a.Graphs {
		g.owner = n
	}
	for i, b := range n.Attrs {
		if b.Name() == a.Name() {
			n.Attrs[i] = a
			return
		}
	}
	n.Attrs = append(n.Attrs, a)
}

// Subgraphs lists the graphs held by n's attributes.
func (n *Node) Subgraphs() []*Graph {
	var gs []*Graph
	for _, a := range n.Attrs {
		if a.Graph != nil {
			gs = append(gs, a.Graph)
		}
		gs = append(gs, a.Graphs...)
	}
	return gs
}

func (n *Node) String() string {
	name := n.Name
	if name == "" && len(n.outputs) > 0 {
		name = n.outputs[0].Name
	}
	op := n.OpType
	if n.Domain != "" && n.Domain != "ai.onnx" {
		op = n.Domain + "." + op
	}
	return fmt.Sprintf("%s(%s)", op, name)
}

// SetInput makes input i of n read v (nil leaves it out), keeping the
// use lists right. Inputs past the end are added.
func (n *Node) SetInput(i int, v *Value) {
	for len(n.inputs) <= i {
		n.inputs = append(n.inputs, nil)
	}
	if old := n.inputs[i]; old != nil {
		old.removeUse(n, i)
	}
	n.inputs[i] = v
	if v != nil {
		v.uses = append(v.uses, Use{n, i})
	}
}

// SetInputs replaces all inputs of n.
func (n *Node) SetInputs(vs ...*Value) {
	for i, old := range n.inputs {
		if old != nil {
			old.removeUse(n, i)
		}
	}
	n.inputs = nil
	for i, v := range vs {
		n.SetInput(i, v)
	}
}

func (v *Value) removeUse(n *Node, i int) {
	for k, u := range v.uses {
		if u.Node == n && u.Index == i {
			v.uses = slices.Delete(v.uses, k, k+1)
			return
		}
	}
}

// ReplaceAllUsesWith makes every reader of v read w instead, including
// nodes in subgraphs and subgraph outputs. If v is an output of its graph,
// w takes its place there and, when w is a node output of the same graph
// that is not already a graph output, w takes v's name (v is renamed) so
// that the model's interface does not change. When w cannot take the name
// (an input or an initializer), the output is renamed; a rewrite that must
// keep the interface puts an Identity in between.
func (v *Value) ReplaceAllUsesWith(w *Value) {
	if v == w {
		return
	}
	for _, u := range slices.Clone(v.uses) {
		u.Node.SetInput(u.Index, w)
	}
	g := v.graph
	if g == nil {
		return
	}
	for _, n := range g.nodes {
		for _, sg := range n.Subgraphs() {
			sg.replaceOutputs(v, w)
		}
	}
	for i, o := range g.Outputs {
		if o != v {
			continue
		}
		g.Outputs[i] = w
		if w.producer != nil && w.graph == g && !slices.Contains(g.Outputs[:i], w) {
			name := v.Name
			g.rename(v, g.model.freshName(name+"_replaced"))
			g.rename(w, name)
			if w.Type == nil {
				w.Type = v.Type
			}
		}
	}
}

// ReplaceKeepingName is ReplaceAllUsesWith where w also takes v's name
// (v is renamed), so that the nodes reading v keep their inputs as they
// were, name for name: a rewrite that replaces a subgraph changes no node
// outside it. w must be a node output of v's graph without a place in the
// model's interface; otherwise it is ReplaceAllUsesWith.
func (v *Value) ReplaceKeepingName(w *Value) {
	g := v.graph
	if v == w || g == nil || w.graph != g || w.producer == nil || w.IsGraphOutput() || v.IsGraphInput() || v.Const != nil {
		v.ReplaceAllUsesWith(w)
		return
	}
	output := v.IsGraphOutput()
	v.ReplaceAllUsesWith(w)
	if output {
		return // renamed already
	}
	name := v.Name
	g.rename(v, g.model.freshName(name+"_replaced"))
	g.rename(w, name)
}

func (g *Graph) replaceOutputs(v, w *Value) {
	for i, o := range g.Outputs {
		if o == v {
			g.Outputs[i] = w
		}
	}
	for _, n := range g.nodes {
		for _, sg := range n.Subgraphs() {
			sg.replaceOutputs(v, w)
		}
	}
}

// Nodes returns the nodes in their current order. The slice is a copy, so
// the graph may be edited while iterating over it.
func (g *Graph) Nodes() []*Node { return slices.Clone(g.nodes) }

// All iterates over the live node list, so that a pass may edit the graph
// while it walks: nodes inserted after the current one are visited, nodes
// inserted before it are not, and removing the current node is safe.
func (g *Graph) All() iter.Seq[*Node] {
	return func(yield func(*Node) bool) {
		for i := 0; i < len(g.nodes); i++ {
			n := g.nodes[i]
			if !yield(n) {
				return
			}
			if i < len(g.nodes) && g.nodes[i] == n {
				continue
			}
			if j := slices.Index(g.nodes, n); j >= 0 {
				i = j // nodes were inserted before n
			} else {
				i-- // n was removed: its successor now stands at i
			}
		}
	}
}

// Len is the number of nodes (not counting subgraphs).
func (g *Graph) Len() int { return len(g.nodes) }

// Parent is the enclosing graph of an attribute subgraph, or nil.
func (g *Graph) Parent() *Graph { return g.parent }

// Owner is the node whose attribute holds g, or nil.
func (g *Graph) Owner() *Node { return g.owner }

// Model is the model that g belongs to.
func (g *Graph) Model() *Model { return g.model }

// Doc is the graph's doc_string.
func (g *Graph) Doc() string { return g.shell.GetDocString() }

// Lookup finds the value a name refers to in g, then in its enclosing
// graphs; nil when there is none.
func (g *Graph) Lookup(name string) *Value {
	for s := g; s != nil; s = s.parent {
		if v, ok := s.scope[name]; ok {
			return v
		}
	}
	return nil
}

// walkNodes calls f for every node of g and of its subgraphs, depth first,
// in order.
func (g *Graph) walkNodes(f func(*Node)) {
	for _, n := range g.nodes {
		f(n)
		for _, sg := range n.Subgraphs() {
			sg.walkNodes(f)
		}
	}
}

// Walk calls f for every node of g and, recursively, of the subgraphs held
// by its nodes' attributes.
func (g *Graph) Walk(f func(*Node)) { g.walkNodes(f) }

// NewValue makes a value defined nowhere yet, for use as a node output
// through AddNode; the name is made unique in the model.
func (g *Graph) newValue(name string) *Value {
	v := &Value{Name: g.model.freshName(name), graph: g}
	g.scope[v.Name] = v
	return v
}

// AddInitializer adds a constant to g under a unique name derived from t's
// name and returns its value. The tensor is renamed to match.
func (g *Graph) AddInitializer(t *Tensor) *Value {
	v := g.newValue(t.Name())
	t.SetName(v.Name)
	v.Const = t
	v.Type = TensorType(t.DataType(), Dims(t.Dims()...))
	g.Initializers = append(g.Initializers, v)
	return v
}

// NewNode makes a node with n outputs named after name; it is not in any
// graph until inserted with Append, InsertBefore or InsertAfter.
func (g *Graph) NewNode(opType, domain string, inputs []*Value, numOutputs int, attrs ...*Attr) *Node {
	name := g.model.freshName(opType)
	n := &Node{Name: name, OpType: opType, Domain: domain, Attrs: attrs, graph: g, shell: &onnxpb.NodeProto{}}
	for i := 0; i < numOutputs; i++ {
		out := g.newValue(fmt.Sprintf("%s_out%d", name, i))
		out.producer, out.index = n, int32(i)
		n.outputs = append(n.outputs, out)
	}
	for i, v := range inputs {
		n.SetInput(i, v)
	}
	for _, sg := range n.Subgraphs() {
		sg.owner = n
	}
	return n
}

// Append adds n at the end of g.
func (g *Graph) Append(n *Node) { g.insertAt(len(g.nodes), n) }

// InsertBefore adds n just before ref.
func (g *Graph) InsertBefore(ref, n *Node) { g.insertAt(g.mustIndex(ref), n) }

// InsertAfter adds n just after ref.
func (g *Graph) InsertAfter(ref, n *Node) { g.insertAt(g.mustIndex(ref)+1, n) }

func (g *Graph) insertAt(i int, n *Node) {
	if n.graph != g {
		panic("graph: node " + n.String() + " was made for another graph")
	}
	g.nodes = slices.Insert(g.nodes, i, n)
}

func (g *Graph) mustIndex(n *Node) int {
	i := slices.Index(g.nodes, n)
	if i < 0 {
		panic("graph: node " + n.String() + " is not in graph " + g.Name)
	}
	return i
}

// Remove deletes n from g. Its outputs must be unused (no readers and not
// graph outputs); its inputs stop counting it as a reader.
func (g *Graph) Remove(n *Node) error {
	for _, o := range n.outputs {
		if len(o.uses) > 0 || o.IsGraphOutput() {
			return fmt.Errorf("graph: cannot remove %v: output %q is still used", n, o.Name)
		}
	}
	i := g.mustIndex(n)
	g.nodes = slices.Delete(g.nodes, i, i+1)
	for k, in := range n.inputs {
		if in != nil {
			in.removeUse(n, k)
		}
	}
	for _, sg := range n.Subgraphs() {
		sg.walkNodes(func(m *Node) {
			for k, in := range m.inputs {
				if in != nil {
					in.removeUse(m, k)
				}
			}
		})
	}
	for _, o := range n.outputs {
		if o.Name != "" {
			delete(g.scope, o.Name)
		}
	}
	return nil
}

// outerReads lists the values defined outside g (and outside its nested
// subgraphs) that g's nodes or outputs read.
func (g *Graph) outerReads() []*Value {
	var out []*Value
	inside := func(v *Value) bool {
		for s := v.graph; s != nil; s = s.parent {
			if s == g {
				return true
			}
		}
		return false
	}
	add := func(v *Value) {
		if v != nil && !inside(v) && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	g.walkNodes(func(n *Node) {
		for _, in := range n.inputs {
			add(in)
		}
	})
	for _, o := range g.Outputs {
		add(o)
	}
	return out
}

// rename gives v a new name in its graph's scope.
func (g *Graph) rename(v *Value, name string) {
	if v.Name != "" && g.scope[v.Name] == v {
		delete(g.scope, v.Name)
	}
	v.Name = name
	g.scope[name] = v
	if g.model.names.used != nil {
		g.model.names.add(name)
	}
}

// TopoSort orders g's nodes so that every node comes after the producers
// of its inputs (reads from inside its subgraphs count). Among ready nodes
// the current order is kept, so a sorted graph is unchanged. It returns an
// error naming a node on a cycle, and then leaves the order as it was.
func (g *Graph) TopoSort() error {
	order, err := g.topoOrder()
	if err != nil {
		return err
	}
	g.nodes = order
	return nil
}

// SetOrder puts g's nodes in the order given, which must list each of g's
// nodes once and be topological (every node after the producers of its
// inputs, reads from inside its subgraphs included). Otherwise it returns
// an error and leaves the order as it was.
func (g *Graph) SetOrder(nodes []*Node) error {
	if len(nodes) != len(g.nodes) {
		return fmt.Errorf("graph %q: %d nodes to order, the graph has %d", g.Name, len(nodes), len(g.nodes))
	}
	in := make(map[*Node]bool, len(g.nodes))
	for _, n := range g.nodes {
		in[n] = true
	}
	for _, n := range nodes {
		if !in[n] {
			return fmt.Errorf("graph %q: node %v is not in the graph or is listed twice", g.Name, n)
		}
		delete(in, n)
	}
	old := g.nodes
	g.nodes = slices.Clone(nodes)
	order, err := g.topoOrder()
	if err == nil && !slices.Equal(order, g.nodes) {
		for i := range order {
			if order[i] != g.nodes[i] {
				err = fmt.Errorf("graph %q: the order is not topological: %v comes before what it reads", g.Name, g.nodes[i])
				break
			}
		}
	}
	if err != nil {
		g.nodes = old
		return err
	}
	return nil
}

// CheckAcyclic reports a cycle among g's nodes (and its subgraphs') without
// reordering.
func (g *Graph) CheckAcyclic() error {
	if _, err := g.topoOrder(); err != nil {
		return err
	}
	for _, n := range g.nodes {
		for _, sg := range n.Subgraphs() {
			if err := sg.CheckAcyclic(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *Graph) topoOrder() ([]*Node, error) {
	// Node.pos holds each node's index in g.nodes for the duration of the
	// sort (a field, not a map: graphs have 100k nodes).
	for i, n := range g.nodes {
		n.pos = int32(i)
	}
	inGraph := func(p *Node) bool {
		return p != nil && p.graph == g && int(p.pos) < len(g.nodes) && g.nodes[p.pos] == p
	}
	var ds []*Node
	deps := func(n *Node) []*Node {
		ds = ds[:0]
		for _, in := range n.inputs {
			if in != nil && inGraph(in.producer) {
				ds = append(ds, in.producer)
			}
		}
		for _, sg := range n.Subgraphs() {
			for _, v := range sg.outerReads() {
				if inGraph(v.producer) {
					ds = append(ds, v.producer)
				}
			}
		}
		return ds
	}
	// The successors of node d are succ[start[d]:start[d+1]], in the
	// order of the nodes reading d: counted in one pass, laid out in one
	// array in a second (a list per node was an allocation per node of a
	// 100k-node graph). The second pass reads the inputs again; the deps
	// of nodes holding subgraphs (which walk the subgraph) are kept.
	indeg := make([]int, len(g.nodes))
	start := make([]int, len(g.nodes)+1)
	var held map[int][]*Node
	for i, n := range g.nodes {
		ds := deps(n)
		for _, d := range ds {
			if d == n {
				return nil, fmt.Errorf("graph %q: node %v reads its own output: cycle", g.Name, n)
			}
			indeg[i]++
			start[d.pos+1]++
		}
		if len(n.Subgraphs()) > 0 {
			if held == nil {
				held = map[int][]*Node{}
			}
			held[i] = slices.Clone(ds)
		}
	}
	for i := range g.nodes {
		start[i+1] += start[i]
	}
	succ := make([]int, start[len(g.nodes)])
	next := slices.Clone(start[:len(g.nodes)])
	for i, n := range g.nodes {
		ds, ok := held[i]
		if !ok {
			ds = deps(n)
		}
		for _, d := range ds {
			succ[next[d.pos]] = i
			next[d.pos]++
		}
	}
	// Kahn's algorithm with a min-heap on the original position keeps
	// the loaded order wherever it is already valid.
	h := &intHeap{}
	for i := range g.nodes {
		if indeg[i] == 0 {
			h.push(i)
		}
	}
	order := make([]*Node, 0, len(g.nodes))
	for h.len() > 0 {
		i := h.pop()
		order = append(order, g.nodes[i])
		for _, s := range succ[start[i]:start[i+1]] {
			indeg[s]--
			if indeg[s] == 0 {
				h.push(s)
			}
		}
	}
	if len(order) != len(g.nodes) {
		for i, d := range indeg {
			if d > 0 {
				return nil, fmt.Errorf("graph %q: node %v is on a cycle", g.Name, g.nodes[i])
			}
		}
	}
	return order, nil
}

// EliminateDeadCode removes nodes none of whose outputs are read or are
// graph outputs, repeatedly, and initializers nothing reads (unless they
// are also graph inputs). Subgraphs are cleaned too. It returns the number
// of nodes removed.
func (g *Graph) EliminateDeadCode() int {
	removed := 0
	for _, n := range g.nodes {
		for _, sg := range n.Subgraphs() {
			removed += sg.EliminateDeadCode()
		}
	}
	// Walking backwards removes a chain in one sweep when the list is
	// sorted; repeat until nothing changes for unsorted lists.
	for changed := true; changed; {
		changed = false
		for i := len(g.nodes) - 1; i >= 0; i-- {
			n := g.nodes[i]
			live := false
			for _, o := range n.outputs {
				if len(o.uses) > 0 || o.IsGraphOutput() {
					live = true
					break
				}
			}
			if !live && g.Remove(n) == nil {
				removed++
				changed = true
			}
		}
	}
	g.Initializers = slices.DeleteFunc(g.Initializers, func(v *Value) bool {
		dead := len(v.uses) == 0 && !v.IsGraphOutput() && !v.IsGraphInput()
		if dead {
			delete(g.scope, v.Name)
		}
		return dead
	})
	return removed
}

type intHeap struct{ a []int }

func (h *intHeap) len() int { return len(h.a) }
func (h *intHeap) push(x int) {
	h.a = append(h.a, x)
	for i := len(h.a) - 1; i > 0; {
		p := (i - 1) / 2
		if h.a[p] <= h.a[i] {
			break
		}
		h.a[p], h.a[i] = h.a[i], h.a[p]
		i = p
	}
}
func (h *intHeap) pop() int {
	top := h.a[0]
	last := len(h.a) - 1
	h.a[0] = h.a[last]
	h.a = h.a[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.a) && h.a[l] < h.a[m] {
			m = l
		}
		if r < len(h.a) && h.a[r] < h.a[m] {
			m = r
		}
		if m == i {
			break
		}
		h.a[m], h.a[i] = h.a[i], h.a[m]
		i = m
	}
	return top
}
