package kernels

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels/gemm"
)

// Options configure a Session.
type Options struct {
	// Accumulate64 makes reductions, MatMul, Gemm, Einsum, Conv and the
	// normalisations of float32 tensors accumulate in float64 (a
	// reference-grade mode; results are still rounded to float32).
	Accumulate64 bool
	// Threads limits the goroutines a Run uses for matrix products and
	// large elementwise, softmax and normalisation work: 0 means
	// GOMAXPROCS (all cores), 1 runs single-threaded.
	Threads int
}

// Session runs one model. It converts the model's constants once; Run may
// be called many times but not concurrently.
type Session struct {
	model *graph.Model
	opts  Options
	main  *plan
	// constKeys identifies the storage of every plan's constants, which
	// runs neither count nor recycle; constBytes is its size.
	constKeys  map[uintptr]bool
	constBytes int64
	packed     int64    // bytes of packed weights
	pool       bufPool  // freed intermediates, reused by later kernels and runs
	tr         *tracker // the storage of the current run
	spare      *tracker // the tracker of the last run, for reuse
	stats      RunStats // of the last run
}

// plan is a graph compiled for execution: its steps in topological order,
// the values each step frees, and its constants.
type plan struct {
	g      *graph.Graph
	steps  []*step
	consts map[*graph.Value]*Tensor
}

type step struct {
	node  *graph.Node
	entry entry
	opset int64
	attrs map[string]*graph.Attr
	free  []*graph.Value
	subs  map[*graph.Graph]*plan // attribute subgraphs (If, Loop, Scan)
	fn    *plan                  // body of a model-local function
	// packed is the constant B operand of a matrix product, packed once.
	packed *packedWeight
	ins    []*Tensor // the inputs of the running step
	call   Call
}

// env holds the values computed while running one plan; parent is the
// enclosing graph's env (for outer-scope reads of subgraphs).
type env struct {
	vals   map[*graph.Value]*Tensor
	plan   *plan
	parent *env
}

func (e *env) get(v *graph.Value) *Tensor {
	for s := e; s != nil; s = s.parent {
		if t, ok := s.vals[v]; ok {
			return t
		}
		if t, ok := s.plan.consts[v]; ok {
			return t
		}
	}
	return nil
}

// NewSession compiles m for execution: it checks that every op has a
// kernel, orders the nodes, converts initializers and folds Constant nodes.
func NewSession(m *graph.Model, opts Options) (*Session, error) {
	s := &Session{model: m, opts: opts, constKeys: map[uintptr]bool{}}
	p, err := s.compile(m.Graph, nil, nil)
	if err != nil {
		return nil, err
	}
	s.main = p
	return s, nil
}

// Model is the session's model.
func (s *Session) Model() *graph.Model { return s.model }

// opsets maps a domain to its version inside a function body (nil for
// the model's own imports).
type opsets map[string]int64

func (s *Session) opsetOf(domain string, os opsets) int64 {
	d := normDomain(domain)
	if os != nil {
		if v, ok := os[d]; ok {
			return v
		}
	}
	if v := s.model.OpsetVersion(d); v != 0 {
		return v
	}
	if d == "" {
		return 23
	}
	return 1
}

