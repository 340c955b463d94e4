package kernels

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/onnxpe/onnxpe/graph"
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
	// IgnoreDeclaredShapes accepts inputs whose shape contradicts the
	// shape the model declares (rank or a fixed size). Only for test data
	// known to be inconsistent with its model.
	IgnoreDeclaredShapes bool
	// MaxTensorBytes bounds every tensor a kernel allocates (outputs,
	// temporaries, scan outputs as they grow): its size comes from the
	// model's values and the inputs' shapes (a broadcast, a product over
	// an empty inner dimension, Tile, Expand, ConstantOfShape, Range, Pad,
	// a gather), so a larger one is an error of the node (wrapping
	// ErrTooLarge), raised before anything is allocated. 0 means
	// DefaultMaxTensorBytes (16 GiB); it is never above
	// graph.MaxTensorBytes.
	MaxTensorBytes int64
	// Budget is the memory budget of the session's runs: the storage of
	// every tensor a kernel allocates is reserved in it first, and a node
	// whose tensors would go over it fails (wrapping ErrOverBudget and
	// ErrTooLarge). nil means ProcessBudget(). A single tensor is also
	// never larger than the budget's limit.
	Budget *Budget
	// MaxLoopIterations bounds the iterations of one run of a Loop node
	// (a loop that would run more is an error): 0 means
	// DefaultMaxLoopIterations (2^24).
	MaxLoopIterations int64
	// unfused runs decomposed attention chains as written instead of
	// blockwise (tests compare the two).
	unfused bool
	// poison makes alloc fill the buffers it hands out with garbage
	// (tests: a kernel must write every element of its outputs).
	poison bool
	// PanicStacks prints the stack of a kernel panic to standard error
	// when the session turns it into an error wrapping ErrInternal (the
	// environment variable ONNXPE_DEBUG=1 does the same).
	PanicStacks bool
	// Outputs, when set, names the values of the main graph that Run
	// returns instead of the graph's outputs: intermediate values, for
	// checks that compare models node by node. Each must be an input, an
	// initializer or a named node output of the main graph.
	Outputs []string
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
	// outs are the values Run returns (the graph's outputs unless
	// Options.Outputs names others).
	outs []*graph.Value
	// wide maps float16/bfloat16 constants to their float32 copies.
	wide map[*Tensor]*Tensor
	// compiling holds the model-local functions being compiled (a
	// function that calls itself is refused).
	compiling map[*graph.Function]bool
	// fusedChains counts the decomposed attention chains the plans run
	// as one step (see attention_fused.go); attnWorkers keep the
	// blockwise steps' scratch from step to step and run to run (the
	// steps of a session never overlap).
	fusedChains int
	attnWorkers []*attnFusedWorker
	// producer maps the main plan's computed values to their steps (for
	// Eval); keepAll makes steps keep the values they would free.
	producer map[*graph.Value]int
	keepAll  bool
	// mapped are the constants used in place over a mapped side file,
	// with their bytes (see weights.go).
	mapped map[*Tensor][]byte
	// packedOf holds the packed weights by source and layout: steps that
	// multiply by one weight share its packed copy; holds are the shared
	// packed weights the session holds.
	packedOf map[packKey]*packedWeight
	holds    *heldWeights
	// sink is the Spill of the running RunInto (nil: outputs in memory).
	sink *Spill
}

// plan is a graph compiled for execution: its steps in topological order,
// the values each step frees, and its constants. The values a plan's own
// nodes compute (and its graph inputs) live in an env's slot array; steps
// read them through refs resolved at compile time.
type plan struct {
	g      *graph.Graph
	steps  []*step
	consts map[*graph.Value]*Tensor
	// slots numbers the values defined in g: graph inputs and named node
	// outputs. isInput marks g's inputs (an initializer that is also an
	// input is read from its slot, which a run may fill).
	slots   map[*graph.Value]int
	isInput map[*graph.Value]bool
	inSlots []int     // slot of each g.Inputs entry
	inDefs  []*Tensor // the initializer of each g.Inputs entry, or nil
	outRefs []ref     // where each g.Outputs entry is read
	parent  *plan     // the enclosing graph's plan (compile time only)
}

// ref says where a step reads one input: a constant, or a slot of the env
// up levels above the running one. slot is refAbsent for an absent
// optional input and refMissing for a value no graph defines.
type ref struct {
	k    *Tensor
	up   int
	slot int
	v    *graph.Value
}

const (
	refAbsent  = -1
	refMissing = -2
)

type step struct {
	node  *graph.Node
	entry entry
	opset int64
	attrs attrList
	free  []int                  // slots dropped after the step
	subs  map[*graph.Graph]*plan // attribute subgraphs (If, Loop, Scan)
	fn    *plan                  // body of a model-local function
	// packed is the constant B operand of a matrix product, packed once.
	packed *packedWeight
	// attn is set for the step that runs a decomposed attention chain
	// blockwise.
	attn *attnChain
	// halfB says the step is a matrix product whose constant B (input 1)
	// is float16 or bfloat16: the kernel gets it unwidened.
	halfB bool
	in    []ref
	// spec is the op's input spec (hasSpec: it has one), for the check
	// that sequences and optionals reach only the inputs that take them.
	spec    string
	hasSpec bool
	outs    []int     // slot of each output (-1: unnamed)
	ins     []*Tensor // the inputs of the running step
	kins    []*Tensor // the inputs the kernel sees (float16/bfloat16 widened)
	half    halfRule  // where the kernel's type T is (for widening)
	// small says the kernel takes inputs of the small types (8-bit and
	// 4-bit floats, 4-bit and 2-bit integers): see smallTypeOps.
	small bool
	// strings says the kernel takes string inputs (see stringOps).
	strings bool
	call    Call
	// wide holds float32 copies of the step's float16/bfloat16 constant
	// inputs (for kernels that are not Native), by input index.
	wide []*Tensor
	// memo caches the outputs of a pure step whose inputs are all frozen
	// (constants or cached outputs) or, for Shape and Size, whose input
	// shape is unchanged: the next run with the same inputs reuses them.
	memo memo
}

