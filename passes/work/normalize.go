package work

import (
	"errors"
	"fmt"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
)

// Work is the normalised working copy of a model that detectors read: a
// copy (the caller's model is never changed) with model-local functions
// inlined, Identity nodes removed, constants folded (Constant nodes,
// anything computed from constants only, and shape arithmetic whose value
// the symbolic shapes decide), every graph sorted, and a shape inferred
// for every value. Every node of the copy maps back to a node of the
// original (a node inlined from a function maps to the calling node), so
// findings name original nodes.
type Work struct {
	// Orig is the caller's model; M is the working copy.
	Orig, M *graph.Model

	origNode   byNum[*graph.Node, *graph.Node]
	OrigValues byValue[*graph.Value]
	opset      map[*graph.Node]int64 // nodes inlined from a function importing another version
	shapes     byValue[Shape]
	etypes     byValue[graph.DataType]
	pv         map[*graph.Value][]Dim
	consts     map[*graph.Value]*kernels.Tensor
	ConstErr   map[*graph.Value]error
	sums       map[string]Dim
	Exprs      map[Dim]symExpr
	Syms       symbols
	pos        byNum[*graph.Node, int]
	folded     int
	inlined    int
	// powBase records, for constants folded from Pow(b, exponents) with a
	// scalar b (the base of frequencies b^(-2i/d)), the base b.
	PowBase   map[*graph.Value]float64
	Folds     map[*graph.Value][]*graph.Value // value of a folded node -> its initializer
	oorder    map[*graph.Node]int
	nameOrder map[string]int
	ByOrig    map[string]*graph.Value // workValue
	ByName    map[string]*graph.Value // main-graph values by original name (extract.go)

	Roles  *roles         // input roles and activation flags (roles.go)
	Sizes  *sizes         // what the symbols of the inputs' shapes count (sizes.go)
	Detect []*graph.Graph // detectGraphs of the main graph, once
	weight map[*graph.Value]bool

	// foldedFrom maps an initializer made by folding to the node it
	// replaced (removed from the graph, its inputs the initializers of its
	// folded inputs): the structure of what the copy computed once.
	foldedFrom map[*graph.Value]*graph.Node
}

// Normalize makes the working copy every detector reads.
var Normalize = &passes.Pass[*Work]{
	Name: "normalize",
	Doc: `Copy the model and normalise exporter noise on the copy.

Model-local functions are inlined (attribute references substituted),
Identity nodes dropped, Constant nodes and everything computed from
constants only folded into initializers (with the kernels; bounded
sizes; external tensors are not read), shapes inferred with symbolic
dimensions so that Shape->Gather->Unsqueeze->Concat arithmetic folds to
numbers, graphs sorted and dead nodes removed. Every copied node maps
back to the original node it came from.`,
	Run: func(c *passes.Context) (*Work, error) { return NewWork(c.Model) },
}

// ErrModel marks errors caused by the model (a cycle, a function calling
// an undefined value), as opposed to defects of onnxpe.
var ErrModel = errors.New("the model cannot be analysed")

// NewWork makes the normalised working copy of m.
func NewWork(m *graph.Model) (*Work, error) {
	w, err := newWork(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrModel, err)
	}
	return w, nil
}

func newWork(m *graph.Model) (*Work, error) {
	c := m.Clone()
	// The facts over every node and value are kept in slices by the
	// numbers Clone gave them (bynum.go): maps, even made at their final
	// size, cost several times as much.
	w := &Work{Orig: m, M: c,
		origNode: newByNode[*graph.Node](c), OrigValues: newByValue[*graph.Value](c).walkable(),
		opset: map[*graph.Node]int64{}, shapes: newByValue[Shape](c), etypes: newByValue[graph.DataType](c),
		pv: map[*graph.Value][]Dim{}, consts: map[*graph.Value]*kernels.Tensor{}, ConstErr: map[*graph.Value]error{},
		sums: map[string]Dim{}, Exprs: map[Dim]symExpr{}, PowBase: map[*graph.Value]float64{}, weight: map[*graph.Value]bool{}, Folds: map[*graph.Value][]*graph.Value{}, pos: newByNode[int](c),
		foldedFrom: map[*graph.Value]*graph.Node{}}
	w.pair(m.Graph, c.Graph)
	for i, f := range m.Functions {
		w.pair(f.Body, c.Functions[i].Body)
	}
	if err := w.inlineFunctions(); err != nil {
		return nil, err
	}
	w.dropIdentities(c.Graph)
	w.renameOps(c.Graph)
	if err := sortAll(c.Graph); err != nil {
		return nil, err
	}
	w.fold(c.Graph)
	w.canonicalise(c.Graph)
	c.Graph.EliminateDeadCode()
	n := 0
	w.number(c.Graph, &n)
	w.Roles = w.findRoles()
	return w, nil
}