// compile builds the plan of g. refs resolves attribute references inside
// a function body; os are the function's opset imports.
func (s *Session) compile(g *graph.Graph, refs map[string]*graph.Attr, os opsets) (*plan, error) {
	p := &plan{g: g, consts: map[*graph.Value]*Tensor{}}
	for _, v := range g.Initializers {
		t, err := FromGraph(v.Const)
		if err != nil {
			return nil, fmt.Errorf("initializer %q: %w", v.Name, err)
		}
		p.consts[v] = t
	}
	order, err := topoOrder(g)
	if err != nil {
		return nil, err
	}
	for _, n := range order {
		st := &step{node: n, opset: s.opsetOf(n.Domain, os), attrs: resolveAttrs(n, refs)}
		if f := s.model.Function(n.Domain, n.OpType, n.Overload); f != nil {
			callRefs := map[string]*graph.Attr{}
			for _, a := range f.AttrDefaults {
				callRefs[a.Name()] = a
			}
			for name, a := range st.attrs {
				callRefs[name] = a
			}
			fos := opsets{}
			for _, o := range f.Opsets() {
				fos[normDomain(o.Domain)] = o.Version
			}
			body, err := s.compile(f.Body, callRefs, fos)
			if err != nil {
				return nil, fmt.Errorf("function %s.%s called by node %q: %w", f.Domain, f.Name, n.Name, err)
			}
			st.fn = body
		} else {
			e, ok := lookup(n.Domain, n.OpType, st.opset)
			if !ok {
				return nil, fmt.Errorf("node %q: %s opset %d: %w", n.Name, opName(n), st.opset, ErrUnsupportedOp)
			}
			st.entry = e
		}
		for _, a := range n.Attrs {
			var gs []*graph.Graph
			if a.Graph != nil {
				gs = append(gs, a.Graph)
			}
			gs = append(gs, a.Graphs...)
			for _, sg := range gs {
				sp, err := s.compile(sg, refs, os)
				if err != nil {
					return nil, fmt.Errorf("node %q: attribute %s: %w", n.Name, a.Name(), err)
				}
				if st.subs == nil {
					st.subs = map[*graph.Graph]*plan{}
				}
				st.subs[sg] = sp
			}
		}
		if n.OpType == "Constant" && normDomain(n.Domain) == "" && st.fn == nil {
			// Fold now: the value is the same on every run.
			c := &Call{Node: n, Opset: st.opset, attrs: st.attrs, opts: &s.opts}
			outs, err := s.callKernel(c, st, nil)
			if err != nil {
				return nil, err
			}
			p.consts[n.Output(0)] = outs[0]
			continue
		}
		p.steps = append(p.steps, st)
	}
	// Last uses: a value defined in g is dropped after the last step that
	// reads it, directly or from inside a subgraph.
	last := map[*graph.Value]int{}
	for i, st := range p.steps {
		for _, v := range st.node.Inputs() {
			if v != nil {
				last[v] = i
			}
		}
		for _, sg := range st.node.Subgraphs() {
			for _, v := range outerReads(sg) {
				last[v] = i
			}
		}
		for _, o := range st.node.Outputs() {
			if _, ok := last[o]; !ok {
				last[o] = i // never read: dropped right away
			}
		}
	}
	outputs := map[*graph.Value]bool{}
	for _, o := range g.Outputs {
		outputs[o] = true
	}
	for i, st := range p.steps {
		for _, o := range st.node.Outputs() {
			if last[o] == i && !outputs[o] && o.Name != "" {
				st.free = append(st.free, o)
			}
		}
	}
	for v, i := range last {
		if v.Graph() != g || outputs[v] || v.Producer() == nil {
			continue
		}
		if v.Producer() != p.steps[i].node {
			p.steps[i].free = append(p.steps[i].free, v)
		}
	}
	for _, t := range p.consts {
		if k, cb, _ := storageKey(t); k != 0 && !s.constKeys[k] {
			s.constKeys[k] = true
			s.constBytes += cb
		}
	}
	s.packWeights(p)
	return p, nil
}

func opName(n *graph.Node) string {
	if d := normDomain(n.Domain); d != "" {
		return d + "." + n.OpType
	}
	return n.OpType
}

func resolveAttrs(n *graph.Node, refs map[string]*graph.Attr) map[string]*graph.Attr {
	m := make(map[string]*graph.Attr, len(n.Attrs))
	for _, a := range n.Attrs {
		if r := a.RefAttrName(); r != "" {
			if ra := refs[r]; ra != nil {
				m[a.Name()] = ra
			}
			continue
		}
		m[a.Name()] = a
	}
	return m
}

// outerReads lists the values read inside sg (or its nested subgraphs)
// that are defined outside it.
func outerReads(sg *graph.Graph) []*graph.Value {
	inside := func(v *graph.Value) bool {
		for g := v.Graph(); g != nil; g = g.Parent() {
			if g == sg {
				return true
			}
		}
		return false
	}
	var out []*graph.Value
	seen := map[*graph.Value]bool{}
	add := func(v *graph.Value) {
		if v != nil && !seen[v] && !inside(v) {
			seen[v] = true
			out = append(out, v)
		}
	}
	sg.Walk(func(n *graph.Node) {
		for _, v := range n.Inputs() {
			add(v)
		}
	})
	for _, v := range sg.Outputs {
		add(v)
	}
	return out
}

