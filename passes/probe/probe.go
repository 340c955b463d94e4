package probe

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes/work"
)

// Probe evaluates values of the working copy with the kernels for one
// choice of the model's free sizes: batch symbols take Batch, the sizes
// of a KV cache given as input Past, masks over cached and new tokens
// Past+Seq, the open height and width of an image cut into patches a
// grid of rows × (rows+1) patches (probeGrid(Seq)), every other symbol
// Seq; sizes derived from those (a convolution's output, a product, a
// sum) are computed from them; the inputs get values that respect
// their roles (positions Start..Start+Seq-1, masks of ones, token ids,
// zeros for content, pseudo-random values for parameters given as
// inputs). Cut values replace what the graph would compute (a probe of
// q, say).
//
// It evaluates only the cone of what is asked, node by node; Shape of a
// value whose size the binding decides is answered without computing the
// value, so probing cos/sin never runs the network's weights. A budget
// bounds the nodes one probe may run.
type Probe struct {
	w     *work.Work
	Batch int
	Seq   int
	// Past is the length of the KV cache given as input (its sizes bind
	// to it, masks over past and new tokens to Past+Seq); NewProbe sets
	// it to a length other than Seq when the model has a cache.
	Past  int
	Start int64
	// TokenShift moves every token id by this much (another token at
	// every position, the same positions): what an encoding of positions
	// must not change.
	TokenShift int
	// Span, when not 0, is how many tokens the positions given as input
	// run over (Start..Start+Span-1); the others repeat the last: a model
	// whose inputs' shapes fix the sequence is evaluated at fewer
	// positions so.
	Span int

	cuts   map[*graph.Value]*kernels.Tensor
	base   *frame
	synth  map[*graph.Value]bool // values computed from parameters the probe made up
	dep    map[*graph.Value]bool // values computed from cuts
	inputs map[*graph.Value]*kernels.Tensor
	steps  int
	// below holds the values computed from cut values: their shapes may
	// differ from what the binding says (a cut of another shape).
	below map[*graph.Value]bool
	// Budget is the most nodes a probe runs (0: 20000).
	Budget int
}

type frame struct {
	g      *graph.Graph
	vals   map[*graph.Value]*kernels.Tensor
	parent *frame
}

// ErrBudget is returned when a probe would run too many nodes (its cone
// reaches the network's weights, for instance).
var ErrBudget = errors.New("probe budget exceeded")

// NewProbe makes a probe of w with the given sizes and first position.
func NewProbe(w *work.Work, batch, seq int, start int64) *Probe {
	return &Probe{w: w, Batch: batch, Seq: seq, Past: w.DefaultPast(seq), Start: start, cuts: map[*graph.Value]*kernels.Tensor{},
		base: &frame{g: w.M.Graph, vals: map[*graph.Value]*kernels.Tensor{}}, synth: map[*graph.Value]bool{},
		dep: map[*graph.Value]bool{}, inputs: map[*graph.Value]*kernels.Tensor{}}
}

// SetCuts replaces the cut values (forgetting what was computed from the
// previous ones).
func (p *Probe) SetCuts(cuts map[*graph.Value]*kernels.Tensor) {
	for v := range p.dep {
		delete(p.base.vals, v)
	}
	clear(p.dep)
	p.cuts = cuts
	if p.cuts == nil {
		p.cuts = map[*graph.Value]*kernels.Tensor{}
	}
	p.below = nil
	for v, t := range p.cuts {
		if shape, ok := p.BindShape(p.w.Shape(v)); !ok || !slices.Equal(shape, t.Shape) {
			p.markBelow(v)
		}
	}
}

// markBelow records the values computed from v.
func (p *Probe) markBelow(v *graph.Value) {
	if p.below == nil {
		p.below = map[*graph.Value]bool{}
	}
	stack := []*graph.Value{v}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if p.below[x] {
			continue
		}
		p.below[x] = true
		for _, u := range x.Uses() {
			stack = append(stack, u.Node.Outputs()...)
		}
	}
}

