package rewrite

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/work"
	"slices"
	"strings"
)

// Domains of the fused ops the rewrites emit.
const (
	DomainMicrosoft = "com.microsoft"
	DomainOnnxpe    = "ai.onnxpe"
)

// ErrRewrite marks a rewrite the model does not allow (an op the opset
// upgrade cannot convert, a layout the fused op cannot take), as opposed
// to a defect of onnxpe.
var ErrRewrite = errors.New("cannot rewrite")

// Change is what one rewrite pass did to the model.
type Change struct {
	Pass   string `json:"pass"`
	Scheme string `json:"scheme"`
	// Layers are the attention blocks whose encoding was rewritten.
	Layers []int `json:"layers"`
	// Removed and Added are the nodes taken out and put in (names).
	Removed []string `json:"nodes_removed"`
	Added   []string `json:"nodes_added"`
	// ConstBytes is the size of the constants added (tables, caches).
	ConstBytes int64 `json:"constant_bytes_added"`
	// Notes say how something was rewritten (a cache kept computed).
	Notes []string `json:"notes,omitempty"`
	// Skipped are the findings left as they were, with the reason.
	Skipped []string `json:"skipped,omitempty"`
}

// reason is the message of a rewrite error without the ErrRewrite prefix.
func Reason(err error) string {
	return strings.TrimPrefix(err.Error(), ErrRewrite.Error()+": ")
}

func (ch *Change) Note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if !slices.Contains(ch.Notes, s) {
		ch.Notes = append(ch.Notes, s)
	}
}

func (ch *Change) Skip(f *passes.Finding, format string, args ...any) {
	ch.Skipped = append(ch.Skipped, fmt.Sprintf("%s (layers %v): %s", f.Scheme, f.Layers, fmt.Sprintf(format, args...)))
}

// Rewrite is the model the rewrite passes edit: a copy of the caller's
// model in which every node keeps its name, inputs, outputs and
// attributes until a pass replaces it, and what each pass did.
type Rewrite struct {
	// M is the rewritten model. External tensors still refer to the
	// original's side files.
	M       *graph.Model
	Changes []*Change
	Opts    passes.RewriteOptions

	live0   map[*graph.Node]bool // nodes that reached an output before any edit
	called0 map[*graph.Function]bool
	init0   map[*graph.Value]bool // initializers read before any edit
	added   map[*graph.Node]bool
	tables  map[string]*graph.Value // constants by content
	Memo    map[string]*graph.Value // values built once (position ids, shapes)
	Cur     *Change
	Work    *work.Work // the working copy of the original, for shapes
	// KV is what --add-kv-cache added (nil: nothing).
	KV *KVCache
}

// rank is the rank of a value of the rewritten model, from its declared
// type or the shape inferred for the original value of that name (-1 when
// unknown).
func (r *Rewrite) Rank(v *graph.Value) int {
	if v == nil {
		return -1
	}
	if v.Type != nil {
		if dims, ok := v.Type.Shape(); ok {
			return len(dims)
		}
	}
	if r.Work != nil {
		if wv := WorkValue(r.Work, v.Name); wv != nil {
			return r.Work.Shape(wv).Rank()
		}
	}
	return -1
}

// Edit makes the copy of the model that the rewrite passes change.
var Edit = &passes.Pass[*Rewrite]{
	Name: "edit",
	Doc: `Copy the model for the rewrite passes.

The copy keeps every node, value and name of the original; external
tensors stay in the original's side files until the result is saved.
The rewrite passes replace the nodes of findings in it, each removing
what its edits left unused (and nothing the original did not use).`,
	Requires: []passes.Analyzer{work.Normalize},
	Run: func(c *passes.Context) (*Rewrite, error) {
		r, err := NewRewrite(c.Model, c.Options.Rewrite)
		if r != nil {
			r.Work = work.Of(c)
		}
		return r, err
	},
}

func NewRewrite(m *graph.Model, opts passes.RewriteOptions) (*Rewrite, error) {
	c := m.Clone()
	r := &Rewrite{M: c, Opts: opts, added: map[*graph.Node]bool{}, tables: map[string]*graph.Value{}, Memo: map[string]*graph.Value{}}
	r.live0 = liveNodes(c.Graph)
	r.called0 = calledFunctions(c)
	r.init0 = map[*graph.Value]bool{}
	for _, v := range c.Graph.Initializers {
		if v.NumUses() > 0 || v.IsGraphOutput() {
			r.init0[v] = true
		}
	}
	return r, nil
}