// pair maps the nodes and values of copy b to those of original a (same
// bytes, so the same order).
func (w *Work) pair(a, b *graph.Graph) {
	for i, v := range a.Inputs {
		w.OrigValues.set(b.Inputs[i], v)
	}
	for i, v := range a.Initializers {
		w.OrigValues.set(b.Initializers[i], v)
	}
	an, bn := a.Nodes(), b.Nodes()
	for i, n := range an {
		w.origNode.set(bn[i], n)
		for j, o := range n.Outputs() {
			w.OrigValues.set(bn[i].Output(j), o)
		}
		as, bs := n.Subgraphs(), bn[i].Subgraphs()
		for k := range as {
			w.pair(as[k], bs[k])
		}
	}
}

// OrigNode is the original node a node of the copy comes from (nil for nodes
// normalisation made without an origin).
func (w *Work) OrigNode(n *graph.Node) *graph.Node { return w.origNode.Of(n) }

// OrigName is the name of the original node n comes from; a nameless
// original node is named by its first output.
func (w *Work) OrigName(n *graph.Node) string {
	o := w.origNode.Of(n)
	if o == nil {
		return ""
	}
	if o.Name != "" {
		return o.Name
	}
	if len(o.Outputs()) > 0 {
		return o.Output(0).Name
	}
	return ""
}

// OrigValue is the name of the original value v stands for ("" when v was
// made by normalisation, such as a value inside an inlined function).
func (w *Work) OrigValue(v *graph.Value) string {
	if o := w.OrigValues.Of(v); o != nil {
		return o.Name
	}
	return ""
}

// Opset is the version of n's domain that applies to n.
func (w *Work) Opset(n *graph.Node) int64 {
	if v, ok := w.opset[n]; ok {
		return v
	}
	if v := w.M.OpsetVersion(n.Domain); v != 0 {
		return v
	}
	if n.Domain == "" || n.Domain == "ai.onnx" {
		return 23
	}
	return 1
}

// Pos is n's place in the model's topological order (subgraph nodes come
// right after the node that holds them).
func (w *Work) Pos(n *graph.Node) int { return w.pos.Of(n) }

func (w *Work) number(g *graph.Graph, k *int) {
	for n := range g.All() {
		w.pos.set(n, *k)
		*k++
		for _, sg := range n.Subgraphs() {
			w.number(sg, k)
		}
	}
}

func sortAll(g *graph.Graph) error {
	if err := g.TopoSort(); err != nil {
		return err
	}
	for n := range g.All() {
		for _, sg := range n.Subgraphs() {
			if err := sortAll(sg); err != nil {
				return err
			}
		}
	}
	return nil
}

// graphs lists g and every subgraph inside it.
func graphs(g *graph.Graph) []*graph.Graph {
	out := []*graph.Graph{g}
	for n := range g.All() {
		for _, sg := range n.Subgraphs() {
			out = append(out, graphs(sg)...)
		}
	}
	return out
}

// inlineFunctions replaces every call of a model-local function by the
// function's body, repeatedly (functions call functions).
func (w *Work) inlineFunctions() error {
	for round := 0; round < 64; round++ {
		changed := false
		for _, g := range graphs(w.M.Graph) {
			for _, n := range g.Nodes() {
				f := w.M.Function(n.Domain, n.OpType, n.Overload)
				if f == nil || !inlinable(f) {
					continue
				}
				if err := w.inlineCall(g, n, f); err != nil {
					return err
				}
				changed = true
			}
		}
		if !changed {
			return nil
		}
	}
	return fmt.Errorf("model-local functions nest more than 64 deep (recursion?)")
}

func inlinable(f *graph.Function) bool {
	ok := true
	f.Body.Walk(func(n *graph.Node) {
		for _, a := range n.Attrs {
			if len(a.Graphs) > 0 {
				ok = false
			}
		}
	})
	return ok
}

