package graph

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// declKey identifies one declaration of a value in one of a graph's lists.
type declKey struct {
	list byte // 'i' input, 'o' output, 'v' value_info
	v    *Value
}

// declOverride keeps a declaration that differs from the value's first one
// (the same value declared twice with different types or docs), so that it
// is written back as it was while the value is unchanged.
type declOverride struct {
	pb   *onnxpb.ValueInfoProto
	typ  *Type
	name string
}

// loader turns protobuf messages into the IR.
type loader struct {
	m    *Model
	dir  string
	opts LoadOptions
}

func fromProto(pm *onnxpb.ModelProto, dir string, opts LoadOptions) (*Model, error) {
	m := &Model{Dir: dir}
	l := &loader{m: m, dir: dir, opts: opts}
	pg, pfs := pm.Graph, pm.Functions
	pm.Graph, pm.Functions = nil, nil
	m.shell = pm
	g, err := l.graph(pg, nil)
	if err != nil {
		return nil, err
	}
	m.Graph = g
	for _, pf := range pfs {
		f, err := l.function(pf)
		if err != nil {
			return nil, err
		}
		m.Functions = append(m.Functions, f)
	}
	if err := m.Graph.CheckAcyclic(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	for _, f := range m.Functions {
		if err := f.Body.CheckAcyclic(); err != nil {
			return nil, fmt.Errorf("%w: function %s: %v", ErrInvalid, f.Name, err)
		}
	}
	if err := m.checkModel(); err != nil {
		return nil, err
	}
	if err := m.findRepairs(); err != nil {
		return nil, err
	}
	return m, nil
}

func (l *loader) invalid(g *Graph, format string, args ...any) error {
	where := "main graph"
	if g.parent != nil || g.Name != "" {
		where = fmt.Sprintf("graph %q", g.Name)
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalid, where, fmt.Sprintf(format, args...))
}

func (l *loader) newGraph(name string, parent *Graph, shell *onnxpb.GraphProto) *Graph {
	size := len(shell.Input) + len(shell.Initializer)
	for _, n := range shell.Node {
		size += len(n.Output)
	}
	return &Graph{Name: name, parent: parent, model: l.m, shell: shell, scope: make(map[string]*Value, size)}
}

func (l *loader) define(g *Graph, v *Value) error {
	if _, dup := g.scope[v.Name]; dup {
		return l.invalid(g, "value name %q is defined twice", v.Name)
	}
	g.scope[v.Name] = v
	return nil
}

func (l *loader) tensor(tp *onnxpb.TensorProto) (*Tensor, error) {
	t := &Tensor{pb: tp}
	if tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL || len(tp.ExternalData) > 0 && tp.RawData == nil {
		e, err := parseExternal(t, l.dir, l.opts.AllowMissingExternal)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", tp.GetName(), err)
		}
		t.ext = e
	}
	if err := t.check(); err != nil {
		return nil, fmt.Errorf("%w: tensor %q: %v", ErrInvalid, tp.GetName(), err)
	}
	return t, nil
}

func splitDecl(vi *onnxpb.ValueInfoProto) (*Type, *onnxpb.ValueInfoProto) {
	var t *Type
	if vi.Type != nil {
		t = &Type{pb: vi.Type}
	}
	return t, vi
}

// declare records a declaration of v from list; the first one sets v's
// type and doc, a later different one is kept as an override.
func (l *loader) declare(g *Graph, list byte, v *Value, vi *onnxpb.ValueInfoProto) {
	t, info := splitDecl(vi)
	if v.info == nil {
		v.Type, v.info = t, info
		return
	}
	if proto.Equal(v.info, info) {
		return
	}
	if g.overrides == nil {
		g.overrides = map[declKey]declOverride{}
	}
	g.overrides[declKey{list, v}] = declOverride{pb: info, typ: v.Type, name: v.Name}
}

