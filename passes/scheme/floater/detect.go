package floater

import (
	"errors"
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
	"math"
	"slices"
)

// FloaterEvidence is what the FLOATER detector read.
type Evidence struct {
	// Table names the value holding the integrated states, one per
	// position ([positions, ...state]); Rows its positions.
	Table string
	Rows  int
	// Loop names the Loop integrating the states (form loop).
	Loop string
	// Weights are the solver's tableau as read: B the weights of the
	// stages, A the coefficients of the stage arguments (row j: stage j+1),
	// C the stage times as fractions of the step (nil when the dynamics do
	// not read the time).
	A [][]float64
	B []float64
	C []float64
	// Stages is the number of evaluations of the dynamics per step.
	Stages int
	// Sample are the first rows of the flattened states, [position][k]
	// (at most 64 positions, 64 values), for the report.
	Sample [][]float64
	// Blocks are the layers reading the states: the original values added
	// to their q, k (and v).
	Blocks []Block
}

// FloaterBlock is one layer's position biases (original value names).
type Block struct {
	Layer   int
	Q, K, V string
}

// FloaterPass finds FLOATER's integrated position encodings (Liu et al. 2020).
var Detect = &passes.Pass[[]*passes.Finding]{
	Name: "floater",
	Doc: `Find position encodings integrated by a dynamical system (FLOATER).

A layer's q and k (and v) plus a position-only value read from one table
of states, one state per position, shared by every layer (per_layer), or
an encoding added to the embeddings (the absolute pass) whose rows are
read from such a table integrated in the graph (add_to_input): the
solution of dp/dt = f(t, p) on a time grid. The table is computed by a chain of
identical solver steps (unrolled; normalisation folds it, keeping how it
was computed) or by a Loop whose body is one step; a stored table is the
states folded by another tool (form table, solver and step null). In a
step, the evaluations of f are the reads of its first weight; each
evaluation's result is its last weight's output (plus a bias): the
step's increment and the stage arguments solved as combinations of
those results give the tableau (euler, midpoint, heun, ralston, rk3,
rk4, rk4_3_8) and the step h (the weights sum to h).`,
	Requires: []passes.Analyzer{work.Normalize, attn.Blocks, attn.Sides, absolute.Absolute},
	Run:      runFloater,
}

type floaterHit struct {
	b       *attn.Block
	table   *graph.Value
	q, k, v *graph.Value
	nodes   []*graph.Node
}

func runFloater(c *passes.Context) ([]*passes.Finding, error) {
	w := work.Of(c)
	sides := passes.Result(c, attn.Sides)
	var hits []floaterHit
	for _, b := range passes.Result(c, attn.Blocks) {
		bs := sides[b]
		if bs == nil || bs.Q == nil || bs.K == nil {
			continue
		}
		q, tq, nq := stateBias(w, bs.Q)
		k, tk, nk := stateBias(w, bs.K)
		if q == nil || k == nil || tq != tk {
			continue
		}
		h := floaterHit{b: b, table: tq, q: q, k: k, nodes: append(nq, nk...)}
		if b.V != nil {
			if v, tv, nv := valueBias(w, b.V); v != nil && tv == tq {
				h.v = v
				h.nodes = append(h.nodes, nv...)
			}
		}
		hits = append(hits, h)
	}
	out := inputFindings(c, w)
	if len(hits) == 0 {
		return out, nil
	}
	byTable := map[*graph.Value]*passes.Finding{}
	for _, h := range hits {
		f := byTable[h.table]
		if f == nil {
			var why string
			f, why = floaterFinding(w, h)
			if f == nil {
				c.Miss("floater", w.OrigName(h.b.Node()), why, 1)
				continue
			}
			byTable[h.table] = f
			out = append(out, f)
		}
		f.Layers = passes.SortedUnique(append(f.Layers, h.b.Index))
		f.Nodes = w.SortOrig(append(f.Nodes, w.OrigNames(unprepared(w, h.nodes))...))
		ev := f.Evidence.(*Evidence)
		fb := Block{Layer: h.b.Index, Q: w.Name(h.q), K: w.Name(h.k)}
		if h.v != nil {
			fb.V = w.Name(h.v)
		}
		ev.Blocks = append(ev.Blocks, fb)
	}
	// One table for the q and k of several layers: the state of FLOATER.
	var kept []*passes.Finding
	for _, f := range out {
		if f.Params.(*Params).Injection == "add_to_input" || len(f.Layers) >= 2 || len(passes.Result(c, attn.Blocks)) == 1 {
			kept = append(kept, f)
		} else {
			c.Miss("floater", fmt.Sprint(f.Layers), "one layer reads the table: not a state shared by the layers", 2)
		}
	}
	return kept, nil
}