// Synthetic reports whether v was computed from parameters the probe made
// up (a graph input holding frequencies or a cache): its numbers say
// nothing about the model.
func (p *Probe) Synthetic(v *graph.Value) bool { return p.synth[v] }

// Bind is the size of d under the probe's binding (false for sizes nothing
// decides).
func (p *Probe) Bind(d work.Dim) (int, bool) {
	d = p.w.Syms.Canon(d)
	if d.Known() {
		return int(d), true
	}
	if !d.IsSym() {
		return 0, false
	}
	if e, ok := p.w.Exprs[d]; ok {
		if e.Op == '/' {
			x, ok := p.Bind(e.Args[0])
			if !ok || int64(x)+e.C < 0 {
				return 0, false
			}
			return int((int64(x) + e.C) / e.Div), true
		}
		acc := e.C
		for _, a := range e.Args {
			x, ok := p.Bind(a)
			if !ok {
				return 0, false
			}
			if e.Op == '+' {
				acc += int64(x)
			} else {
				acc *= int64(x)
			}
		}
		return int(acc), true
	}
	info := p.w.Syms.Info(d)
	if info.Name == "" {
		return 0, false
	}
	switch p.w.SymKindOf(d) {
	case work.SymBatch:
		return p.Batch, true
	case work.SymPast:
		return p.Past, true
	case work.SymTotal:
		return p.Past + p.Seq, true
	case work.SymImageH, work.SymImageW:
		rows, cols := work.ProbeGrid(p.Seq)
		if p.w.SymKindOf(d) == work.SymImageW {
			rows = cols
		}
		return rows * p.w.Sizes.Patch[p.w.Syms.Canon(d)], true
	}
	return p.Seq, true
}

// BindShape is the concrete shape of s under the binding.
func (p *Probe) BindShape(s work.Shape) ([]int, bool) {
	if !s.Ranked {
		return nil, false
	}
	out := make([]int, len(s.Dims))
	elems := 1
	for i, d := range s.Dims {
		x, ok := p.Bind(d)
		// A model's declared sizes are outside input: a negative one, or
		// a shape of more than MaxElems elements (a probe's values are
		// float64 slices of that many), binds to nothing.
		if !ok || x < 0 || x > 0 && elems > MaxElems/x {
			return nil, false
		}
		out[i] = x
		elems *= x
	}
	return out, true
}

// MaxElems is the most elements a value BindShape gives may have: a probe
// runs one row of a few positions, so its values are small, and a shape a
// (malformed) model declares beyond it is not probed.
const MaxElems = 1 << 24

// Value evaluates v.
func (p *Probe) Value(v *graph.Value) (*kernels.Tensor, error) {
	p.steps = 0
	return p.eval(v, p.base, 0)
}

func (p *Probe) budget() int {
	if p.Budget > 0 {
		return p.Budget
	}
	return 20000
}