// liveNodes lists the nodes of g whose outputs reach g's outputs.
func liveNodes(g *graph.Graph) map[*graph.Node]bool {
	live := map[*graph.Node]bool{}
	var stack []*graph.Node
	push := func(v *graph.Value) {
		if v == nil {
			return
		}
		if p := v.Producer(); p != nil && p.Graph() == g && !live[p] {
			live[p] = true
			stack = append(stack, p)
		}
	}
	for _, o := range g.Outputs {
		push(o)
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, in := range n.Inputs() {
			push(in)
		}
		for _, sg := range n.Subgraphs() {
			sg.Walk(func(m *graph.Node) {
				for _, in := range m.Inputs() {
					if in != nil && in.Graph() == g {
						push(in)
					}
				}
			})
			for _, o := range sg.Outputs {
				if o.Graph() == g {
					push(o)
				}
			}
		}
	}
	return live
}

// begin starts the change record of a pass.
func (r *Rewrite) Begin(pass, scheme string) *Change {
	ch := &Change{Pass: pass, Scheme: scheme, Removed: []string{}, Added: []string{}, Layers: []int{}}
	r.Changes = append(r.Changes, ch)
	r.Cur = ch
	return ch
}

// end removes what the pass's edits left unused: nodes and initializers
// that reached the outputs before any edit and do not any more.
func (r *Rewrite) End(ch *Change) {
	g := r.M.Graph
	live := liveNodes(g)
	var dead []*graph.Node
	for _, n := range g.Nodes() {
		if !live[n] && (r.live0[n] || r.added[n]) {
			dead = append(dead, n)
		}
	}
	// Remove consumers before producers.
	for changed := true; changed; {
		changed = false
		for i := len(dead) - 1; i >= 0; i-- {
			n := dead[i]
			if n == nil {
				continue
			}
			if g.Remove(n) == nil {
				name := work.NodeName(n)
				if r.added[n] {
					delete(r.added, n)
					ch.Added = slices.DeleteFunc(ch.Added, func(s string) bool { return s == name })
				} else {
					ch.Removed = append(ch.Removed, name)
				}
				dead[i] = nil
				changed = true
			}
		}
	}
	removed := map[*graph.Value]bool{}
	g.Initializers = slices.DeleteFunc(g.Initializers, func(v *graph.Value) bool {
		gone := v.NumUses() == 0 && !v.IsGraphOutput() && !v.IsGraphInput() && (r.init0[v] || r.isTable(v))
		if gone {
			removed[v] = true
			if t := v.Const; t != nil && r.isTable(v) {
				ch.ConstBytes -= t.ByteSize()
			}
		}
		return gone
	})
	for k, v := range r.tables {
		if removed[v] {
			delete(r.tables, k)
		}
	}
	for k, v := range r.Memo {
		if p := v.Producer(); p != nil && !slices.Contains(g.Nodes(), p) || removed[v] {
			delete(r.Memo, k)
		}
	}
	slices.Sort(ch.Layers)
	ch.Layers = slices.Compact(ch.Layers)
	r.Cur = nil
}

func (r *Rewrite) isTable(v *graph.Value) bool {
	for _, t := range r.tables {
		if t == v {
			return true
		}
	}
	return false
}

// lookup finds a value of the main graph by name.
func (r *Rewrite) Lookup(name string) (*graph.Value, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: a value the rewrite needs has no name in the model", ErrRewrite)
	}
	v := r.M.Graph.Lookup(name)
	if v == nil || v.Graph() != r.M.Graph {
		return nil, fmt.Errorf("%w: %q is not a value of the main graph", ErrRewrite, name)
	}
	return v, nil
}