// stateBias finds, in a side's region, a position-only value added to the
// projected q or k that reads rows of a table by position: the value, the
// table and the nodes.
func stateBias(w *work.Work, s *attn.Side) (*graph.Value, *graph.Value, []*graph.Node) {
	for _, n := range append(slices.Clone(s.Nodes), biasesOf(w, s.Operand)...) {
		if n.OpType != "Add" || len(n.Inputs()) != 2 {
			continue
		}
		acts := w.ActInputs(n)
		if len(acts) != 1 {
			continue
		}
		x := n.Input(1 - acts[0])
		if w.IsConst(x) && w.FoldedFrom(x) == nil {
			continue
		}
		if t, nodes := stateTable(w, x); t != nil {
			return x, t, append(nodes, n)
		}
	}
	return nil, nil, nil
}

// biasesOf lists the sums with one activation on the way from a score
// operand v back to the projection of q or k (through ops of one
// activation): where the side's region holds no node, a position bias
// folded into a constant being taken for the bias of the projection.
func biasesOf(w *work.Work, v *graph.Value) []*graph.Node {
	var out []*graph.Node
	for steps := 0; steps < 12 && v != nil; steps++ {
		n := v.Producer()
		if n == nil || !work.IsONNX(n) || weightOps[n.OpType] || len(w.ActInputs(n)) != 1 {
			break
		}
		if n.OpType == "Add" {
			out = append(out, n)
		}
		v = n.Input(w.ActInputs(n)[0])
	}
	return out
}

// valueBias is stateBias for the value operand of a block (through layout
// ops).
func valueBias(w *work.Work, v *graph.Value) (*graph.Value, *graph.Value, []*graph.Node) {
	v = attn.OpRoot(w, v)
	n := v.Producer()
	if n == nil || n.OpType != "Add" {
		return nil, nil, nil
	}
	return stateBias(w, &attn.Side{Nodes: []*graph.Node{n}})
}

// stateTable finds the table x reads rows of by position: a Slice or
// Gather in x's cone whose data is not content and whose bounds or
// indices are not constants, or, where the model's shapes fix the
// positions and normalisation folded the reads into x, the first folded
// read of a table not itself folded from a read. x must change with the
// position.
func stateTable(w *work.Work, x *graph.Value) (*graph.Value, []*graph.Node) {
	cone := w.Cone(x)
	nodes := append(slices.Clone(cone), w.FoldedNodes(x)...)
	for _, n := range nodes {
		if n.OpType != "Slice" && n.OpType != "Gather" {
			continue
		}
		folded := len(w.Folds[n.Output(0)]) > 0
		dynamic := folded && !isRead(w.FoldedFrom(n.Input(0)))
		for _, in := range n.Inputs()[1:] {
			if in != nil && !w.IsConst(in) {
				dynamic = true
			}
		}
		if r := w.Shape(n.Input(0)); !dynamic || w.IsAct(n.Input(0)) || r.Ranked && r.Rank() < 3 {
			continue
		}
		// The rows read change with the position.
		t, err := probe.NewProbe(w, 1, 4, 0).Value(foldedOut(w, n.Output(0)))
		if err != nil {
			return nil, nil
		}
		rows := flatRows(t, 2, 1<<30)
		if len(rows) < 2 || slices.Equal(rows[0], rows[1]) {
			return nil, nil
		}
		return n.Input(0), cone
	}
	return nil, nil
}