func (l *loader) graph(gp *onnxpb.GraphProto, parent *Graph) (*Graph, error) {
	g := l.newGraph(gp.GetName(), parent, gp)
	nodes, inits, ins, outs, vis := gp.Node, gp.Initializer, gp.Input, gp.Output, gp.ValueInfo
	// Nodes and their outputs are allocated in two slabs.
	nodeSlab := make([]Node, len(nodes))
	nOut := 0
	for _, np := range nodes {
		nOut += len(np.Output)
	}
	valueSlab := make([]Value, nOut)
	gp.Node, gp.Initializer, gp.Input, gp.Output, gp.ValueInfo = nil, nil, nil, nil, nil

	for _, vi := range ins {
		if vi.GetName() == "" {
			return nil, l.invalid(g, "an input has no name")
		}
		v := &Value{Name: vi.GetName(), graph: g}
		if err := l.define(g, v); err != nil {
			return nil, err
		}
		l.declare(g, 'i', v, vi)
		g.Inputs = append(g.Inputs, v)
	}
	for _, tp := range inits {
		t, err := l.tensor(tp)
		if err != nil {
			return nil, fmt.Errorf("initializer: %w", err)
		}
		name := tp.GetName()
		if name == "" {
			return nil, l.invalid(g, "an initializer has no name")
		}
		v := g.scope[name]
		if v != nil && v.Const == nil && v.producer == nil && v.IsGraphInput() {
			v.Const = t
		} else {
			v = &Value{Name: name, Const: t, graph: g}
			if err := l.define(g, v); err != nil {
				return nil, err
			}
		}
		if v.Type == nil {
			v.Type = TensorType(t.DataType(), Dims(t.Dims()...))
		}
		g.Initializers = append(g.Initializers, v)
	}
	for _, sp := range gp.SparseInitializer {
		v := &Value{Name: sp.GetValues().GetName(), sparse: sp, graph: g}
		if err := l.define(g, v); err != nil {
			return nil, err
		}
		g.sparse = append(g.sparse, v)
	}
	// Nodes: define every output first, so that inputs may refer to
	// values produced later in an unsorted list.
	g.nodes = make([]*Node, len(nodes))
	for i, np := range nodes {
		n := &nodeSlab[i]
		*n = Node{Name: np.GetName(), OpType: np.GetOpType(), Domain: np.GetDomain(), Overload: np.GetOverload(), graph: g, shell: np}
		n.outputs = make([]*Value, 0, len(np.Output))
		for k, o := range np.Output {
			v := &valueSlab[0]
			valueSlab = valueSlab[1:]
			*v = Value{Name: o, producer: n, index: int32(k), graph: g}
			if o != "" {
				if err := l.define(g, v); err != nil {
					return nil, fmt.Errorf("%w (output of %v)", err, n)
				}
			}
			n.outputs = append(n.outputs, v)
		}
		g.nodes[i] = n
	}
	for i, np := range nodes {
		n := g.nodes[i]
		n.inputs = make([]*Value, len(np.Input))
		for k, name := range np.Input {
			if name == "" {
				continue
			}
			v := g.Lookup(name)
			if v == nil {
				return nil, l.invalid(g, "node %v reads %q, which no node, input or initializer defines", n, name)
			}
			n.inputs[k] = v
			v.uses = append(v.uses, Use{n, k})
		}
		for _, ap := range np.Attribute {
			a, err := l.attr(ap, g)
			if err != nil {
				return nil, fmt.Errorf("node %v: attribute %q: %w", n, ap.GetName(), err)
			}
			n.Attrs = append(n.Attrs, a)
		}
		for _, sg := range n.Subgraphs() {
			sg.owner = n
		}
		np.Input, np.Output, np.Attribute = nil, nil, nil
	}
	for _, vi := range outs {
		v := g.Lookup(vi.GetName())
		if v == nil {
			return nil, l.invalid(g, "output %q is not defined by any node, input or initializer", vi.GetName())
		}
		if v.graph == g {
			l.declare(g, 'o', v, vi)
		} else {
			if g.overrides == nil {
				g.overrides = map[declKey]declOverride{}
			}
			g.overrides[declKey{'o', v}] = declOverride{pb: vi, typ: v.Type, name: v.Name}
		}
		g.Outputs = append(g.Outputs, v)
	}
	for _, vi := range vis {
		v := g.scope[vi.GetName()]
		if v == nil {
			// A declaration of a value that does not exist (left behind by
			// an optimiser): kept, so that it is written back.
			v = &Value{Name: vi.GetName(), graph: g}
		}
		l.declare(g, 'v', v, vi)
		g.ValueInfo = append(g.ValueInfo, v)
	}
	return g, nil
}