// op adds a node to the main graph and returns its outputs; the node is
// named after the pass and op type.
func (r *Rewrite) Op(opType, domain string, ins []*graph.Value, nOut int, attrs ...*graph.Attr) []*graph.Value {
	g := r.M.Graph
	n := g.NewNode(opType, domain, ins, nOut, attrs...)
	prefix := "onnxpe"
	if r.Cur != nil {
		prefix = "onnxpe/" + strings.TrimPrefix(r.Cur.Pass, "rewrite_")
	}
	n.Name = r.M.NewName(prefix + "/" + opType)
	g.Append(n)
	r.added[n] = true
	if r.Cur != nil {
		r.Cur.Added = append(r.Cur.Added, n.Name)
	}
	return n.Outputs()
}

// op1 is op for a node of the ONNX domain with one output.
func (r *Rewrite) Op1(opType string, ins []*graph.Value, attrs ...*graph.Attr) *graph.Value {
	return r.Op(opType, "", ins, 1, attrs...)[0]
}

// table adds a constant, or returns the one added before with the same
// type, shape and elements (caches shared by layers).
func (r *Rewrite) Table(name string, dt graph.DataType, dims []int64, vals []float64) (*graph.Value, error) {
	t, err := graph.TensorFromFloat64(name, dt, dims, vals)
	if err != nil {
		return nil, err
	}
	return r.AddConst(t)
}

func (r *Rewrite) AddConst(t *graph.Tensor) (*graph.Value, error) {
	raw, err := t.RawBytes()
	if err != nil {
		return nil, err
	}
	h := sha256.Sum256(raw)
	key := fmt.Sprintf("%v%v%x", t.DataType(), t.Dims(), h)
	if v, ok := r.tables[key]; ok {
		return v, nil
	}
	t.SetName(r.M.NewName(t.Name()))
	v := r.M.Graph.AddInitializer(t)
	r.tables[key] = v
	if r.Cur != nil {
		r.Cur.ConstBytes += t.ByteSize()
	}
	return v, nil
}

// ints is a small int64 constant (shapes, axes, indices).
func (r *Rewrite) Ints(dims []int64, v ...int64) *graph.Value {
	t, err := graph.NewTensor("onnxpe_const", graph.Int64, dims, v)
	if err != nil {
		panic("passes: " + err.Error())
	}
	c, err := r.AddConst(t)
	if err != nil {
		panic("passes: " + err.Error())
	}
	return c
}

// scalarInt is an int64 scalar constant.
func (r *Rewrite) ScalarInt(v int64) *graph.Value { return r.Ints(nil, v) }

// vecInt is a 1-D int64 constant.
func (r *Rewrite) VecInt(v ...int64) *graph.Value { return r.Ints([]int64{int64(len(v))}, v...) }

// opset is the version of the default domain the rewritten model imports.
func (r *Rewrite) Opset() int64 {
	if v := r.M.OpsetVersion(""); v != 0 {
		return v
	}
	return graph.AssumedOpset("")
}

// unsqueeze adds axes of size 1 (Unsqueeze's axes are an input from opset
// 13, an attribute before).
func (r *Rewrite) Unsqueeze(v *graph.Value, axes ...int64) *graph.Value {
	if r.Opset() >= 13 {
		return r.Op1("Unsqueeze", []*graph.Value{v, r.VecInt(axes...)})
	}
	return r.Op1("Unsqueeze", []*graph.Value{v}, graph.IntsAttr("axes", axes...))
}

// dimOf is dimension axis of v's shape as a [1] int64 value.
func (r *Rewrite) DimOf(v *graph.Value, axes ...int64) *graph.Value {
	key := fmt.Sprintf("dim|%s|%v", v.Name, axes)
	if d, ok := r.Memo[key]; ok {
		return d
	}
	d := Typed(r.Op1("Gather", []*graph.Value{r.ShapeOf(v), r.VecInt(axes...)}, graph.IntAttr("axis", 0)), graph.Int64, 1)
	r.Memo[key] = d
	return d
}

// shapeOf is Shape(v).
func (r *Rewrite) ShapeOf(v *graph.Value) *graph.Value {
	key := "shape|" + v.Name
	if d, ok := r.Memo[key]; ok {
		return d
	}
	s := Typed(r.Op1("Shape", []*graph.Value{v}), graph.Int64, 1)
	r.Memo[key] = s
	return s
}