// unprepared leaves out of nodes the layout ops of constants alone, one of
// them in a side file (a weight transposed): normalisation folds such
// nodes when their constants are in the model's file; they prepare the
// weights and are not the encoding's.
func unprepared(w *work.Work, nodes []*graph.Node) []*graph.Node {
	var out []*graph.Node
	for _, n := range nodes {
		ins := n.Inputs()
		consts := !slices.ContainsFunc(ins, func(v *graph.Value) bool { return v != nil && !w.IsConst(v) })
		external := slices.ContainsFunc(ins, func(v *graph.Value) bool { return v != nil && v.Const != nil && v.Const.IsExternal() })
		if !consts || !external || !work.LayoutOps[n.OpType] {
			out = append(out, n)
		}
	}
	return out
}

// isRead reports whether n reads rows of a table (through layout ops).
func isRead(n *graph.Node) bool {
	return n != nil && (n.OpType == "Slice" || n.OpType == "Gather" || work.LayoutOps[n.OpType])
}

// floaterFinding reads how the table was computed.
func floaterFinding(w *work.Work, h floaterHit) (*passes.Finding, string) {
	f, why := integration(w, h.table)
	if f == nil {
		return nil, why
	}
	p := f.Params.(*Params)
	p.Injection = "per_layer"
	if t, err := probe.NewProbe(w, 1, 4, 0).Value(h.q); err == nil && t.Rank() > 0 {
		p.Dim = t.Shape[t.Rank()-1]
	}
	return f, ""
}

// integration reads how the table of states was computed: a finding with
// the solver's params and evidence, its nodes those of the integration
// (injection and dim left to the caller).
func integration(w *work.Work, table *graph.Value) (*passes.Finding, string) {
	p := probe.NewProbe(w, 1, 4, 0)
	tab, err := p.Value(table)
	if err != nil {
		return nil, "the table could not be evaluated: " + err.Error()
	}
	if tab.Rank() < 1 {
		return nil, "the table is a scalar"
	}
	params := &Params{}
	ev := &Evidence{Table: w.Name(table), Rows: tab.Shape[0]}
	params.MaxPositions = passes.Ptr(tab.Shape[0])
	ev.Sample = flatRows(tab, 64, 64)
	var notes []string
	var nodes []*graph.Node
	var steps []*stepView
	switch {
	case w.FoldedFrom(table) != nil:
		params.Form = "unrolled"
		states := foldedStates(w, table)
		if len(states) < 3 {
			return nil, "the table is folded from something else than a stack of states"
		}
		nodes = append(nodes, w.FoldedNodes(table)...)
		for _, n := range []int{1, len(states) / 2} {
			steps = append(steps, &stepView{yIn: states[n], yOut: states[n+1], val: w.Const, prod: w.FoldedFrom, out: func(v *graph.Value) *graph.Value { return foldedOut(w, v) }, opset: w.Opset})
		}
	case len(graphStates(w, table)) >= 3:
		// The chain is in the graph (its weights, in a side file, were not
		// folded): the same steps, read from the graph.
		params.Form = "unrolled"
		states := graphStates(w, table)
		for _, n := range w.Cone(table) {
			nodes = append(nodes, n)
			for _, in := range n.Inputs() {
				nodes = append(nodes, w.FoldedNodes(in)...)
			}
		}
		val := func(v *graph.Value) *kernels.Tensor { t, _ := p.Value(v); return t }
		for _, n := range []int{1, len(states) / 2} {
			steps = append(steps, &stepView{yIn: states[n], yOut: states[n+1], val: val, prod: (*graph.Value).Producer, out: func(v *graph.Value) *graph.Value { return v }, opset: w.Opset})
		}
	case loopOf(w, table) != nil:
		params.Form = "loop"
		loop := loopOf(w, table)
		ev.Loop = w.OrigName(loop)
		nodes = append(nodes, loop)
		sv, err := loopStep(w, loop, p)
		if err != nil {
			return nil, "the Loop's body could not be evaluated: " + err.Error()
		}
		steps = append(steps, sv)
	case w.IsConst(table):
		params.Form = "table"
		notes = append(notes, "solver, step: the states are a stored table (the integration was folded before the model was saved)")
	default:
		return nil, "the table is neither integrated in the graph nor stored"
	}
	var first *tableau
	for _, sv := range steps {
		tb, why := sv.tableau()
		if tb == nil {
			return nil, "the step is not a solver step: " + why
		}
		if first != nil && (first.name != tb.name || math.Abs(first.h/tb.h-1) > 1e-4) {
			return nil, "the steps of the chain differ"
		}
		if first == nil {
			first = tb
		}
	}
	if first != nil {
		if first.name != "" {
			params.Solver = passes.Ptr(first.name)
		} else {
			notes = append(notes, fmt.Sprintf("solver: %d stages with weights %v follow no known tableau", len(first.b), first.b))
		}
		params.Step = passes.Ptr(probe.Snap(first.h, 1e-5))
		ev.A, ev.B, ev.C, ev.Stages = first.a, first.b, first.c, len(first.b)
	}
	f := &passes.Finding{Scheme: Name, Params: params, Notes: notes, Evidence: ev}
	f.Nodes = w.OrigNames(nodes)
	return f, ""
}