func (w *Work) inlineCall(g *graph.Graph, call *graph.Node, f *graph.Function) error {
	if err := f.Body.TopoSort(); err != nil {
		return fmt.Errorf("function %s: %w", f.Name, err)
	}
	vmap := map[*graph.Value]*graph.Value{}
	for i, bi := range f.Body.Inputs {
		vmap[bi] = call.Input(i)
	}
	refs := map[string]*graph.Attr{}
	for _, a := range f.AttrDefaults {
		refs[a.Name()] = a
	}
	for _, a := range call.Attrs {
		refs[a.Name()] = a
	}
	fops := map[string]int64{}
	for _, o := range f.Opsets() {
		d := o.Domain
		if d == "ai.onnx" {
			d = ""
		}
		fops[d] = o.Version
	}
	cl := &cloner{w: w, vmap: vmap, refs: refs, origin: w.origNode.Of(call), opsets: fops, closed: true}
	for _, bn := range f.Body.Nodes() {
		nn, err := cl.node(g, bn)
		if err != nil {
			return fmt.Errorf("function %s: %w", f.Name, err)
		}
		g.InsertBefore(call, nn)
	}
	for i, o := range call.Outputs() {
		if o.Name == "" || i >= len(f.Body.Outputs) {
			continue
		}
		r := vmap[f.Body.Outputs[i]]
		if r == nil {
			return fmt.Errorf("function %s: output %d is not computed", f.Name, i)
		}
		o.ReplaceAllUsesWith(r)
		if w.OrigValues.Of(r) == nil {
			w.OrigValues.set(r, w.OrigValues.Of(o))
		}
	}
	if err := g.Remove(call); err != nil {
		return fmt.Errorf("inline %v: %w", call, err)
	}
	w.inlined++
	return nil
}

// cloner copies nodes (with their subgraphs) into another graph, mapping
// the values they read and substituting attribute references.
type cloner struct {
	w      *Work
	vmap   map[*graph.Value]*graph.Value
	refs   map[string]*graph.Attr
	origin *graph.Node
	opsets map[string]int64
	// closed: every value read must be in vmap (a function body); else
	// unmapped values are read as they are (outer values of a branch).
	closed bool
}

func (c *cloner) value(x *graph.Value) (*graph.Value, error) {
	if x == nil {
		return nil, nil
	}
	if m, ok := c.vmap[x]; ok {
		return m, nil
	}
	if c.closed {
		return nil, fmt.Errorf("%q is read but defined nowhere", x.Name)
	}
	return x, nil
}

// node makes a copy of n for graph g (not inserted).
func (c *cloner) node(g *graph.Graph, n *graph.Node) (*graph.Node, error) {
	ins := make([]*graph.Value, len(n.Inputs()))
	for i, x := range n.Inputs() {
		m, err := c.value(x)
		if err != nil {
			return nil, fmt.Errorf("node %v: %w", n, err)
		}
		ins[i] = m
	}
	var attrs []*graph.Attr
	for _, a := range n.Attrs {
		switch {
		case a.RefAttrName() != "":
			if ca := c.refs[a.RefAttrName()]; ca != nil {
				attrs = append(attrs, ca.Renamed(a.Name()))
			}
		case a.Graph != nil:
			sg, err := c.graph(g, a.Graph)
			if err != nil {
				return nil, err
			}
			attrs = append(attrs, graph.GraphAttr(a.Name(), sg))
		case len(a.Graphs) > 0:
			return nil, fmt.Errorf("node %v: an attribute holding a list of graphs cannot be copied out of a function body", n)
		default:
			attrs = append(attrs, a)
		}
	}
	nn := g.NewNode(n.OpType, n.Domain, ins, len(n.Outputs()), attrs...)
	nn.Overload = n.Overload
	for j, o := range n.Outputs() {
		c.vmap[o] = nn.Output(j)
		if o.Type != nil {
			nn.Output(j).Type = o.Type
		}
		if ov := c.w.OrigValues.Of(o); ov != nil && c.w.OrigValues.Of(nn.Output(j)) == nil {
			c.w.OrigValues.set(nn.Output(j), ov)
		}
	}
	origin := c.origin
	if origin == nil {
		origin = c.w.origNode.Of(n)
	}
	if origin != nil {
		c.w.origNode.set(nn, origin)
	}
	d := n.Domain
	if d == "ai.onnx" {
		d = ""
	}
	if v, ok := c.opsets[d]; ok {
		c.w.opset[nn] = v
	} else if v, ok := c.w.opset[n]; ok {
		c.w.opset[nn] = v
	}
	return nn, nil
}