func (p *Probe) eval(v *graph.Value, fr *frame, depth int) (*kernels.Tensor, error) {
	if v == nil {
		return nil, nil
	}
	if t, ok := p.cuts[v]; ok {
		p.dep[v] = true
		return t, nil
	}
	f := fr
	for f != nil && f.g != v.Graph() {
		f = f.parent
	}
	if f == nil {
		f = p.base
	}
	if t, ok := f.vals[v]; ok {
		return t, nil
	}
	if t := p.w.Const(v); t != nil {
		return t, nil
	}
	if v.Const != nil {
		if err := p.w.ConstErr[v]; err != nil {
			if !errors.Is(err, graph.ErrExternalMissing) {
				return nil, fmt.Errorf("constant %q: %w", v.Name, err)
			}
			// Stored in an absent side file: made up, as a parameter
			// given as an input is, and marked so.
			t, err := p.madeUp(v, p.w.Shape(v))
			if err != nil {
				return nil, err
			}
			f.vals[v] = t
			return t, nil
		}
	}
	if depth > 5000 {
		return nil, fmt.Errorf("%w: the cone of %q is too deep", ErrBudget, v.Name)
	}
	n := v.Producer()
	if n == nil {
		if v.Graph() == p.w.M.Graph {
			t, err := p.input(v)
			if err != nil {
				return nil, err
			}
			f.vals[v] = t
			return t, nil
		}
		return nil, fmt.Errorf("subgraph input %q has no value", v.Name)
	}
	p.steps++
	if p.steps > p.budget() {
		return nil, fmt.Errorf("%w: more than %d nodes to reach %q", ErrBudget, p.budget(), v.Name)
	}
	// Shape and Size of a value whose shape the binding decides.
	if (n.OpType == "Shape" || n.OpType == "Size") && work.IsONNX(n) && !p.below[n.Input(0)] {
		if shape, ok := p.BindShape(p.w.Shape(n.Input(0))); ok {
			t := shapeTensor(n, shape)
			f.vals[v] = t
			return t, nil
		}
	}
	ins := make([]*kernels.Tensor, len(n.Inputs()))
	synth, dep := false, false
	for i, x := range n.Inputs() {
		if x == nil {
			continue
		}
		t, err := p.eval(x, f, depth+1)
		if err != nil {
			return nil, err
		}
		ins[i] = t
		synth = synth || p.synth[x]
		dep = dep || p.dep[x]
	}
	var outs []*kernels.Tensor
	var err error
	switch {
	case n.OpType == "If" && work.IsONNX(n):
		outs, synth, dep, err = p.evalIf(n, f, ins, depth)
	case n.OpType == "Loop" && work.IsONNX(n):
		outs, synth, dep, err = p.evalLoop(n, f, ins, depth, synth, dep)
	default:
		outs, err = kernels.EvalNode(n, p.w.Opset(n), ins, kernels.Options{Threads: 1, MaxTensorBytes: 1 << 28})
	}
	if err != nil {
		return nil, err
	}
	for i, o := range n.Outputs() {
		if i < len(outs) && o.Name != "" {
			f.vals[o] = outs[i]
			if synth {
				p.synth[o] = true
			}
			if dep {
				p.dep[o] = true
			}
		}
	}
	t, ok := f.vals[v]
	if !ok || t == nil {
		return nil, fmt.Errorf("node %v did not compute %q", n, v.Name)
	}
	return t, nil
}

// shapeTensor is what Shape or Size node n returns for a value of the
// given shape.
func shapeTensor(n *graph.Node, shape []int) *kernels.Tensor {
	if n.OpType == "Size" {
		c := int64(1)
		for _, d := range shape {
			c *= int64(d)
		}
		return kernels.Scalar(c)
	}
	start, end := work.ShapeWindow(n, len(shape))
	d := make([]int64, end-start)
	for i := range d {
		d[i] = int64(shape[start+i])
	}
	return kernels.FromSlice([]int{len(d)}, d)
}

// subOuts evaluates the outputs of subgraph g in a new frame whose inputs
// are bound to ins.
func (p *Probe) subOuts(g *graph.Graph, parent *frame, ins []*kernels.Tensor, depth int) ([]*kernels.Tensor, bool, bool, error) {
	fr := &frame{g: g, vals: map[*graph.Value]*kernels.Tensor{}, parent: parent}
	for i, v := range g.Inputs {
		if i < len(ins) {
			fr.vals[v] = ins[i]
		}
	}
	outs := make([]*kernels.Tensor, len(g.Outputs))
	synth, dep := false, false
	for i, o := range g.Outputs {
		t, err := p.eval(o, fr, depth+1)
		if err != nil {
			return nil, false, false, err
		}
		outs[i] = t
		synth = synth || p.synth[o]
		dep = dep || p.dep[o]
	}
	return outs, synth, dep, nil
}