// topoOrder orders g's nodes without changing g, keeping the stored order
// where it is valid.
func topoOrder(g *graph.Graph) ([]*graph.Node, error) {
	nodes := g.Nodes()
	pos := make(map[*graph.Node]int, len(nodes))
	for i, n := range nodes {
		pos[n] = i
	}
	indeg := make([]int, len(nodes))
	succ := make([][]int, len(nodes))
	for i, n := range nodes {
		deps := append([]*graph.Value(nil), n.Inputs()...)
		for _, sg := range n.Subgraphs() {
			deps = append(deps, outerReads(sg)...)
		}
		for _, v := range deps {
			if v == nil || v.Producer() == nil {
				continue
			}
			j, ok := pos[v.Producer()]
			if !ok {
				continue
			}
			indeg[i]++
			succ[j] = append(succ[j], i)
		}
	}
	order := make([]*graph.Node, 0, len(nodes))
	// Ready nodes in stored order: a simple queue scan keeps it stable
	// enough for sorted graphs (which are the common case).
	ready := []int{}
	for i := range nodes {
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		i := ready[0]
		ready = ready[1:]
		order = append(order, nodes[i])
		for _, s := range succ[i] {
			indeg[s]--
			if indeg[s] == 0 {
				ready = append(ready, s)
			}
		}
	}
	if len(order) != len(nodes) {
		return nil, fmt.Errorf("graph %q has a cycle", g.Name)
	}
	return order, nil
}

// Run computes the model's outputs from inputs keyed by graph input name.
// Graph inputs that are also initializers may be left out.
func (s *Session) Run(inputs map[string]*Tensor) (map[string]*Tensor, error) {
	g := s.model.Graph
	e := &env{vals: make(map[*graph.Value]*Tensor, len(g.Inputs)+len(s.main.steps)), plan: s.main}
	tr := s.spare
	if tr == nil {
		tr = newTracker(&s.pool, s.constKeys)
	}
	tr.reset()
	s.spare, s.tr = nil, tr
	defer func() { s.tr, s.spare = nil, tr }()
	prev := gemm.SetThreads(s.opts.Threads)
	defer gemm.SetThreads(prev)
	for _, v := range g.Inputs {
		t, ok := inputs[v.Name]
		if !ok || t == nil {
			if v.Const != nil {
				continue
			}
			return nil, fmt.Errorf("input %q is missing", v.Name)
		}
		if err := checkInput(v, t); err != nil {
			return nil, err
		}
		e.vals[v] = t
		tr.input(t)
	}
	for name := range inputs {
		if !hasInput(g, name) {
			return nil, fmt.Errorf("the model has no input %q", name)
		}
	}
	if err := s.exec(s.main, e); err != nil {
		return nil, err
	}
	out := make(map[string]*Tensor, len(g.Outputs))
	for _, v := range g.Outputs {
		t := e.get(v)
		if t == nil {
			return nil, fmt.Errorf("output %q was not computed", v.Name)
		}
		out[v.Name] = t
	}
	s.pool.trim(2 * tr.peak)
	s.stats = RunStats{PeakLiveBytes: tr.peak, RequiredBytes: tr.required(), ConstBytes: s.constBytes,
		InputBytes: tr.inBytes, PackedBytes: s.packed, PoolBytes: s.pool.bytes, Steps: tr.step}
	return out, nil
}

func hasInput(g *graph.Graph, name string) bool {
	for _, v := range g.Inputs {
		if v.Name == name {
			return true
		}
	}
	return false
}

func checkInput(v *graph.Value, t *Tensor) error {
	if v.Type == nil || !v.Type.IsTensor() {
		return nil
	}
	if t.IsSequence() {
		return fmt.Errorf("input %q: got a sequence, the model declares %v", v.Name, v.Type)
	}
	if dt := v.Type.ElemType(); dt != graph.Undefined && dt != t.DType {
		return fmt.Errorf("input %q: got %v, the model declares %v", v.Name, t, v.Type)
	}
	// Declared shapes are not checked: models (and ONNX's own test data)
	// declare shapes that the data does not have, and kernels check what
	// they need.
	return nil
}