// graph copies subgraph sg as a subgraph of parent.
func (c *cloner) graph(parent *graph.Graph, sg *graph.Graph) (*graph.Graph, error) {
	ng := parent.NewSubgraph(sg.Name)
	for _, in := range sg.Inputs {
		c.vmap[in] = ng.AddInput(in.Name, in.Type.Clone())
	}
	for _, v := range sg.Initializers {
		if !v.IsGraphInput() {
			c.vmap[v] = ng.AddInitializer(v.Const.Clone())
		}
	}
	closed := c.closed
	c.closed = false // a subgraph reads the values around it
	defer func() { c.closed = closed }()
	for _, n := range sg.Nodes() {
		nn, err := c.node(ng, n)
		if err != nil {
			return nil, err
		}
		ng.Append(nn)
	}
	for _, o := range sg.Outputs {
		m, err := c.value(o)
		if err != nil {
			return nil, err
		}
		ng.AddOutput(m)
	}
	return ng, nil
}

// dropIdentities bypasses Identity nodes (and inference Dropouts) whose
// output is not a graph output.
func (w *Work) dropIdentities(g0 *graph.Graph) {
	for _, g := range graphs(g0) {
		for _, n := range g.Nodes() {
			if !IsONNX(n) {
				continue
			}
			switch n.OpType {
			case "Identity":
			case "Dropout":
				if len(n.Outputs()) > 1 && n.Output(1).Name != "" && n.Output(1).NumUses() > 0 {
					continue
				}
				if t := n.Input(2); t != nil {
					continue
				}
			default:
				continue
			}
			o := n.Output(0)
			if o.IsGraphOutput() || n.Input(0) == nil {
				continue
			}
			o.ReplaceAllUsesWith(n.Input(0))
			_ = g.Remove(n)
		}
	}
}

func IsONNX(n *graph.Node) bool { return n.Domain == "" || n.Domain == "ai.onnx" }

// Fold limits: inputs of at most foldMaxIn elements each, outputs of at
// most foldMaxBytes.
const (
	foldMaxIn    = 1 << 20
	foldMaxBytes = 1 << 24
)

var notFoldable = map[string]bool{
	"RandomNormal": true, "RandomUniform": true, "RandomNormalLike": true, "RandomUniformLike": true,
	"Bernoulli": true, "Multinomial": true,
	// Fused position ops stay ops (their attributes are what the fused
	// detectors read), also when their inputs are constants.
	"RelativePositionBias": true, "GatedRelativePositionBias": true, "ALiBiBias": true, "RotaryEmbedding": true,
}

// fold infers shapes in topological order and replaces every node whose
// value is known (constant inputs, or a fully known partial value) by an
// initializer.
func (w *Work) fold(g *graph.Graph) { w.foldNodes(g, g.Nodes()) }

func (w *Work) foldNodes(g *graph.Graph, nodes []*graph.Node) {
	for _, n := range nodes {
		if n.OpType == "If" && IsONNX(n) {
			if nodes, ok := w.takeBranch(g, n); ok {
				w.foldNodes(g, nodes)
				continue
			}
		}
		w.etype(n)
		w.infer(n)
		if len(n.Subgraphs()) > 0 {
			for _, sg := range n.Subgraphs() {
				w.fold(sg)
			}
			w.inferControl(n)
			continue
		}
		if w.tryFold(g, n) {
			w.folded++
		}
	}
}

// takeBranch replaces an If whose condition is a constant, or known from
// the sizes (q_len != k_len of two sizes that are one symbol), by a copy of
// the branch it takes, and returns the copied nodes.
func (w *Work) takeBranch(g *graph.Graph, n *graph.Node) ([]*graph.Node, bool) {
	var cond float64
	if t := w.Const(n.Input(0)); t != nil && t.Len() == 1 {
		cond = t.Float64s()[0]
	} else if p, ok := w.PartialInts(n.Input(0)); ok && len(p) == 1 {
		cond = float64(p[0])
	} else {
		return nil, false
	}
	name := "else_branch"
	if cond != 0 {
		name = "then_branch"
	}
	a := n.Attr(name)
	if a == nil || a.Graph == nil || len(a.Graph.Inputs) > 0 {
		return nil, false
	}
	cl := &cloner{w: w, vmap: map[*graph.Value]*graph.Value{}, origin: w.origNode.Of(n)}
	var copied []*graph.Node
	for _, bn := range a.Graph.Nodes() {
		nn, err := cl.node(g, bn)
		if err != nil {
			return nil, false
		}
		g.InsertBefore(n, nn)
		copied = append(copied, nn)
	}
	for i, o := range n.Outputs() {
		if i >= len(a.Graph.Outputs) {
			return nil, false
		}
		r, _ := cl.value(a.Graph.Outputs[i])
		o.ReplaceAllUsesWith(r)
	}
	if err := g.Remove(n); err != nil {
		return nil, false
	}
	return copied, true
}