// flatRows is the first rows of a tensor flattened after its first axis.
func flatRows(t *kernels.Tensor, rows, cols int) [][]float64 {
	if t.Rank() < 1 || t.Shape[0] == 0 {
		return nil
	}
	v := t.Float64s()
	per := len(v) / t.Shape[0]
	var out [][]float64
	for r := 0; r < min(rows, t.Shape[0]); r++ {
		out = append(out, append([]float64(nil), v[r*per:r*per+min(cols, per)]...))
	}
	return out
}

// foldedStates lists the states a folded table stacks: the inputs of the
// Concat it was folded from, through Unsqueeze.
func foldedStates(w *work.Work, t *graph.Value) []*graph.Value {
	n := w.FoldedFrom(t)
	for n != nil && work.LayoutOps[n.OpType] {
		n = w.FoldedFrom(n.Input(0))
	}
	if n == nil || n.OpType != "Concat" {
		return nil
	}
	var out []*graph.Value
	for _, x := range n.Inputs() {
		if u := w.FoldedFrom(x); u != nil && (u.OpType == "Unsqueeze" || u.OpType == "Reshape") {
			x = u.Input(0)
		}
		out = append(out, x)
	}
	return out
}

// graphStates lists the states a table computed in the graph stacks: the
// inputs of the Concat computing it (through layout ops), each through
// Unsqueeze or Reshape; nil when the table is not such a stack.
func graphStates(w *work.Work, t *graph.Value) []*graph.Value {
	n := t.Producer()
	for steps := 0; steps < 4 && n != nil && work.LayoutOps[n.OpType]; steps++ {
		n = n.Input(0).Producer()
	}
	if n == nil || n.OpType != "Concat" || !work.IsONNX(n) {
		return nil
	}
	var out []*graph.Value
	for _, x := range n.Inputs() {
		if u := x.Producer(); u != nil && (u.OpType == "Unsqueeze" || u.OpType == "Reshape") {
			x = u.Input(0)
		}
		if w.IsConst(x) && len(out) > 0 {
			return nil // a state computed from the one before is not constant
		}
		out = append(out, x)
	}
	return out
}

// loopOf is the Loop computing t (through layout ops and the
// concatenation of its scan or sequence output), or nil.
func loopOf(w *work.Work, t *graph.Value) *graph.Node {
	for steps := 0; steps < 6 && t != nil; steps++ {
		n := t.Producer()
		if n == nil {
			return nil
		}
		switch {
		case n.OpType == "Loop":
			return n
		case n.OpType == "ConcatFromSequence" || work.LayoutOps[n.OpType]:
			t = n.Input(0)
		default:
			return nil
		}
	}
	return nil
}

// stepView is one solver step: the state before and after, the values of
// the step (val) and how each was computed (prod).
type stepView struct {
	yIn, yOut *graph.Value
	val       func(*graph.Value) *kernels.Tensor
	prod      func(*graph.Value) *graph.Node
	// out is the value standing for a node's output (a folded node's
	// initializer; the output itself in a Loop's body).
	out   func(*graph.Value) *graph.Value
	opset func(*graph.Node) int64
}

// foldedOut is the initializer a folded node's output became.
func foldedOut(w *work.Work, v *graph.Value) *graph.Value {
	if fs := w.Folds[v]; len(fs) > 0 {
		return fs[0]
	}
	return v
}