type memoKind uint8

const (
	memoNone  memoKind = iota
	memoPure           // inputs must be frozen and the same tensors
	memoShape          // Shape, Size: the input's shape must be the same
)

type memo struct {
	kind  memoKind
	ins   []*Tensor
	shape []int
	outs  []*Tensor
}

// memoMaxElems bounds the outputs a step may cache (per output).
const memoMaxElems = 1 << 14

// env holds the values computed while running one plan; parent is the
// enclosing graph's env (for outer-scope reads of subgraphs).
type env struct {
	vals   []*Tensor
	plan   *plan
	parent *env
}

func newEnv(p *plan, parent *env) *env {
	return &env{vals: make([]*Tensor, len(p.slots)), plan: p, parent: parent}
}

// read returns the tensor r refers to from e.
func (e *env) read(r *ref) *Tensor {
	if r.k != nil {
		return r.k
	}
	if r.slot < 0 {
		return nil
	}
	s := e
	for u := r.up; u > 0; u-- {
		s = s.parent
	}
	return s.vals[r.slot]
}

// bindInputs stores ins (by position) into e's input slots, initializer
// defaults where an input is absent.
func (e *env) bindInputs(ins []*Tensor) {
	p := e.plan
	for i, sl := range p.inSlots {
		if i < len(ins) && ins[i] != nil {
			e.vals[sl] = ins[i]
		} else if p.inDefs[i] != nil {
			e.vals[sl] = p.inDefs[i]
		}
	}
}

// attrList holds a node's attributes (function references resolved) in a
// slice: nodes have few, and a scan beats hashing their names.
type attrList []namedAttr

type namedAttr struct {
	name string
	a    *graph.Attr
	s    string // the string value, for string attributes
}

func (l attrList) get(name string) *namedAttr {
	for i := range l {
		if l[i].name == name {
			return &l[i]
		}
	}
	return nil
}

func (l attrList) attr(name string) *graph.Attr {
	if na := l.get(name); na != nil {
		return na.a
	}
	return nil
}

// NewSession compiles m for execution: it checks that every op has a
// kernel, orders the nodes, converts initializers and folds Constant nodes.
func NewSession(m *graph.Model, opts Options) (*Session, error) {
	s := &Session{model: m, opts: opts, constKeys: map[uintptr]bool{}, outs: m.Graph.Outputs}
	if opts.Outputs != nil {
		s.outs = make([]*graph.Value, len(opts.Outputs))
		for i, name := range opts.Outputs {
			v := m.Graph.Lookup(name)
			if v == nil || name == "" {
				return nil, fmt.Errorf("kernels: Options.Outputs: the main graph has no value %q", name)
			}
			s.outs[i] = v
		}
	}
	s.holds = &heldWeights{}
	p, err := s.compile(m.Graph, nil, nil, nil)
	if err != nil {
		s.holds.release()
		endLinger()
		return nil, err
	}
	s.main = p
	// A session never closed gives its weights back when collected.
	runtime.AddCleanup(s, func(h *heldWeights) { h.release() }, s.holds)
	endLinger()
	return s, nil
}

// heldWeights are the shared packed weights a session holds.
type heldWeights struct {
	mu   sync.Mutex
	list []*packedData
	done bool
}

func (h *heldWeights) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done {
		h.done = true
		releaseHeld(h.list)
		h.list = nil
	}
}

// Close ends the session: it stops holding its packed weights (kept for
// the next session made, which may share them, and freed then, or by
// ReleaseUnusedWeights), drops the pages of the weights it used in place
// over mapped files from the process, and Run fails afterwards.
func (s *Session) Close() {
	if s.main == nil {
		return
	}
	s.holds.release()
	for _, b := range s.mapped {
		graph.ReleaseMapped(b)
	}
	s.main, s.mapped, s.packedOf, s.attnWorkers = nil, nil, nil, nil
	s.pool = bufPool{}
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
	// A domain the imports leave out (graph.Model.Repairs says so): the
	// version ONNX Runtime reads it at.
	return graph.AssumedOpset(d)
}