// inferControl sets the output shapes of If and Loop from their bodies.
func (w *Work) inferControl(n *graph.Node) {
	switch n.OpType {
	case "If":
		sgs := n.Subgraphs()
		if len(sgs) == 0 {
			return
		}
		for i, o := range n.Outputs() {
			if i < len(sgs[0].Outputs) {
				s := w.Shape(sgs[0].Outputs[i])
				if len(sgs) > 1 && i < len(sgs[1].Outputs) {
					t := w.Shape(sgs[1].Outputs[i])
					if s.Ranked && t.Ranked && len(s.Dims) == len(t.Dims) {
						d := make([]Dim, len(s.Dims))
						for j := range d {
							if s.Dims[j] == t.Dims[j] {
								d[j] = s.Dims[j]
							} else {
								d[j] = w.Syms.fresh()
							}
						}
						s = ranked(d...)
					} else {
						s = Shape{}
					}
				}
				w.shapes.set(o, s)
			}
		}
	case "Loop":
		body := n.Subgraphs()[0]
		nCarried := len(n.Inputs()) - 2
		for i, o := range n.Outputs() {
			bi := i + 1
			if bi >= len(body.Outputs) {
				continue
			}
			s := w.Shape(body.Outputs[bi])
			if i >= nCarried && s.Ranked {
				s = ranked(append([]Dim{w.Syms.fresh()}, s.Dims...)...)
			}
			w.shapes.set(o, s)
		}
	}
}

func (w *Work) tryFold(g *graph.Graph, n *graph.Node) bool {
	if notFoldable[n.OpType] || len(n.Outputs()) == 0 {
		return false
	}
	if n.OpType == "Constant" && IsONNX(n) {
		t, err := graph.ConstantNodeValue(n)
		if err != nil {
			return false
		}
		kt, err := kernels.FromGraph(t)
		if err != nil {
			return false
		}
		return w.replaceByConst(g, n, []*kernels.Tensor{kt})
	}
	// A fully known shape vector.
	if len(n.Outputs()) == 1 {
		o := n.Output(0)
		if p, ok := w.pv[o]; ok && IsONNX(n) {
			vals := make([]int64, len(p))
			known := true
			for i, d := range p {
				if d.IsSym() {
					known = false
					break
				}
				vals[i] = int64(d)
			}
			s := w.Shape(o)
			dt := w.ElemType(o)
			if known && s.AllKnown() && IsIntType(dt) {
				c, _ := product(s.Dims)
				if c == int64(len(vals)) {
					shape := make([]int, len(s.Dims))
					for i, d := range s.Dims {
						shape[i] = int(d)
					}
					t := kernels.FromSlice(shape, vals)
					if dt != graph.Int64 {
						t = CastInts(t, dt)
					}
					if t != nil {
						return w.replaceByConst(g, n, []*kernels.Tensor{t})
					}
				}
			}
		}
	}
	ins := make([]*kernels.Tensor, len(n.Inputs()))
	for i, v := range n.Inputs() {
		if v == nil {
			continue
		}
		if !w.IsConst(v) || (v.Const != nil && (v.Const.IsExternal() || v.Const.Len() > foldMaxIn)) {
			return false
		}
		t := w.Const(v)
		if t == nil || t.Len() > foldMaxIn {
			return false
		}
		ins[i] = t
	}
	outs, err := kernels.EvalNode(n, w.Opset(n), ins, kernels.Options{Threads: 1, MaxTensorBytes: foldMaxBytes})
	if err != nil {
		return false
	}
	base := 0.0
	for _, v := range n.Inputs() {
		if b, ok := w.PowBase[v]; ok {
			base = b
		}
	}
	if n.OpType == "Pow" && ins[0] != nil && ins[0].Len() == 1 && ins[1] != nil && ins[1].Len() > 1 {
		if b := ins[0].Float64s()[0]; b > 1 {
			base = b
		}
	}
	if !w.replaceByConst(g, n, outs) {
		return false
	}
	if base > 0 {
		for _, o := range n.Outputs() {
			for _, u := range w.Folds[o] {
				w.PowBase[u] = base
			}
		}
	}
	return true
}