// loopStep evaluates the first iteration of a Loop's body.
func loopStep(w *work.Work, loop *graph.Node, p *probe.Probe) (*stepView, error) {
	a := loop.Attr("body")
	if a == nil || a.Graph == nil {
		return nil, errors.New("no body")
	}
	body := a.Graph
	vals := map[*graph.Value]*kernels.Tensor{}
	if len(body.Inputs) < 3 || len(loop.Inputs()) < 3 {
		return nil, errors.New("the Loop carries no state")
	}
	vals[body.Inputs[0]] = kernels.Scalar(int64(0))
	vals[body.Inputs[1]] = kernels.Scalar(true)
	state := -1
	for i, x := range loop.Inputs()[2:] {
		t, err := p.Value(x)
		if err != nil {
			return nil, err
		}
		vals[body.Inputs[2+i]] = t
		if !t.IsSequence() && work.IsFloatType(w.ElemType(x)) && state < 0 {
			state = i
		}
	}
	if state < 0 || 1+state >= len(body.Outputs) {
		return nil, errors.New("no floating-point state is carried")
	}
	get := func(x *graph.Value) (*kernels.Tensor, error) {
		if t, ok := vals[x]; ok {
			return t, nil
		}
		if t := w.Const(x); t != nil {
			return t, nil
		}
		if x.Graph() != body {
			return p.Value(x)
		}
		return nil, fmt.Errorf("value %q not computed", x.Name)
	}
	for _, n := range body.Nodes() {
		ins := make([]*kernels.Tensor, len(n.Inputs()))
		for i, x := range n.Inputs() {
			if x == nil {
				continue
			}
			t, err := get(x)
			if err != nil {
				return nil, err
			}
			ins[i] = t
		}
		outs, err := kernels.EvalNode(n, w.Opset(n), ins, kernels.Options{Threads: 1})
		if err != nil {
			return nil, err
		}
		for i, o := range n.Outputs() {
			if i < len(outs) {
				vals[o] = outs[i]
			}
		}
	}
	return &stepView{
		yIn: body.Inputs[2+state], yOut: body.Outputs[1+state],
		val: func(x *graph.Value) *kernels.Tensor { t, _ := get(x); return t },
		prod: func(x *graph.Value) *graph.Node {
			if x.Graph() == body {
				return x.Producer()
			}
			return nil
		},
		out:   func(x *graph.Value) *graph.Value { return x },
		opset: w.Opset,
	}, nil
}

// tableau is an explicit Runge-Kutta method as read from a step.
type tableau struct {
	name string
	a    [][]float64
	b    []float64
	c    []float64
	h    float64
}

var knownTableaus = []struct {
	name string
	a    [][]float64
	b    []float64
}{
	{"euler", nil, []float64{1}},
	{"midpoint", [][]float64{{0.5}}, []float64{0, 1}},
	{"heun", [][]float64{{1}}, []float64{0.5, 0.5}},
	{"ralston", [][]float64{{2.0 / 3}}, []float64{0.25, 0.75}},
	{"rk3", [][]float64{{0.5}, {-1, 2}}, []float64{1.0 / 6, 2.0 / 3, 1.0 / 6}},
	{"rk4", [][]float64{{0.5}, {0, 0.5}, {0, 0, 1}}, []float64{1.0 / 6, 1.0 / 3, 1.0 / 3, 1.0 / 6}},
	{"rk4_3_8", [][]float64{{1.0 / 3}, {-1.0 / 3, 1}, {1, -1, 1}}, []float64{0.125, 0.375, 0.375, 0.125}},
}

// activations are the elementwise ops of one input that may end an
// evaluation of the dynamics (f = tanh(W·[p, t] + b)).
var activations = map[string]bool{"Tanh": true, "Sigmoid": true, "Relu": true, "Elu": true, "Selu": true, "Softplus": true,
	"Softsign": true, "LeakyRelu": true, "HardSigmoid": true, "Gelu": true, "Mish": true, "Celu": true}

var weightOps = map[string]bool{"MatMul": true, "Gemm": true, "Conv": true, "ConvTranspose": true, "Einsum": true, "FusedMatMul": true}