// compile builds the plan of g. refs resolves attribute references inside
// a function body; os are the function's opset imports; parent is the plan
// of the graph enclosing g (nil for the main graph and function bodies).
func (s *Session) compile(g *graph.Graph, refs map[string]*graph.Attr, os opsets, parent *plan) (*plan, error) {
	p := &plan{g: g, consts: map[*graph.Value]*Tensor{}, slots: map[*graph.Value]int{},
		isInput: map[*graph.Value]bool{}, parent: parent}
	order, err := topoOrder(g)
	if err != nil {
		return nil, err
	}
	outVals := g.Outputs
	if g == s.model.Graph && parent == nil && refs == nil {
		outVals = s.outs
	}
	// Only the nodes the outputs depend on run, and only the initializers
	// they read are converted: a weight nothing computes with is never
	// read from its file.
	need := make(map[*graph.Value]bool, len(order))
	for _, o := range outVals {
		need[o] = true
	}
	live := make([]bool, len(order))
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		for _, o := range n.Outputs() {
			live[i] = live[i] || need[o]
		}
		if !live[i] {
			continue
		}
		for _, v := range n.Inputs() {
			need[v] = true
		}
		for _, sg := range n.Subgraphs() {
			for _, v := range outerReads(sg) {
				need[v] = true
			}
		}
	}
	for _, v := range g.Initializers {
		if !need[v] {
			continue
		}
		t, err := s.constOf(v.Const)
		if err != nil {
			return nil, fmt.Errorf("initializer %q: %w", v.Name, err)
		}
		t.frozen = true
		p.consts[v] = t
	}
	for _, v := range g.Inputs {
		p.isInput[v] = true
		sl, ok := p.slots[v]
		if !ok {
			sl = len(p.slots)
			p.slots[v] = sl
		}
		p.inSlots = append(p.inSlots, sl)
		p.inDefs = append(p.inDefs, p.consts[v])
	}
	for _, n := range order {
		for _, o := range n.Outputs() {
			if o.Name == "" {
				continue
			}
			if _, ok := p.slots[o]; !ok {
				p.slots[o] = len(p.slots)
			}
		}
	}
	for i, n := range order {
		if !live[i] {
			continue
		}
		st := &step{node: n, opset: s.opsetOf(n.Domain, os), attrs: resolveAttrs(n, refs)}
		if f := s.model.Function(n.Domain, n.OpType, n.Overload); f != nil {
			if s.compiling[f] {
				return nil, fmt.Errorf("node %q: function %s.%s calls itself (directly or through other functions): recursion is not supported", n.Name, f.Domain, f.Name)
			}
			callRefs := map[string]*graph.Attr{}
			for _, a := range f.AttrDefaults {
				callRefs[a.Name()] = a
			}
			for _, na := range st.attrs {
				callRefs[na.name] = na.a
			}
			fos := opsets{}
			for _, o := range f.Opsets() {
				fos[normDomain(o.Domain)] = o.Version
			}
			if s.compiling == nil {
				s.compiling = map[*graph.Function]bool{}
			}
			s.compiling[f] = true
			body, err := s.compile(f.Body, callRefs, fos, nil)
			delete(s.compiling, f)
			if err != nil {
				return nil, fmt.Errorf("function %s.%s called by node %q: %w", f.Domain, f.Name, n.Name, err)
			}
			st.fn = body
		} else {
			e, ok := lookup(n.Domain, n.OpType, st.opset)
			if !ok {
				if normDomain(n.Domain) == DomainMicrosoft && generationOps[n.OpType] {
					return nil, fmt.Errorf("node %q: %w", n.Name, generationOpError(n.OpType))
				}
				return nil, fmt.Errorf("node %q: %s opset %d: %w", n.Name, opName(n), st.opset, ErrUnsupportedOp)
			}
			if err := checkInputs(n, st.opset); err != nil {
				return nil, fmt.Errorf("node %q: %s opset %d: %w", n.Name, opName(n), st.opset, err)
			}
			st.spec, st.hasSpec = inputSpec(n.Domain, n.OpType, st.opset)
			st.entry = e
			st.half = halfRules[opName(n)]
			st.small = smallTypeOps[opName(n)]
			st.strings = stringOps[opName(n)]
		}
		for _, a := range n.Attrs {
			var gs []*graph.Graph
			if a.Graph != nil {
				gs = append(gs, a.Graph)
			}
			gs = append(gs, a.Graphs...)
			for _, sg := range gs {
				sp, err := s.compile(sg, refs, os, p)
				if err != nil {
					return nil, fmt.Errorf("node %q: attribute %s: %w", n.Name, a.Name(), err)
				}
				if st.subs == nil {
					st.subs = map[*graph.Graph]*plan{}
				}
				st.subs[sg] = sp
			}
		}
		st.in = make([]ref, len(n.Inputs()))
		foldable := st.fn == nil && st.subs == nil
		for i, v := range n.Inputs() {
			st.in[i] = p.resolve(v)
			if v != nil && st.in[i].k == nil {
				foldable = false
			}
		}
		st.ins = make([]*Tensor, len(n.Inputs()))
		st.outs = make([]int, len(n.Outputs()))
		for i, o := range n.Outputs() {
			st.outs[i] = -1
			if o.Name != "" {
				st.outs[i] = p.slots[o]
			}
		}
		if st.fn == nil && st.subs == nil && normDomain(n.Domain) == "" {
			switch {
			case n.OpType == "Shape" || n.OpType == "Size":
				st.memo.kind = memoShape
			case pureOps[n.OpType]:
				st.memo.kind = memoPure
			}
		}
		if foldable && (st.memo.kind == memoPure || n.OpType == "Constant") {
			// Fold now: the value is the same on every run.
			outs, err := s.fold(st)
			if err != nil && n.OpType == "Constant" {
				return nil, err
			}
			if outs != nil {
				for i, o := range n.Outputs() {
					if o.Name != "" && i < len(outs) && outs[i] != nil {
						p.consts[o] = outs[i]
					}
				}
				continue
			}
		}
		if st.entry.flags&Native == 0 && st.fn == nil {
			for i, r := range st.in {
				if i == 1 && r.k != nil && isHalf(r.k.DType) && halfBOps[opName(n)] {
					// A half weight stays in its width: the product
					// widens it tile by tile (matmulHalfB).
					st.halfB = true
					if b := s.mapped[r.k]; b != nil {
						// Read in place on every run: fault it in at once.
						graph.PopulateMapped(b)
					}
					continue
				}
				if r.k != nil && isHalf(r.k.DType) {
					if st.wide == nil {
						st.wide = make([]*Tensor, len(st.in))
					}
					st.wide[i] = s.widened(r.k)
				}
			}
		}
		p.steps = append(p.steps, st)
	}
	outputs := map[*graph.Value]bool{}
	for _, o := range outVals {
		outputs[o] = true
	}
	// Values returned (the graph's outputs, or Options.Outputs) stay
	// computed: no attention chain is fused through them.
	keep := maps.Clone(outputs)
	for _, o := range g.Outputs {
		keep[o] = true
	}
	s.fuseAttention(p, keep)
	// Last uses: a value defined in g is dropped after the last step that
	// reads it, directly or from inside a subgraph.
	last := map[*graph.Value]int{}
	for i, st := range p.steps {
		for _, v := range st.reads() {
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
	for _, o := range outVals {
		p.outRefs = append(p.outRefs, p.resolve(o))
	}
	for i, st := range p.steps {
		for _, o := range st.node.Outputs() {
			if last[o] == i && !outputs[o] && o.Name != "" {
				st.free = append(st.free, p.slots[o])
			}
		}
	}
	for v, i := range last {
		if v.Graph() != g || outputs[v] || v.Producer() == nil {
			continue
		}
		if _, ok := p.consts[v]; ok {
			continue
		}
		sl, ok := p.slots[v]
		if ok && v.Producer() != p.steps[i].node {
			p.steps[i].free = append(p.steps[i].free, sl)
		}
	}
	finishFused(p)
	for _, t := range p.consts {
		if k, cb, _ := storageKey(t); k != 0 && !s.constKeys[k] {
			s.constKeys[k] = true
			s.constBytes += cb
		}
	}
	if err := s.packWeights(p); err != nil {
		return nil, err
	}
	return p, nil
}

// pureOps are the ONNX ops whose outputs depend on their inputs and
// attributes only (no randomness, no subgraphs): a step of one of them
// whose inputs are constants is folded when the session is made, and one
// whose inputs are frozen is cached from run to run.
var pureOps = map[string]bool{
	"Identity": true, "Cast": true, "CastLike": true, "Reshape": true, "Unsqueeze": true,
	"Squeeze": true, "Flatten": true, "Concat": true, "Gather": true, "GatherElements": true,
	"Slice": true, "Split": true, "Transpose": true, "Expand": true, "Tile": true,
	"ConstantOfShape": true, "Range": true, "Where": true, "Equal": true, "Less": true,
	"LessOrEqual": true, "Greater": true, "GreaterOrEqual": true, "And": true, "Or": true,
	"Xor": true, "Not": true, "Add": true, "Sub": true, "Mul": true, "Div": true, "Mod": true,
	"Pow": true, "Neg": true, "Abs": true, "Sqrt": true, "Reciprocal": true, "Floor": true,
	"Ceil": true, "Round": true, "Sign": true, "Exp": true, "Log": true, "Sin": true, "Cos": true,
	"Max": true, "Min": true, "Sum": true, "Mean": true, "Clip": true, "ReduceSum": true,
	"ReduceProd": true, "ReduceMax": true, "ReduceMin": true, "ReduceMean": true, "CumSum": true,
	"Trilu": true, "ScatterND": true, "ScatterElements": true, "Pad": true, "Sigmoid": true,
	"Tanh": true, "Erf": true, "Relu": true, "Softmax": true, "MatMul": true, "Einsum": true,
}

// fold runs a step whose inputs are all constants once, at compile time.
// It returns nil outputs when the kernel fails (the error is the node's
// then, at run time) or the outputs are too large to keep a copy of (the
// step then runs every time).
func (s *Session) fold(st *step) ([]*Tensor, error) {
	for i, r := range st.in {
		st.ins[i] = r.k
	}
	c := &Call{Node: st.node, Opset: st.opset, attrs: st.attrs, opts: &s.opts, sess: s, step: st}
	outs, err := s.callKernel(c, st, st.ins)
	clear(st.ins)
	if err != nil {
		return nil, err
	}
	for _, t := range outs {
		if t != nil && (t.notTensor() || (st.node.OpType != "Constant" && t.Len() > memoMaxElems)) {
			return nil, nil
		}
	}
	for _, t := range outs {
		if t != nil {
			t.frozen = true
		}
	}
	return outs, nil
}

// resolve finds where a step of p reads v.
func (p *plan) resolve(v *graph.Value) ref {
	if v == nil {
		return ref{slot: refAbsent}
	}
	for q, up := p, 0; q != nil; q, up = q.parent, up+1 {
		if t, ok := q.consts[v]; ok && !q.isInput[v] {
			return ref{k: t, v: v}
		}
		if sl, ok := q.slots[v]; ok {
			return ref{up: up, slot: sl, v: v}
		}
	}
	return ref{slot: refMissing, v: v}
}

func isHalf(dt graph.DataType) bool { return dt == graph.Float16 || dt == graph.BFloat16 }

// widened returns the float32 copy of the float16 or bfloat16 constant t,
// made once per session.
func (s *Session) widened(t *Tensor) *Tensor {
	if w := s.wide[t]; w != nil {
		return w
	}
	if s.wide == nil {
		s.wide = map[*Tensor]*Tensor{}
	}
	w := castTensor(t, graph.Float)
	w.frozen = true
	s.wide[t] = w
	s.packed += int64(4 * w.Len())
	return w
}

func opName(n *graph.Node) string {
	if d := normDomain(n.Domain); d != "" {
		return d + "." + n.OpType
	}
	return n.OpType
}

func resolveAttrs(n *graph.Node, refs map[string]*graph.Attr) attrList {
	var l attrList
	for _, a := range n.Attrs {
		if r := a.RefAttrName(); r != "" {
			if ra := refs[r]; ra != nil {
				l = append(l, namedAttr{name: a.Name(), a: ra, s: ra.String()})
			}
			continue
		}
		l = append(l, namedAttr{name: a.Name(), a: a, s: a.String()})
	}
	return l
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

// budget is the session's memory budget.
func (s *Session) budget() *Budget {
	if s.opts.Budget != nil {
		return s.opts.Budget
	}
	return processBudget
}

// Run computes the model's outputs from inputs keyed by graph input name.
// Graph inputs that are also initializers may be left out.
func (s *Session) Run(inputs map[string]*Tensor) (map[string]*Tensor, error) {
	return s.RunInto(inputs, nil)
}

// RunInto is Run, with the outputs of 256 MiB or more that a
// matrix product makes (a language model's logits: 1 GB for 8192
// positions of a vocabulary of 32000) written into sp as they are made,
// a block of rows at a time whose pages leave the process behind the
// writing: such an output never is in memory whole. Those outputs are
// sp's (valid until sp.Close, like the tensors sp.Tensor returns). A nil
// sp is Run.
func (s *Session) RunInto(inputs map[string]*Tensor, sp *Spill) (map[string]*Tensor, error) {
	s.sink = sp
	defer func() { s.sink = nil }()
	g := s.model.Graph
	p := s.main
	if p == nil {
		return nil, errClosed
	}
	e := newEnv(p, nil)
	tr := s.spare
	if tr == nil {
		tr = newTracker(&s.pool, s.constKeys)
	}
	tr.reset()
	tr.budget = s.budget()
	s.spare, s.tr = nil, tr
	defer func() {
		tr.giveAll()
		s.tr, s.spare = nil, tr
	}()
	for i, v := range g.Inputs {
		t, ok := inputs[v.Name]
		if !ok || t == nil {
			if v.Const != nil {
				e.vals[p.inSlots[i]] = p.inDefs[i]
				continue
			}
			return nil, fmt.Errorf("input %q is missing", v.Name)
		}
		if err := checkInput(v, t, !s.opts.IgnoreDeclaredShapes); err != nil {
			return nil, err
		}
		e.vals[p.inSlots[i]] = t
		tr.input(t)
	}
	for name := range inputs {
		if !hasInput(g, name) {
			return nil, fmt.Errorf("the model has no input %q", name)
		}
	}
	if err := s.exec(p, e); err != nil {
		return nil, err
	}
	out := make(map[string]*Tensor, len(s.outs))
	for i, v := range s.outs {
		t := e.read(&p.outRefs[i])
		if t == nil {
			return nil, fmt.Errorf("output %q was not computed", v.Name)
		}
		if s.shared(t) {
			// A constant or a cached output (or a view of a constant):
			// the caller gets a copy, which it may change.
			t = t.Clone()
		}
		out[v.Name] = t
	}
	s.pool.trim(2 * tr.peak)
	s.stats = RunStats{PeakLiveBytes: tr.peak, RequiredBytes: tr.required(), ConstBytes: s.constBytes,
		InputBytes: tr.inBytes, PackedBytes: s.packed, PoolBytes: s.pool.bytes, Steps: tr.step, BlockwiseAttention: tr.blockwise, MappedBytes: s.mappedBytes()}
	return out, nil
}

// ErrNotComputed is wrapped by Eval's error for a name the session does
// not compute as a value of its own: no value of the main graph, or one
// inside a fused attention step.
var ErrNotComputed = errors.New("the session does not compute this value")

// Eval computes the named values of the main graph (graph inputs,
// initializers, node outputs) from inputs, running only the steps they
// depend on with the session's compiled steps and constants: probes of
// intermediate values need no second session. The tensors returned are
// the caller's.
func (s *Session) Eval(inputs map[string]*Tensor, names []string) (map[string]*Tensor, error) {
	g := s.model.Graph
	p := s.main
	if p == nil {
		return nil, errClosed
	}
	if s.producer == nil {
		s.producer = map[*graph.Value]int{}
		for i, st := range p.steps {
			for k, sl := range st.outs {
				if sl >= 0 {
					s.producer[st.node.Output(k)] = i
				}
			}
		}
	}
	need := make([]bool, len(p.steps))
	var todo []int
	mark := func(v *graph.Value) {
		if i, ok := s.producer[v]; ok && !need[i] {
			need[i] = true
			todo = append(todo, i)
		}
	}
	refs := make([]ref, len(names))
	for k, name := range names {
		v := g.Lookup(name)
		if v == nil || name == "" {
			return nil, fmt.Errorf("kernels: Eval: the main graph has no value %q: %w", name, ErrNotComputed)
		}
		refs[k] = p.resolve(v)
		_, produced := s.producer[v]
		if refs[k].k == nil && !produced && !p.isInput[v] {
			return nil, fmt.Errorf("kernels: Eval: value %q: %w (it is inside a fused attention step)", name, ErrNotComputed)
		}
		mark(v)
	}
	for len(todo) > 0 {
		st := p.steps[todo[len(todo)-1]]
		todo = todo[:len(todo)-1]
		for _, v := range st.reads() {
			mark(v)
		}
		for _, sg := range st.node.Subgraphs() {
			for _, v := range outerReads(sg) {
				mark(v)
			}
		}
	}
	e := newEnv(p, nil)
	for i, v := range g.Inputs {
		t := inputs[v.Name]
		if t == nil {
			e.vals[p.inSlots[i]] = p.inDefs[i]
			continue
		}
		if err := checkInput(v, t, !s.opts.IgnoreDeclaredShapes); err != nil {
			return nil, err
		}
		e.vals[p.inSlots[i]] = t
	}
	for name := range inputs {
		if !hasInput(g, name) {
			return nil, fmt.Errorf("the model has no input %q", name)
		}
	}
	// Untracked (fresh storage, never pooled), and nothing freed: the
	// values asked for may be last read by a step that runs.
	s.tr, s.keepAll = nil, true
	defer func() { s.keepAll = false }()
	for i, st := range p.steps {
		if need[i] {
			if err := s.execStep(st, e); err != nil {
				return nil, err
			}
		}
	}
	out := make(map[string]*Tensor, len(names))
	for k, name := range names {
		t := e.read(&refs[k])
		if t == nil {
			return nil, fmt.Errorf("kernels: Eval: value %q was not computed (an input left out?)", name)
		}
		if s.shared(t) {
			t = t.Clone()
		}
		out[name] = t
	}
	return out, nil
}

// shared reports whether t is, or is a view of, storage the session keeps
// from run to run.
func (s *Session) shared(t *Tensor) bool {
	if t.notTensor() {
		return false
	}
	if t.frozen {
		return true
	}
	k, _, _ := storageKey(t)
	return k != 0 && s.constKeys[k]
}

func hasInput(g *graph.Graph, name string) bool {
	for _, v := range g.Inputs {
		if v.Name == name {
			return true
		}
	}
	return false
}

func checkInput(v *graph.Value, t *Tensor, shapes bool) error {
	if v.Type == nil || !v.Type.IsTensor() {
		return nil
	}
	if t.notTensor() {
		return fmt.Errorf("input %q: got a sequence, the model declares %v", v.Name, v.Type)
	}
	if dt := v.Type.ElemType(); dt != graph.Undefined && dt != t.DType {
		return fmt.Errorf("input %q: got %v, the model declares %v", v.Name, t, v.Type)
	}
	// The rank and the fixed sizes of a declared shape must hold (symbolic
	// dimensions take any size); every conformance case and corpus model
	// feeds data of its declared shape.
	dims, ok := v.Type.Shape()
	if !ok || !shapes {
		return nil
	}
	if len(dims) != len(t.Shape) {
		return fmt.Errorf("input %q: got %v, the model declares %v", v.Name, t, v.Type)
	}
	for i, d := range dims {
		if d.Known && int(d.Value) != t.Shape[i] {
			return fmt.Errorf("input %q: got %v, the model declares %v (dimension %d)", v.Name, t, v.Type, i)
		}
	}
	return nil
}

// exec runs p's steps in e (whose inputs are bound).
func (s *Session) exec(p *plan, e *env) error {
	for _, st := range p.steps {
		if err := s.execStep(st, e); err != nil {
			return err
		}
	}
	return nil
}

// execStep runs one step in e. A fused attention step whose kernel
// declines the run's tensors runs its chain's original steps instead.
func (s *Session) execStep(st *step, e *env) error {
	tr := s.tr
	n := st.node
	// A step never runs inside itself, so its input slice and Call
	// are reused from run to run (kernels keep neither).
	ins := st.ins
	frozen := true
	for i := range st.in {
		r := &st.in[i]
		t := e.read(r)
		if t == nil {
			if r.slot == refAbsent {
				ins[i] = nil
				continue
			}
			if st.attn != nil {
				clear(ins)
				return s.execChain(st, e)
			}
			return fmt.Errorf("node %q (%s): input %q has no value", n.Name, opName(n), r.v.Name)
		}
		frozen = frozen && t.frozen
		ins[i] = t
	}
	if tr != nil {
		tr.step++
	}
	var outs []*Tensor
	switch m := &st.memo; {
	case m.kind == memoPure && frozen || m.kind == memoShape && ins[0] != nil && !ins[0].notTensor():
		if m.outs != nil && m.hit(ins) {
			outs = m.outs
			break
		}
		// Compute untracked (fresh storage, never pooled) and keep.
		c := &st.call
		*c = Call{Node: n, Opset: st.opset, attrs: st.attrs, opts: &s.opts, sess: s, step: st, env: e}
		var err error
		if outs, err = s.callKernel(c, st, ins); err != nil {
			return err
		}
		if !m.keep(ins, outs) {
			// Too large to cache: release it like any output, but
			// an input the kernel returned (Identity, a Cast to the
			// same type) stays frozen.
			m.kind = memoNone
			for _, t := range outs {
				if t != nil && !slices.Contains(ins, t) {
					t.frozen = false
				}
			}
		}
	default:
		c := &st.call
		*c = Call{Node: n, Opset: st.opset, attrs: st.attrs, opts: &s.opts, sess: s, step: st, env: e, tr: tr, allocs: c.allocs[:0]}
		var err error
		if outs, err = s.callKernel(c, st, ins); err != nil {
			if st.attn != nil && errors.Is(err, errUnfusable) {
				if tr != nil {
					tr.step--
				}
				clear(ins)
				return s.execChain(st, e)
			}
			return err
		}
	}
	for i, sl := range st.outs {
		if sl < 0 || i >= len(outs) {
			continue
		}
		t := outs[i]
		if t == nil {
			return fmt.Errorf("node %q (%s): output %d was not computed", n.Name, opName(n), i)
		}
		e.vals[sl] = t
		if tr != nil && !t.frozen {
			if err := tr.hold(t, &st.call); err != nil {
				return &NodeError{Node: n.Name, Op: opName(n), Opset: st.opset, Inputs: shapesOf(ins), Err: err}
			}
		}
	}
	for _, sl := range st.free {
		if s.keepAll {
			break
		}
		if tr != nil {
			if t := e.vals[sl]; t != nil && !t.frozen {
				tr.planDrop(t)
				tr.release(t)
			}
		}
		e.vals[sl] = nil
	}
	if tr != nil {
		if st.call.tr != nil {
			st.call.dropTemps()
		}
		tr.endStep()
	}
	clear(ins)
	return nil
}

// execChain runs the original steps of a fused attention step (the last
// of them frees what the fused step would).
func (s *Session) execChain(st *step, e *env) error {
	for _, cs := range st.attn.steps {
		if err := s.execStep(cs, e); err != nil {
			return err
		}
	}
	return nil
}

// hit reports whether ins are the inputs the cached outputs were made of.
func (m *memo) hit(ins []*Tensor) bool {
	if m.kind == memoShape {
		return slices.Equal(m.shape, ins[0].Shape)
	}
	if len(ins) != len(m.ins) {
		return false
	}
	for i, t := range ins {
		if m.ins[i] != t {
			return false
		}
	}
	return true
}

// keep caches outs as the outputs of ins, when they are small enough, and
// marks them frozen.
func (m *memo) keep(ins, outs []*Tensor) bool {
	for _, t := range outs {
		if t != nil && (t.notTensor() || t.Len() > memoMaxElems) {
			return false
		}
	}
	if m.kind == memoShape {
		m.shape = append(m.shape[:0], ins[0].Shape...)
	} else {
		m.ins = append(m.ins[:0], ins...)
	}
	m.outs = append(m.outs[:0], outs...)
	for _, t := range outs {
		if t != nil {
			t.frozen = true
		}
	}
	return true
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
		sl, ok := p.slots[v]
		if !ok {
			continue
		}
		if t := e.vals[sl]; t != nil {
			if !t.frozen {
				s.tr.planDrop(t)
				s.tr.leave(t)
			}
			e.vals[sl] = nil
		}
	}
}

// halfRule says where a kernel that is not Native has its type T, the
// type whose float16/bfloat16 the executor widens to float32 and rounds
// the kernel's float32 outputs back to: the type of input in, for the
// outputs in outs (bit i for output i; 0 means all). Ops missing from
// halfRules have T at input 0 for all outputs.
type halfRule struct {
	in   int
	outs uint64
}

func (r halfRule) isT(i int) bool { return r.outs == 0 || i < 64 && r.outs&(1<<i) != 0 }

// halfRules are the ops (by opName) whose T is not input 0 or not every
// output's type.
var halfRules = map[string]halfRule{
	"Where": {in: 1},
	// Mean and InvStdDev have type U (stash_type, float32 by default).
	"LayerNormalization":                             {outs: 1},
	"SimplifiedLayerNormalization":                   {outs: 1},
	"com.microsoft.SimplifiedLayerNormalization":     {outs: 1},
	"com.microsoft.SkipLayerNormalization":           {outs: 1 | 1<<3},
	"com.microsoft.SkipSimplifiedLayerNormalization": {outs: 1 | 1<<3},
	// T is the type of the embeddings; mask_index is int32.
	"com.microsoft.EmbedLayerNormalization": {in: 2, outs: 1 | 1<<2},
	// T is the float type of the scales and bias (inputs 0 and 1 are
	// quantized integers).
	"com.microsoft.QAttention":           {in: 2},
	"com.microsoft.MatMulIntegerToFloat": {in: 2},
}

// debugPanics reports whether ONNXPE_DEBUG=1 asks for kernel panic stacks.
var debugPanics = os.Getenv("ONNXPE_DEBUG") == "1"

// callKernel runs one node: a model-local function body or a kernel, with
// float16/bfloat16 widening for kernels that are not Native. A kernel
// panic becomes an error wrapping ErrInternal.
func (s *Session) callKernel(c *Call, st *step, ins []*Tensor) (outs []*Tensor, err error) {
	n := c.Node
	defer func() {
		if r := recover(); r != nil {
			var stack []byte
			if wp, ok := r.(workerPanic); ok {
				r, stack = wp.val, wp.stack
			}
			if ae, ok := r.(allocError); ok {
				// reserve refused a tensor: an error of the model.
				err = ae.err
			} else if tp, ok := r.(typePanic); ok {
				// A helper met an element type the kernel does not
				// handle: the model fed it one.
				err = fmt.Errorf("%s: %w", strings.TrimPrefix(string(tp), "kernels: "), ErrUnsupportedType)
			} else {
				if stack == nil {
					stack = debug.Stack()
				}
				err = fmt.Errorf("%w: %s", ErrInternal, strings.Join(strings.Fields(fmt.Sprint(r)), " "))
				if s.opts.PanicStacks || debugPanics {
					fmt.Fprintf(os.Stderr, "onnxpe: panic in node %q (%s): %v\n%s\n", n.Name, opName(n), r, stack)
				}
			}
		}
		if err != nil {
			// ins are the step's inputs as the model has them (the
			// kernel saw widened copies in st.kins).
			err = &NodeError{Node: n.Name, Op: opName(n), Opset: c.Opset, Inputs: shapesOf(ins), Err: err}
		}
	}()
	if st.fn != nil {
		return s.callFunction(st.fn, ins)
	}
	if err := checkTensorInputs(st, ins); err != nil {
		return nil, err
	}
	if !st.small || !st.strings {
		for _, t := range ins {
			if t != nil && !t.notTensor() && (!st.small && smallType(t.DType) || !st.strings && t.DType == graph.String) {
				return nil, fmt.Errorf("an input of type %v: %w", t.DType, ErrUnsupportedType)
			}
		}
	}
	var half graph.DataType
	kins := ins
	if st.entry.flags&Native == 0 {
		if i := st.half.in; i < len(ins) && ins[i] != nil && !ins[i].notTensor() && isHalf(ins[i].DType) {
			half = ins[i].DType
		}
		copied := false
		for i, t := range ins {
			if t == nil || t.notTensor() || !isHalf(t.DType) {
				continue
			}
			if !copied {
				// The widened inputs go to a copy: ins stay the model's
				// values (for errors, and for the memo of the step).
				kins, copied = append(st.kins[:0], ins...), true
				st.kins = kins
			}
			if st.wide != nil && st.wide[i] != nil && i < len(st.in) && st.in[i].k == t {
				kins[i] = st.wide[i]
			} else if i == 1 && st.halfB && st.in[1].k == t {
				kins[i] = t
			} else {
				kins[i] = castC(c, t, graph.Float)
			}
		}
		if copied {
			defer clear(kins) // outside the loop: an open-coded defer
		}
	}
	c.half = half
	outs, err = st.entry.fn(c, kins)
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
			if t == nil || t.DType != graph.Float || t.notTensor() || !st.half.isT(i) {
				continue
			}
			outs[i] = castC(c, t, half)
		}
	}
	return outs, nil
}