func (l *loader) attr(ap *onnxpb.AttributeProto, g *Graph) (*Attr, error) {
	a := &Attr{pb: ap}
	var err error
	if ap.T != nil {
		if a.Tensor, err = l.tensor(ap.T); err != nil {
			return nil, err
		}
	}
	for _, tp := range ap.Tensors {
		t, err := l.tensor(tp)
		if err != nil {
			return nil, err
		}
		a.Tensors = append(a.Tensors, t)
	}
	if ap.G != nil {
		if a.Graph, err = l.graph(ap.G, g); err != nil {
			return nil, err
		}
	}
	for _, gp := range ap.Graphs {
		sg, err := l.graph(gp, g)
		if err != nil {
			return nil, err
		}
		a.Graphs = append(a.Graphs, sg)
	}
	ap.T, ap.Tensors, ap.G, ap.Graphs = nil, nil, nil, nil
	return a, nil
}

func (l *loader) function(fp *onnxpb.FunctionProto) (*Function, error) {
	f := &Function{Domain: fp.GetDomain(), Name: fp.GetName(), Overload: fp.GetOverload(), AttrNames: fp.Attribute, shell: fp}
	// The body is read as a graph whose inputs are the parameters.
	gp := &onnxpb.GraphProto{Node: fp.Node, ValueInfo: fp.ValueInfo}
	for _, in := range fp.Input {
		gp.Input = append(gp.Input, &onnxpb.ValueInfoProto{Name: proto.String(in)})
	}
	for _, out := range fp.Output {
		gp.Output = append(gp.Output, &onnxpb.ValueInfoProto{Name: proto.String(out)})
	}
	body, err := l.graph(gp, nil)
	if err != nil {
		return nil, fmt.Errorf("function %s.%s: %w", f.Domain, f.Name, err)
	}
	body.Name = f.Name
	f.Body = body
	for _, ap := range fp.AttributeProto {
		a, err := l.attr(ap, body)
		if err != nil {
			return nil, fmt.Errorf("function %s.%s: attribute %q: %w", f.Domain, f.Name, ap.GetName(), err)
		}
		f.AttrDefaults = append(f.AttrDefaults, a)
	}
	fp.Node, fp.ValueInfo, fp.Input, fp.Output, fp.AttributeProto = nil, nil, nil, nil, nil
	return f, nil
}

// tensorWriter gives the TensorProto to write for a tensor; nil writes it
// as it is.
type tensorWriter func(*Tensor) (*onnxpb.TensorProto, error)

// encode marshals the model, writing each tensor as tw says. The
// protobuf tree is assembled from the IR's retained messages for the
// duration of the call only.
func (m *Model) encode(tw tensorWriter) ([]byte, error) {
	if tw == nil {
		tw = func(t *Tensor) (*onnxpb.TensorProto, error) { return t.pb, nil }
	}
	s := &saver{tw: tw}
	pg, err := s.graph(m.Graph)
	if err != nil {
		return nil, err
	}
	var pfs []*onnxpb.FunctionProto
	for _, f := range m.Functions {
		pf, err := s.function(f)
		if err != nil {
			return nil, err
		}
		pfs = append(pfs, pf)
	}
	pm := m.shell
	pm.Graph, pm.Functions = pg, pfs
	defer func() { pm.Graph, pm.Functions = nil, nil }()
	return proto.MarshalOptions{}.Marshal(pm)
}

type saver struct{ tw tensorWriter }

// keepStr returns the original pointer when the value is unchanged (so
// presence is kept), nil for an empty new value, and a new pointer else.
func keepStr(orig *string, v string) *string {
	if orig != nil && *orig == v {
		return orig
	}
	if v == "" {
		return nil
	}
	return proto.String(v)
}

func (s *saver) decl(g *Graph, list byte, v *Value) *onnxpb.ValueInfoProto {
	if o, ok := g.overrides[declKey{list, v}]; ok && o.typ == v.Type && o.name == v.Name {
		return o.pb
	}
	vi := v.info
	if vi == nil {
		vi = &onnxpb.ValueInfoProto{}
		v.info = vi
	}
	vi.Name = keepStr(vi.Name, v.Name)
	if v.Type != nil {
		vi.Type = v.Type.pb
	} else {
		vi.Type = nil
	}
	return vi
}