// tableau reads the solver of one step.
func (sv *stepView) tableau() (*tableau, string) {
	// The step's nodes: those depending on the state before it.
	dep := map[*graph.Value]bool{sv.yIn: true}
	var depends func(v *graph.Value, depth int) bool
	depends = func(v *graph.Value, depth int) bool {
		if v == nil || depth > 10000 {
			return false
		}
		if v == sv.yIn {
			return true
		}
		if d, ok := dep[v]; ok {
			return d
		}
		dep[v] = false
		n := sv.prod(v)
		if n == nil {
			return false
		}
		d := false
		for _, x := range n.Inputs() {
			if depends(x, depth+1) {
				d = true
			}
		}
		dep[v] = d
		return d
	}
	if !depends(sv.yOut, 0) {
		return nil, "the state after the step does not depend on the state before"
	}
	// Topological order of the step's nodes.
	var order []*graph.Node
	seen := map[*graph.Node]bool{}
	var visit func(v *graph.Value)
	visit = func(v *graph.Value) {
		if v == sv.yIn || !dep[v] {
			return
		}
		n := sv.prod(v)
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		for _, x := range n.Inputs() {
			visit(x)
		}
		order = append(order, n)
	}
	visit(sv.yOut)
	// Weight reads: a product of a state-dependent value with a value that
	// does not depend on the state.
	type wop struct {
		n      *graph.Node
		stateI int
		weight *kernels.Tensor
	}
	var wops []wop
	for _, n := range order {
		if !weightOps[n.OpType] || len(n.Inputs()) < 2 {
			continue
		}
		var si []int
		for i, x := range n.Inputs() {
			if x != nil && dep[x] {
				si = append(si, i)
			}
		}
		if len(si) != 1 {
			continue
		}
		wt := sv.val(n.Input(1 - min(si[0], 1)))
		if wt == nil || wt.Rank() < 2 {
			continue
		}
		wops = append(wops, wop{n, si[0], wt})
	}
	if len(wops) == 0 {
		return nil, "no weights are read in the step (not the evaluation of learned dynamics)"
	}
	same := func(a, b *kernels.Tensor) bool {
		return slices.Equal(a.Shape, b.Shape) && slices.Equal(a.Float64s(), b.Float64s())
	}
	var firsts []int
	for i, o := range wops {
		if same(o.weight, wops[0].weight) {
			firsts = append(firsts, i)
		}
	}
	s := len(firsts)
	pos := map[*graph.Node]int{}
	for i, n := range order {
		pos[n] = i
	}
	kv := make([]*graph.Value, s) // the stages' results
	xv := make([]*graph.Value, s) // their arguments
	ts := make([]float64, s)
	hasTime := true
	for j := 0; j < s; j++ {
		last := len(wops) - 1
		if j+1 < s {
			last = firsts[j+1] - 1
		}
		lw := wops[last].n
		out := sv.out(lw.Output(0))
		// A bias added to the last weight's output, then an activation,
		// end the evaluation.
		for _, n := range order[pos[lw]+1:] {
			if n.OpType == "Add" && len(n.Inputs()) == 2 && (n.Input(0) == out && !dep[n.Input(1)] || n.Input(1) == out && !dep[n.Input(0)]) {
				out = sv.out(n.Output(0))
				break
			}
		}
		for _, n := range order[pos[lw]+1:] {
			if activations[n.OpType] && len(n.Inputs()) == 1 && n.Input(0) == out {
				out = sv.out(n.Output(0))
			}
		}
		kv[j] = out
		fw := wops[firsts[j]]
		x := fw.n.Input(fw.stateI)
		// The time column: a Concat of the argument with a constant-filled
		// value that does not depend on the state.
		hasT := false
		c := sv.prod(x)
		for steps := 0; steps < 4 && c != nil && work.LayoutOps[c.OpType]; steps++ {
			c = sv.prod(c.Input(0))
		}
		if c != nil && c.OpType == "Concat" && len(c.Inputs()) == 2 {
			for i, in := range c.Inputs() {
				other := c.Input(1 - i)
				if dep[in] && !dep[other] {
					if tt := sv.val(other); tt != nil && tt.Len() > 0 {
						v := tt.Float64s()
						if slices.Min(v) == slices.Max(v) {
							x, ts[j], hasT = in, v[0], true
						}
					}
				}
			}
		}
		hasTime = hasTime && hasT
		xv[j] = x
	}
	// The combinations are read by evaluating the step with the state and
	// the stages' results replaced by ones and zeros: the coefficient of
	// each (exact, where fitting the measured values would be ill-posed,
	// the stages differing by O(h)).
	coef := func(v *graph.Value, one *graph.Value) (float64, error) {
		cuts := map[*graph.Value]*kernels.Tensor{}
		for _, c := range append([]*graph.Value{sv.yIn}, kv...) {
			t := sv.val(c)
			if t == nil {
				return 0, fmt.Errorf("value %q not evaluated", c.Name)
			}
			x := 0.0
			if c == one {
				x = 1
			}
			vals := make([]float64, t.Len())
			for i := range vals {
				vals[i] = x
			}
			cuts[c] = probe.FromFloat64Any(graph.Float, t.Shape, vals)
		}
		t, err := sv.evalCut(v, cuts, map[*graph.Value]*kernels.Tensor{})
		if err != nil {
			return 0, err
		}
		out := t.Float64s()
		if len(out) == 0 || slices.Min(out) != slices.Max(out) {
			return 0, errors.New("not an elementwise combination")
		}
		return out[0], nil
	}
	if c, err := coef(sv.yOut, sv.yIn); err != nil || math.Abs(c-1) > 1e-6 {
		return nil, "the state after the step is not the state before plus a combination of the stages"
	}
	tb := &tableau{}
	beta := make([]float64, s)
	for j := range kv {
		c, err := coef(sv.yOut, kv[j])
		if err != nil {
			return nil, fmt.Sprintf("the weight of stage %d: %v", j+1, err)
		}
		beta[j] = c
		tb.h += c
	}
	if tb.h == 0 {
		return nil, "the stages' weights sum to zero"
	}
	for _, x := range beta {
		tb.b = append(tb.b, x/tb.h)
	}
	for j := 1; j < s; j++ {
		if c, err := coef(xv[j], sv.yIn); err != nil || math.Abs(c-1) > 1e-6 {
			return nil, fmt.Sprintf("the argument of stage %d is not the state plus a combination of the stages (%v, %v)", j+1, c, err)
		}
		row := make([]float64, j)
		for l := range row {
			c, err := coef(xv[j], kv[l])
			if err != nil {
				return nil, fmt.Sprintf("the argument of stage %d: %v", j+1, err)
			}
			row[l] = c / tb.h
		}
		tb.a = append(tb.a, row)
	}
	if hasTime {
		for j := range ts {
			tb.c = append(tb.c, probe.Snap((ts[j]-ts[0])/tb.h, 1e-4))
		}
	}
	for _, k := range knownTableaus {
		if len(k.b) != s || !near(tb.b, k.b) {
			continue
		}
		match := true
		for j := range k.a {
			if !near(tb.a[j], k.a[j]) {
				match = false
			}
		}
		if match {
			tb.name = k.name
		}
	}
	return tb, ""
}