func CastInts(t *kernels.Tensor, dt graph.DataType) *kernels.Tensor {
	v := t.Int64s()
	switch dt {
	case graph.Int32:
		o := make([]int32, len(v))
		for i, x := range v {
			o[i] = int32(x)
		}
		return kernels.FromSlice(t.Shape, o)
	case graph.Int8:
		o := make([]int8, len(v))
		for i, x := range v {
			o[i] = int8(x)
		}
		return kernels.FromSlice(t.Shape, o)
	case graph.Uint8:
		o := make([]uint8, len(v))
		for i, x := range v {
			o[i] = uint8(x)
		}
		return kernels.FromSlice(t.Shape, o)
	}
	return nil
}

// replaceByConst makes the outputs of n initializers holding outs and
// removes n. The initializer stands for the same original value.
func (w *Work) replaceByConst(g *graph.Graph, n *graph.Node, outs []*kernels.Tensor) bool {
	for i, o := range n.Outputs() {
		if o.Name == "" {
			continue
		}
		if i >= len(outs) || outs[i] == nil || outs[i].IsSequence() {
			return false
		}
	}
	for i, o := range n.Outputs() {
		if o.Name == "" || o.IsGraphOutput() {
			continue
		}
		gt, err := outs[i].ToGraph(w.M.NewName(o.Name + "_folded"))
		if err != nil {
			return false
		}
		nv := g.AddInitializer(gt)
		w.Folds[o] = append(w.Folds[o], nv)
		w.consts[nv] = outs[i]
		w.shapes.set(nv, w.Shape(nv))
		w.OrigValues.set(nv, w.OrigValues.Of(o))
		if n.OpType != "Constant" {
			w.foldedFrom[nv] = n
		}
		if p, ok := w.pv[o]; ok {
			w.pv[nv] = p
		}
		o.ReplaceAllUsesWith(nv)
	}
	for _, o := range n.Outputs() {
		if o.NumUses() > 0 || o.IsGraphOutput() {
			return true // kept for a graph output
		}
	}
	_ = g.Remove(n)
	return true
}

// etype infers the element types of n's outputs.
func (w *Work) etype(n *graph.Node) {
	outs := n.Outputs()
	if len(outs) == 0 {
		return
	}
	in0 := w.ElemType(n.Input(0))
	var t graph.DataType
	switch n.OpType {
	case "Cast":
		t = graph.DataType(n.AttrInt("to", 0))
	case "CastLike":
		t = w.ElemType(n.Input(1))
	case "Shape", "Size", "NonZero", "ArgMax", "ArgMin":
		t = graph.Int64
	case "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not", "IsNaN", "IsInf":
		t = graph.Bool
	case "Where":
		t = w.ElemType(n.Input(1))
	case "ConstantOfShape":
		t = graph.Float
		if a := n.Attr("value"); a != nil && a.Tensor != nil {
			t = a.Tensor.DataType()
		}
	case "Constant":
		if c, err := graph.ConstantNodeValue(n); err == nil {
			t = c.DataType()
		}
	case "If", "Loop", "Scan":
		// The outputs are the bodies' (after the condition for a Loop).
		for i, o := range outs {
			t := graph.Undefined
			if o.Type != nil {
				t = o.Type.ElemType()
			}
			if sgs := n.Subgraphs(); t == graph.Undefined && len(sgs) > 0 {
				bi := i
				if n.OpType == "Loop" {
					bi++
				}
				if bi < len(sgs[0].Outputs) {
					t = w.ElemType(sgs[0].Outputs[bi])
				}
			}
			w.etypes.set(o, t)
		}
		return
	default:
		t = in0
	}
	if t == graph.Undefined && outs[0].Type != nil {
		t = outs[0].Type.ElemType()
	}
	for i, o := range outs {
		if i == 0 || n.OpType == "Split" {
			w.etypes.set(o, t)
		} else if o.Type != nil {
			w.etypes.set(o, o.Type.ElemType())
		}
	}
}

// FoldedFrom is the node normalisation folded into the constant v (nil
// when v is not the result of folding): a node no longer in the graph,
// whose inputs are the constants it was computed from, themselves maybe
// folded. Detectors read it to see how a constant was computed (a table
// integrated by an unrolled solver, a projection of a relative embedding).
func (w *Work) FoldedFrom(v *graph.Value) *graph.Node { return w.foldedFrom[v] }