// castInt64 casts v to int64 unless it is.
func (r *Rewrite) CastInt64(v *graph.Value, dt graph.DataType) *graph.Value {
	if dt == graph.Int64 {
		return v
	}
	return r.Op1("Cast", []*graph.Value{v}, graph.IntAttr("to", int64(graph.Int64)))
}

// typed gives v, a value a rewrite made, a declared type (its value_info);
// a value that has one (an input the rewrite reads) keeps it.
func Typed(v *graph.Value, dt graph.DataType, rank int) *graph.Value {
	if v.Type != nil || !dt.Known() || dt == graph.Undefined {
		return v
	}
	if rank < 0 {
		v.Type = graph.TensorType(dt, nil)
		return v
	}
	v.Type = graph.TensorType(dt, make([]graph.Dim, rank))
	return v
}

// finish completes the rewritten model: opset imports for the domains of
// the new nodes, value_info for the values they compute, the default
// domain upgraded when a new node needs a newer opset, topological order.
func (r *Rewrite) Finish() error {
	g := r.M.Graph
	need := map[string]int64{}
	for _, n := range g.Nodes() {
		if !r.added[n] {
			continue
		}
		switch n.Domain {
		case DomainMicrosoft, DomainOnnxpe:
			need[n.Domain] = 1
		case "", "ai.onnx":
			if n.OpType == "RotaryEmbedding" || n.OpType == "Attention" {
				need[""] = max(need[""], 23)
			}
		}
	}
	for d, v := range need {
		if d == "" {
			if r.Opset() < v {
				if err := upgradeOpset(r.M, v, r.Rank); err != nil {
					return err
				}
			}
			continue
		}
		if r.M.OpsetVersion(d) == 0 {
			r.M.SetOpsetVersion(d, v)
		}
	}
	// value_info: drop the declarations of values no longer computed, add
	// those of new values.
	present := map[*graph.Value]bool{}
	for _, n := range g.Nodes() {
		for _, o := range n.Outputs() {
			present[o] = true
		}
	}
	declared := map[*graph.Value]bool{}
	g.ValueInfo = slices.DeleteFunc(g.ValueInfo, func(v *graph.Value) bool {
		declared[v] = true
		return v.Producer() != nil && !present[v] && v.Producer().Graph() == g
	})
	for _, n := range g.Nodes() {
		if !r.added[n] {
			continue
		}
		for _, o := range n.Outputs() {
			if o.Type != nil && !declared[o] && !o.IsGraphOutput() {
				g.ValueInfo = append(g.ValueInfo, o)
			}
		}
	}
	// Model-local functions the rewrite left uncalled.
	called := calledFunctions(r.M)
	r.M.Functions = slices.DeleteFunc(r.M.Functions, func(f *graph.Function) bool { return r.called0[f] && !called[f] })
	if err := g.TopoSort(); err != nil {
		return fmt.Errorf("rewritten graph: %w", err)
	}
	return nil
}

// calledFunctions lists the model-local functions a node of m calls
// (functions calling functions included).
func calledFunctions(m *graph.Model) map[*graph.Function]bool {
	out := map[*graph.Function]bool{}
	var visit func(n *graph.Node)
	visit = func(n *graph.Node) {
		f := m.Function(n.Domain, n.OpType, n.Overload)
		if f == nil || out[f] {
			return
		}
		out[f] = true
		f.Body.Walk(visit)
	}
	m.Graph.Walk(visit)
	return out
}

// Changed reports whether any pass changed the model.
func (r *Rewrite) Changed() bool {
	for _, ch := range r.Changes {
		if len(ch.Added) > 0 || len(ch.Removed) > 0 {
			return true
		}
	}
	return false
}

// rewriteOf is the rewrite a pass edits.
func Of(c *passes.Context) *Rewrite { return passes.Result(c, Edit) }

// mainName is the name of the value of the original's main graph that a
// value of the working copy stands for: its original value, or, for a
// value inlined from a model-local function, the output of the calling
// node it became (a function body's values have no place in the main
// graph). "" when there is none.
func MainName(w *work.Work, v *graph.Value) string {
	o := w.OrigValues.Of(v)
	if o == nil {
		return ""
	}
	if o.Graph() == w.Orig.Graph {
		return o.Name
	}
	call := w.OrigNode(v.Producer())
	if call == nil || call.Graph() != w.Orig.Graph {
		return ""
	}
	f := w.Orig.Function(call.Domain, call.OpType, call.Overload)
	if f == nil {
		return ""
	}
	for i, out := range f.Body.Outputs {
		if out == o && i < len(call.Outputs()) {
			return call.Output(i).Name
		}
	}
	return ""
}