func near(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 2e-3 {
			return false
		}
	}
	return true
}

// evalCut evaluates v within the step, cut values given.
func (sv *stepView) evalCut(v *graph.Value, cuts, memo map[*graph.Value]*kernels.Tensor) (*kernels.Tensor, error) {
	if t, ok := cuts[v]; ok {
		return t, nil
	}
	if t, ok := memo[v]; ok {
		return t, nil
	}
	n := sv.prod(v)
	if n == nil {
		if t := sv.val(v); t != nil {
			return t, nil
		}
		return nil, fmt.Errorf("value %q has no value", v.Name)
	}
	ins := make([]*kernels.Tensor, len(n.Inputs()))
	for i, x := range n.Inputs() {
		if x == nil {
			continue
		}
		t, err := sv.evalCut(x, cuts, memo)
		if err != nil {
			return nil, err
		}
		ins[i] = t
	}
	outs, err := kernels.EvalNode(n, sv.opset(n), ins, kernels.Options{Threads: 1})
	if err != nil {
		return nil, err
	}
	for i, o := range n.Outputs() {
		if i < len(outs) {
			memo[sv.out(o)] = outs[i]
		}
	}
	t, ok := memo[v]
	if !ok {
		return nil, fmt.Errorf("node %v does not compute %q", n, v.Name)
	}
	return t, nil
}