func (p *Probe) evalIf(n *graph.Node, f *frame, ins []*kernels.Tensor, depth int) ([]*kernels.Tensor, bool, bool, error) {
	if ins[0] == nil || ins[0].Len() != 1 {
		return nil, false, false, fmt.Errorf("node %v (If): its condition is not one element", n)
	}
	name := "else_branch"
	if ins[0].Float64s()[0] != 0 {
		name = "then_branch"
	}
	a := n.Attr(name)
	if a == nil || a.Graph == nil {
		return nil, false, false, fmt.Errorf("node %v (If) has no %s", n, name)
	}
	outs, synth, dep, err := p.subOuts(a.Graph, f, nil, depth)
	synth = synth || p.synth[n.Input(0)]
	dep = dep || p.dep[n.Input(0)]
	return outs, synth, dep, err
}

func (p *Probe) evalLoop(n *graph.Node, f *frame, ins []*kernels.Tensor, depth int, synth, dep bool) ([]*kernels.Tensor, bool, bool, error) {
	body := n.Attr("body").Graph
	maxIter := int64(math.MaxInt64)
	if ins[0] != nil {
		maxIter = ins[0].Int64s()[0]
	}
	cond := true
	if len(ins) > 1 && ins[1] != nil {
		cond = ins[1].Float64s()[0] != 0
	}
	if maxIter > 1<<16 {
		return nil, false, false, fmt.Errorf("%w: Loop %v runs %d iterations", ErrBudget, n, maxIter)
	}
	carried := append([]*kernels.Tensor(nil), ins[2:]...)
	nScan := len(body.Outputs) - 1 - len(carried)
	scans := make([][]*kernels.Tensor, nScan)
	for i := int64(0); i < maxIter && cond; i++ {
		bins := append([]*kernels.Tensor{kernels.Scalar(i), kernels.Scalar(cond)}, carried...)
		outs, s, d, err := p.subOuts(body, f, bins, depth)
		if err != nil {
			return nil, false, false, err
		}
		synth, dep = synth || s, dep || d
		cond = outs[0].Float64s()[0] != 0
		copy(carried, outs[1:1+len(carried)])
		for k := range scans {
			scans[k] = append(scans[k], outs[1+len(carried)+k])
		}
		p.steps += body.Len()
		if p.steps > p.budget() {
			return nil, false, false, fmt.Errorf("%w: Loop %v", ErrBudget, n)
		}
	}
	res := append([]*kernels.Tensor(nil), carried...)
	for _, sc := range scans {
		t, err := stack(sc)
		if err != nil {
			return nil, false, false, fmt.Errorf("node %v (Loop): %w", n, err)
		}
		res = append(res, t)
	}
	return res, synth, dep, nil
}

// stack joins tensors of one shape along a new first axis.
func stack(ts []*kernels.Tensor) (*kernels.Tensor, error) {
	if len(ts) == 0 {
		return nil, errors.New("no iterations: empty scan output")
	}
	shape := append([]int{len(ts)}, ts[0].Shape...)
	out := make([]float64, 0, len(ts)*ts[0].Len())
	for _, t := range ts {
		if len(t.Shape) != len(ts[0].Shape) || t.Len() != ts[0].Len() {
			return nil, errors.New("scan outputs of different shapes")
		}
		out = append(out, t.Float64s()...)
	}
	return fromFloat64(ts[0].DType, shape, out), nil
}

// fromFloat64 makes a tensor of type dt from float64 values.
func fromFloat64(dt graph.DataType, shape []int, v []float64) *kernels.Tensor {
	switch dt {
	case graph.Float:
		o := make([]float32, len(v))
		for i, x := range v {
			o[i] = float32(x)
		}
		return kernels.FromSlice(shape, o)
	case graph.Int64:
		o := make([]int64, len(v))
		for i, x := range v {
			o[i] = int64(x)
		}
		return kernels.FromSlice(shape, o)
	case graph.Int32:
		o := make([]int32, len(v))
		for i, x := range v {
			o[i] = int32(x)
		}
		return kernels.FromSlice(shape, o)
	case graph.Bool:
		o := make([]bool, len(v))
		for i, x := range v {
			o[i] = x != 0
		}
		return kernels.FromSlice(shape, o)
	}
	if dt == graph.Double {
		return kernels.FromSlice(shape, v)
	}
	return nil
}