// workValues maps the original names of the working copy's values back to
// them.
func WorkValue(w *work.Work, name string) *graph.Value {
	if w.ByOrig == nil {
		w.ByOrig = map[string]*graph.Value{}
		w.OrigValues.Each(func(v, o *graph.Value) {
			if old, ok := w.ByOrig[o.Name]; !ok || w.PosOf(v) > w.PosOf(old) {
				w.ByOrig[o.Name] = v
			}
		})
	}
	return w.ByOrig[name]
}

// Run runs the rewrite passes ps in ctx, the context of the model's audit
// (audit.AuditModel: what the passes require has run there and does not
// run again), and finishes the rewritten copy.
func Run(ctx *passes.Context, ps ...*passes.Pass[*Change]) (*Rewrite, error) {
	if err := ctx.Run(append([]passes.Analyzer{Edit}, passes.Analyzers(ps...)...)...); err != nil {
		return nil, err
	}
	r := passes.Result(ctx, Edit)
	if err := r.Finish(); err != nil {
		return nil, err
	}
	return r, nil
}

// node finds a node of the main graph by name (or first output's name).
func (r *Rewrite) Node(name string) *graph.Node {
	for _, n := range r.M.Graph.Nodes() {
		if work.NodeName(n) == name {
			return n
		}
	}
	return nil
}

// opsetOf is the version of n's domain in the rewritten model.
func (r *Rewrite) OpsetOf(n *graph.Node) int64 {
	if n.Domain == "" || n.Domain == "ai.onnx" {
		return r.Opset()
	}
	if v := r.M.OpsetVersion(n.Domain); v != 0 {
		return v
	}
	return 1
}

// elemType is the declared element type of v (Undefined when unknown).
func ElemType(v *graph.Value) graph.DataType {
	if v == nil {
		return graph.Undefined
	}
	if v.Const != nil {
		return v.Const.DataType()
	}
	if v.Type != nil {
		return v.Type.ElemType()
	}
	if p := v.Producer(); p != nil && (p.OpType == "Cast") {
		return graph.DataType(p.AttrInt("to", 0))
	}
	return graph.Undefined
}

// width is the last dimension of v when the model states it.
func Width(v *graph.Value) int64 {
	var dims []graph.Dim
	switch {
	case v.Const != nil:
		d := v.Const.Dims()
		if len(d) > 0 {
			return d[len(d)-1]
		}
		return -1
	case v.Type != nil:
		var ok bool
		if dims, ok = v.Type.Shape(); !ok || len(dims) == 0 {
			return -1
		}
	default:
		return -1
	}
	if d := dims[len(dims)-1]; d.Known {
		return d.Value
	}
	return -1
}

// rowsAt gathers the rows of a cache at the positions pos: [B, S, w] for
// positions [B, S]; for the com.microsoft offset form (one element)
// offset+0..S-1, [1, S, w]; the cache itself when there are no positions
// (it is already [B, S, w]).
func (r *Rewrite) RowsAt(cache, pos *graph.Value, seq *graph.Value, offset bool) *graph.Value {
	switch {
	case pos == nil:
		return cache
	case offset:
		first := r.Op1("Reshape", []*graph.Value{r.CastInt64(pos, ElemType(pos)), r.Ints([]int64{0})})
		s := r.Op1("Reshape", []*graph.Value{seq, r.Ints([]int64{0})})
		rg := r.Op1("Range", []*graph.Value{first, r.Op1("Add", []*graph.Value{first, s}), r.ScalarInt(1)})
		return r.Unsqueeze(r.Op1("Gather", []*graph.Value{cache, rg}, graph.IntAttr("axis", 0)), 0)
	default:
		return r.Op1("Gather", []*graph.Value{cache, r.CastInt64(pos, ElemType(pos))}, graph.IntAttr("axis", 0))
	}
}