func (s *Session) callFunction(p *plan, ins []*Tensor) ([]*Tensor, error) {
	e := newEnv(p, nil)
	e.bindInputs(ins)
	if err := s.exec(p, e); err != nil {
		return nil, err
	}
	outs := make([]*Tensor, len(p.g.Outputs))
	for i := range p.g.Outputs {
		outs[i] = e.read(&p.outRefs[i])
	}
	s.leave(p, e, p.g.Outputs)
	return outs, nil
}

// runGraph runs subgraph plan p with its inputs bound to ins, reading outer
// values from parent.
func (s *Session) runGraph(p *plan, parent *env, ins []*Tensor) ([]*Tensor, error) {
	e := newEnv(p, parent)
	e.bindInputs(ins)
	if err := s.exec(p, e); err != nil {
		return nil, err
	}
	outs := make([]*Tensor, len(p.g.Outputs))
	for i, v := range p.g.Outputs {
		outs[i] = e.read(&p.outRefs[i])
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
	attrs attrList
	opts  *Options
	sess  *Session
	step  *step
	env   *env
	// tr is the run's storage tracker (nil outside a run); allocs are the
	// buffers alloc handed out during this call.
	tr     *tracker
	allocs []*Tensor
	// half is the float16/bfloat16 type the executor rounds this call's
	// float32 outputs to (0: none); kernels computing in float64 then
	// round to float32 with roundTo32For16, so that there is one rounding.
	half graph.DataType
}

// Attr returns the attribute name, or nil.
func (c *Call) Attr(name string) *graph.Attr { return c.attrs.attr(name) }

// Int returns an int attribute or def.
func (c *Call) Int(name string, def int64) int64 {
	if a := c.attrs.attr(name); a != nil {
		return a.Int()
	}
	return def
}

// Float returns a float attribute or def.
func (c *Call) Float(name string, def float32) float32 {
	if a := c.attrs.attr(name); a != nil {
		return a.Float()
	}
	return def
}

// String returns a string attribute or def.
func (c *Call) String(name, def string) string {
	if na := c.attrs.get(name); na != nil {
		return na.s
	}
	return def
}

// Ints returns an ints attribute, or nil.
func (c *Call) Ints(name string) []int64 {
	if a := c.attrs.attr(name); a != nil {
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
	a := c.attrs.attr(name)
	if a == nil || a.Graph == nil {
		return nil, fmt.Errorf("attribute %s is not a graph", name)
	}
	p := c.step.subs[a.Graph]
	if p == nil {
		return nil, fmt.Errorf("attribute %s: subgraph was not compiled", name)
	}
	return c.sess.runGraph(p, c.env, ins)
}