// input makes the probe's value of main-graph input v.
func (p *Probe) input(v *graph.Value) (*kernels.Tensor, error) {
	if t, ok := p.inputs[v]; ok {
		return t, nil
	}
	shape, ok := p.BindShape(p.w.Shape(v))
	if !ok {
		return nil, fmt.Errorf("input %q: shape %s is not decided by the probe", v.Name, p.w.ShapeString(p.w.Shape(v)))
	}
	dt := p.w.ElemType(v)
	size := 1
	for _, d := range shape {
		size *= d
	}
	if size > 1<<24 {
		return nil, fmt.Errorf("%w: input %q would have %d elements", ErrBudget, v.Name, size)
	}
	vals := make([]float64, size)
	role := p.w.Role(v)
	switch role {
	case work.RoleTokens:
		for i := range vals {
			vals[i] = float64(3 + p.TokenShift + i%5)
		}
	case work.RolePositions:
		last := 1
		if len(shape) > 0 {
			last = shape[len(shape)-1]
		}
		for i := range vals {
			at := i % last
			if p.Span > 0 {
				at = min(at, p.Span-1)
			}
			vals[i] = float64(p.Start + int64(at))
		}
	case work.RoleMask, work.RoleOther:
		for i := range vals {
			vals[i] = 1
		}
	case work.RoleParam:
		fillMadeUp(vals)
		p.synth[v] = true
	}
	t := FromFloat64Any(dt, shape, vals)
	if t == nil {
		return nil, fmt.Errorf("input %q: probes do not synthesise element type %v", v.Name, dt)
	}
	p.inputs[v] = t
	return t, nil
}

// fromFloat64Any makes a tensor of any numeric type from float64 values.
func FromFloat64Any(dt graph.DataType, shape []int, v []float64) *kernels.Tensor {
	switch dt {
	case graph.Float, graph.Int64, graph.Int32, graph.Bool, graph.Double:
		return fromFloat64(dt, shape, v)
	case graph.Int8, graph.Uint8:
		return work.CastInts(fromFloat64(graph.Int64, shape, v), dt)
	case graph.Float16, graph.BFloat16:
		gt, err := graph.TensorFromFloat64("x", dt, toInt64s(shape), v)
		if err != nil {
			return nil
		}
		t, err := kernels.FromGraph(gt)
		if err != nil {
			return nil
		}
		return t
	}
	return nil
}

func toInt64s(s []int) []int64 {
	o := make([]int64, len(s))
	for i, x := range s {
		o[i] = int64(x)
	}
	return o
}

// fillMadeUp fills vals with deterministic pseudo-random numbers in
// [0.5, 1.5): values the model does not hold (parameters given as inputs,
// tensors of an absent side file).
func fillMadeUp(vals []float64) {
	x := uint64(0x9e3779b97f4a7c15)
	for i := range vals {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		vals[i] = 0.5 + float64(x>>11)/float64(1<<53)
	}
}

// madeUp makes the probe's value of a constant whose data is not in the
// files, and marks it synthetic.
func (p *Probe) madeUp(v *graph.Value, s work.Shape) (*kernels.Tensor, error) {
	shape, ok := p.BindShape(s)
	if !ok {
		return nil, fmt.Errorf("constant %q: its data is absent and its shape unknown", v.Name)
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	if n > 1<<24 {
		return nil, fmt.Errorf("%w: constant %q (absent data) would have %d elements", ErrBudget, v.Name, n)
	}
	vals := make([]float64, n)
	fillMadeUp(vals)
	t := FromFloat64Any(p.w.ElemType(v), shape, vals)
	if t == nil {
		return nil, fmt.Errorf("constant %q: its data is absent and probes do not synthesise element type %v", v.Name, p.w.ElemType(v))
	}
	p.synth[v] = true
	return t, nil
}