func (s *saver) graph(g *Graph) (*onnxpb.GraphProto, error) {
	gp := g.shell
	if gp == nil {
		gp = &onnxpb.GraphProto{}
		g.shell = gp
	}
	gp.Name = keepStr(gp.Name, g.Name)
	gp.Input, gp.Output, gp.ValueInfo, gp.Initializer, gp.Node = nil, nil, nil, nil, nil
	for _, v := range g.Inputs {
		gp.Input = append(gp.Input, s.decl(g, 'i', v))
	}
	for _, v := range g.Initializers {
		if v.Const == nil {
			return nil, fmt.Errorf("graph: initializer %q has no tensor", v.Name)
		}
		v.Const.pb.Name = keepStr(v.Const.pb.Name, v.Name)
		tp, err := s.tw(v.Const)
		if err != nil {
			return nil, err
		}
		gp.Initializer = append(gp.Initializer, tp)
	}
	for _, n := range g.nodes {
		np, err := s.node(n)
		if err != nil {
			return nil, err
		}
		gp.Node = append(gp.Node, np)
	}
	for _, v := range g.Outputs {
		gp.Output = append(gp.Output, s.decl(g, 'o', v))
	}
	for _, v := range g.ValueInfo {
		gp.ValueInfo = append(gp.ValueInfo, s.decl(g, 'v', v))
	}
	return gp, nil
}

func (s *saver) node(n *Node) (*onnxpb.NodeProto, error) {
	np := n.shell
	np.Name = keepStr(np.Name, n.Name)
	np.OpType = keepStr(np.OpType, n.OpType)
	np.Domain = keepStr(np.Domain, n.Domain)
	np.Overload = keepStr(np.Overload, n.Overload)
	np.Input = make([]string, len(n.inputs))
	for i, v := range n.inputs {
		if v != nil {
			np.Input[i] = v.Name
		}
	}
	np.Output = make([]string, len(n.outputs))
	for i, v := range n.outputs {
		np.Output[i] = v.Name
	}
	np.Attribute = nil
	for _, a := range n.Attrs {
		ap, err := s.attr(a)
		if err != nil {
			return nil, fmt.Errorf("node %v: %w", n, err)
		}
		np.Attribute = append(np.Attribute, ap)
	}
	return np, nil
}

func (s *saver) attr(a *Attr) (*onnxpb.AttributeProto, error) {
	ap := a.pb
	ap.T, ap.G, ap.Tensors, ap.Graphs = nil, nil, nil, nil
	var err error
	if a.Tensor != nil {
		if ap.T, err = s.tw(a.Tensor); err != nil {
			return nil, err
		}
	}
	for _, t := range a.Tensors {
		tp, err := s.tw(t)
		if err != nil {
			return nil, err
		}
		ap.Tensors = append(ap.Tensors, tp)
	}
	if a.Graph != nil {
		if ap.G, err = s.graph(a.Graph); err != nil {
			return nil, err
		}
	}
	for _, g := range a.Graphs {
		gp, err := s.graph(g)
		if err != nil {
			return nil, err
		}
		ap.Graphs = append(ap.Graphs, gp)
	}
	return ap, nil
}

func (s *saver) function(f *Function) (*onnxpb.FunctionProto, error) {
	fp := f.shell
	fp.Name = keepStr(fp.Name, f.Name)
	fp.Domain = keepStr(fp.Domain, f.Domain)
	fp.Overload = keepStr(fp.Overload, f.Overload)
	fp.Attribute = f.AttrNames
	fp.Input, fp.Output, fp.Node, fp.ValueInfo, fp.AttributeProto = nil, nil, nil, nil, nil
	for _, v := range f.Body.Inputs {
		fp.Input = append(fp.Input, v.Name)
	}
	for _, v := range f.Body.Outputs {
		fp.Output = append(fp.Output, v.Name)
	}
	for _, n := range f.Body.nodes {
		np, err := s.node(n)
		if err != nil {
			return nil, err
		}
		fp.Node = append(fp.Node, np)
	}
	for _, v := range f.Body.ValueInfo {
		fp.ValueInfo = append(fp.ValueInfo, s.decl(f.Body, 'v', v))
	}
	for _, a := range f.AttrDefaults {
		ap, err := s.attr(a)
		if err != nil {
			return nil, err
		}
		fp.AttributeProto = append(fp.AttributeProto, ap)
	}
	return fp, nil
}