// exec runs p's steps in e (whose inputs are bound).
func (s *Session) exec(p *plan, e *env) error {
	for _, st := range p.steps {
		n := st.node
		// A step never runs inside itself, so its input slice and Call
		// are reused from run to run (kernels keep neither).
		if len(st.ins) != len(n.Inputs()) {
			st.ins = make([]*Tensor, len(n.Inputs()))
		}
		ins := st.ins
		clear(ins)
		for i, v := range n.Inputs() {
			if v == nil {
				continue
			}
			t := e.get(v)
			if t == nil {
				return fmt.Errorf("node %q (%s): input %q has no value", n.Name, opName(n), v.Name)
			}
			ins[i] = t
		}
		tr := s.tr
		c := &st.call
		*c = Call{Node: n, Opset: st.opset, attrs: st.attrs, opts: &s.opts, sess: s, step: st, env: e, tr: tr, allocs: c.allocs[:0]}
		if tr != nil {
			tr.step++
		}
		outs, err := s.callKernel(c, st, ins)
		if err != nil {
			return err
		}
		for i, o := range n.Outputs() {
			if o.Name == "" || i >= len(outs) {
				continue
			}
			if outs[i] == nil {
				return fmt.Errorf("node %q (%s): output %d was not computed", n.Name, opName(n), i)
			}
			e.vals[o] = outs[i]
			if tr != nil {
				tr.hold(outs[i], c)
			}
		}
		for _, v := range st.free {
			if tr != nil {
				tr.release(e.vals[v])
			}
			delete(e.vals, v)
		}
		if tr != nil {
			c.dropTemps()
			tr.endStep()
		}
	}
	return nil
}

// leave hands the outputs of a subgraph or function env to the calling
// kernel: the env's references to the values its own nodes computed end.
func (s *Session) leave(p *plan, e *env, outs []*graph.Value) {
	if s.tr == nil {
		return
	}
	for _, v := range outs {
		if v.Producer() == nil || v.Graph() != p.g {
			continue
		}
		if t, ok := e.vals[v]; ok {
			s.tr.leave(t)
			delete(e.vals, v)
		}
	}
}

// callKernel runs one node: a model-local function body or a kernel, with
// float16/bfloat16 widening for kernels that are not Native.
func (s *Session) callKernel(c *Call, st *step, ins []*Tensor) (outs []*Tensor, err error) {
	n := c.Node
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v\n%s", r, debug.Stack())
		}
		if err != nil {
			err = &NodeError{Node: n.Name, Op: opName(n), Opset: c.Opset, Inputs: shapesOf(ins), Err: err}
		}
	}()
	if st.fn != nil {
		return s.callFunction(st.fn, ins)
	}
	var half graph.DataType
	if st.entry.flags&Native == 0 {
		for i, t := range ins {
			if t != nil && !t.IsSequence() && (t.DType == graph.Float16 || t.DType == graph.BFloat16) {
				if half == 0 {
					half = t.DType
				}
				ins[i] = castC(c, t, graph.Float)
			}
		}
	}
	outs, err = st.entry.fn(c, ins)
	if err != nil {
		return nil, err
	}
	if len(outs) < len(n.Outputs()) {
		for _, o := range n.Outputs()[len(outs):] {
			if o.Name != "" {
				return nil, fmt.Errorf("kernel returned %d outputs, the node has %d", len(outs), len(n.Outputs()))
			}
		}
	}
	if half != 0 {
		for i, t := range outs {
			if t == nil || t.DType != graph.Float || t.IsSequence() {
				continue
			}
			if i < len(n.Outputs()) {
				if ty := n.Output(i).Type; ty != nil && ty.ElemType() == graph.Float {
					continue // declared float32 (e.g. a statistics output)
				}
			}
			outs[i] = castC(c, t, half)
		}
	}
	return outs, nil
}

func (s *Session) callFunction(p *plan, ins []*Tensor) ([]*Tensor, error) {
	e := &env{vals: make(map[*graph.Value]*Tensor, len(p.g.Inputs)+len(p.steps)), plan: p}
	for i, v := range p.g.Inputs {
		if i < len(ins) && ins[i] != nil {
			e.vals[v] = ins[i]
		}
	}
	if err := s.exec(p, e); err != nil {
		return nil, err
	}
	outs := make([]*Tensor, len(p.g.Outputs))
	for i, v := range p.g.Outputs {
		outs[i] = e.get(v)
	}
	s.leave(p, e, p.g.Outputs)
	return outs, nil
}

// runGraph runs subgraph plan p with its inputs bound to ins, reading outer
// values from parent.
func (s *Session) runGraph(p *plan, parent *env, ins []*Tensor) ([]*Tensor, error) {
	e := &env{vals: make(map[*graph.Value]*Tensor, len(p.steps)+len(ins)), plan: p, parent: parent}
	for i, v := range p.g.Inputs {
		if i < len(ins) && ins[i] != nil {
			e.vals[v] = ins[i]
		}
	}
	if err := s.exec(p, e); err != nil {
		return nil, err
	}
	outs := make([]*Tensor, len(p.g.Outputs))
	for i, v := range p.g.Outputs {
		outs[i] = e.get(v)
		if outs[i] == nil {
			return nil, fmt.Errorf("subgraph %q: output %q was not computed", p.g.Name, v.Name)
		}
	}
	s.leave(p, e, p.g.Outputs)
	return outs, nil
}

func shapesOf(ts []*Tensor) []string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return s
}

// NodeError is the error of one node: its name, op, opset, the types and
// shapes of its inputs, and the cause.
type NodeError struct {
	Node   string
	Op     string
	Opset  int64
	Inputs []string
	Err    error
}

func (e *NodeError) Error() string {
	// Errors of nodes inside subgraphs and functions nest; keep them on
	// one line each.
	return fmt.Sprintf("node %q (%s, opset %d) inputs (%s): %v", e.Node, e.Op, e.Opset, strings.Join(e.Inputs, ", "), e.Err)
}

func (e *NodeError) Unwrap() error { return e.Err }

// Call is what a kernel knows about the node it computes: its attributes
// (with function attribute references resolved), opset and options.
type Call struct {
	Node  *graph.Node
	Opset int64
	attrs map[string]*graph.Attr
	opts  *Options
	sess  *Session
	step  *step
	env   *env
	// tr is the run's storage tracker (nil outside a run); allocs are the
	// buffers alloc handed out during this call.
	tr     *tracker
	allocs []*Tensor
}

// Attr returns the attribute name, or nil.
func (c *Call) Attr(name string) *graph.Attr { return c.attrs[name] }

// Int returns an int attribute or def.
func (c *Call) Int(name string, def int64) int64 {
	if a := c.attrs[name]; a != nil {
		return a.Int()
	}
	return def
}

// Float returns a float attribute or def.
func (c *Call) Float(name string, def float32) float32 {
	if a := c.attrs[name]; a != nil {
		return a.Float()
	}
	return def
}

// String returns a string attribute or def.
func (c *Call) String(name, def string) string {
	if a := c.attrs[name]; a != nil {
		return a.String()
	}
	return def
}

// Ints returns an ints attribute, or nil.
func (c *Call) Ints(name string) []int64 {
	if a := c.attrs[name]; a != nil {
		return a.Ints()
	}
	return nil
}

// Acc64 reports whether float32 sums should accumulate in float64.
func (c *Call) Acc64() bool { return c != nil && c.opts != nil && c.opts.Accumulate64 }

// NumOutputs is the number of outputs the node declares.
func (c *Call) NumOutputs() int { return len(c.Node.Outputs()) }

// HasOutput reports whether output i is used (declared with a name).
func (c *Call) HasOutput(i int) bool {
	return i < len(c.Node.Outputs()) && c.Node.Output(i).Name != ""
}

// runSub runs the subgraph held by attribute name.
func (c *Call) runSub(name string, ins []*Tensor) ([]*Tensor, error) {
	a := c.attrs[name]
	if a == nil || a.Graph == nil {
		return nil, fmt.Errorf("attribute %s is not a graph", name)
	}
	p := c.step.subs[a.Graph]
	if p == nil {
		return nil, fmt.Errorf("attribute %s: subgraph was not compiled", name)
	}
	return c.sess.runGraph(p, c.env, ins)
}
