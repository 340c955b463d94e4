package probe

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/work"
)

// Angles is how a model computes the sin and cos of a sinusoidal encoding
// or of RoPE, exactly enough to reproduce them bit for bit: the position
// times a frequency in one product, its sin and cos, maybe scaled by a
// constant, in the element types the graph uses. The detectors find the
// product from the Sin and Cos nodes and confirm the arithmetic on the
// values they measured; codegen writes it as source.
type Angles struct {
	// Freq is the frequency of every pair (in the order of the evidence's
	// pairs) exactly as the product reads it, and FreqFrom the original
	// value holding them: an initializer, or the output of the node that
	// computes them from constants. Nil when the frequencies depend on the
	// positions (Program).
	Freq     []float64
	FreqFrom string
	// Program computes the frequencies from the positions when they
	// depend on them (dynamic NTK recomputes them from the largest
	// position); nil when they are constant.
	Program *FreqProgram
	// Product names the original node multiplying positions and
	// frequencies; Type is the element type of the product and of the sin
	// and cos computed from it.
	Product string
	Type    graph.DataType
	// Scale multiplies sin and cos after they are computed (YaRN's and
	// LongRoPE's attention factor), read from the constant ScaleFrom; 1
	// and "" when nothing scales them.
	Scale     float64
	ScaleFrom string
	// Out is the element type of the sin and cos the encoding uses (a
	// Cast to float16 after computing them in float32).
	Out graph.DataType
}

// FreqProgram computes the frequencies of every pair from the positions:
// a straight-line program of element-wise steps over scalars and vectors
// (one element per frequency), read from the graph.
type FreqProgram struct {
	// Steps in order; the last one computes the frequencies (in the
	// element order of Index).
	Steps []FreqStep
	// Index maps a pair (in the evidence's order) to its element of the
	// last step's vector.
	Index []int
	// Len is the number of elements of the vectors.
	Len int
}

// FreqStep is one step of a FreqProgram: an ONNX element-wise op (FreqOps:
// arithmetic, comparisons, Where; an If choosing between two branches is a
// Where of their programs) over earlier steps and constants, or one of the
// inputs: "max_position" (the largest position the model is given) or
// "length" (the number of positions).
type FreqStep struct {
	Op   string
	Args []FreqArg
	// Type is the element type of the result; Vector whether it has one
	// element per frequency (else a scalar).
	Type   graph.DataType
	Vector bool
	// Node is the original node of the step.
	Node string
}

// FreqArg is an operand of a step: an earlier step (Step >= 0) or a
// constant (Step -1) with one value or one per element, read from From.
type FreqArg struct {
	Step  int
	Const []float64
	From  string
}

// sinCos is what Angles give at one position for frequency f: cos and sin
// rounded as the model rounds them.
func (a *Angles) SinCos(pos float64, f float64) (c, s float64) {
	t := graph.RoundTo(a.Type, graph.RoundTo(a.Type, pos)*f)
	c, s = graph.RoundTo(a.Type, math.Cos(t)), graph.RoundTo(a.Type, math.Sin(t))
	if a.ScaleFrom != "" {
		c, s = graph.RoundTo(a.Type, c*a.Scale), graph.RoundTo(a.Type, s*a.Scale)
	}
	return graph.RoundTo(a.Out, c), graph.RoundTo(a.Out, s)
}

// freqsAt are the frequencies per pair for the positions 0..n-1.
func (a *Angles) freqsAt(n int) ([]float64, error) {
	if a.Program == nil {
		return a.Freq, nil
	}
	return a.Program.eval(int64(n-1), int64(n))
}

// Eval runs the program for the largest position maxPos and the number of
// positions n, returning the frequency of every pair (in float64, each
// step rounded to its type).
func (pg *FreqProgram) Eval(maxPos, n int64) ([]float64, error) { return pg.eval(maxPos, n) }

func (pg *FreqProgram) eval(maxPos, n int64) ([]float64, error) {
	vals := make([][]float64, len(pg.Steps))
	get := func(a FreqArg, i int) float64 {
		var v []float64
		if a.Step >= 0 {
			v = vals[a.Step]
		} else {
			v = a.Const
		}
		if len(v) == 1 {
			return v[0]
		}
		return v[i]
	}
	for k, st := range pg.Steps {
		size := 1
		if st.Vector {
			size = pg.Len
		}
		out := make([]float64, size)
		for i := range out {
			var x float64
			switch st.Op {
			case "max_position":
				x = float64(maxPos)
			case "length":
				x = float64(n)
			default:
				args := make([]float64, len(st.Args))
				for j, a := range st.Args {
					args[j] = get(a, i)
				}
				var ok bool
				if x, ok = freqOp(st.Op, args); !ok {
					return nil, fmt.Errorf("FreqProgram.Eval: step %d is the op %s, which it does not evaluate", k, st.Op)
				}
			}
			out[i] = graph.RoundTo(st.Type, x)
			if st.Type.IsInt() {
				out[i] = math.Trunc(x)
			}
		}
		vals[k] = out
	}
	last := vals[len(vals)-1]
	f := make([]float64, len(pg.Index))
	for k, i := range pg.Index {
		f[k] = last[min(i, len(last)-1)]
	}
	return f, nil
}

// freqOp computes one element-wise op of a FreqProgram in float64 (the
// caller rounds to the step's type).
func freqOp(op string, a []float64) (float64, bool) {
	switch op {
	case "Add":
		return a[0] + a[1], true
	case "Sub":
		return a[0] - a[1], true
	case "Mul":
		return a[0] * a[1], true
	case "Div":
		return a[0] / a[1], true
	case "Pow":
		return math.Pow(a[0], a[1]), true
	case "Max":
		return math.Max(a[0], a[1]), true
	case "Min":
		return math.Min(a[0], a[1]), true
	case "Clip":
		x := a[0]
		if len(a) > 1 && !math.IsNaN(a[1]) {
			x = math.Max(x, a[1])
		}
		if len(a) > 2 && !math.IsNaN(a[2]) {
			x = math.Min(x, a[2])
		}
		return x, true
	case "Reciprocal":
		return 1 / a[0], true
	case "Neg":
		return -a[0], true
	case "Sqrt":
		return math.Sqrt(a[0]), true
	case "Exp":
		return math.Exp(a[0]), true
	case "Log":
		return math.Log(a[0]), true
	case "Floor":
		return math.Floor(a[0]), true
	case "Ceil":
		return math.Ceil(a[0]), true
	case "Cast", "Identity":
		return a[0], true
	case "Greater":
		return b2f(a[0] > a[1]), true
	case "Less":
		return b2f(a[0] < a[1]), true
	case "GreaterOrEqual":
		return b2f(a[0] >= a[1]), true
	case "LessOrEqual":
		return b2f(a[0] <= a[1]), true
	case "Equal":
		return b2f(a[0] == a[1]), true
	case "Not":
		return b2f(a[0] == 0), true
	case "Where":
		if a[0] != 0 {
			return a[1], true
		}
		return a[2], true
	}
	return 0, false
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// FreqOps are the ops a FreqProgram step may be.
var FreqOps = []string{"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Clip", "Reciprocal", "Neg", "Sqrt", "Exp", "Log", "Floor", "Ceil", "Cast",
	"Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal", "Not", "Where"}

// deepCone is the cone of vs with the nodes of the subgraphs its nodes
// hold (a table computed in a Loop body).
func DeepCone(w *work.Work, vs ...*graph.Value) []*graph.Node {
	var out []*graph.Node
	for _, n := range w.Cone(vs...) {
		out = append(out, n)
		for _, sg := range n.Subgraphs() {
			sg.Walk(func(m *graph.Node) { out = append(out, m) })
		}
	}
	return out
}

// passOps carry values to other places without changing them (and the
// product of positions and frequencies is found through them).
var passOps = map[string]bool{"Transpose": true, "Reshape": true, "Expand": true, "Tile": true, "Unsqueeze": true,
	"Squeeze": true, "Identity": true, "Flatten": true, "Slice": true, "Gather": true, "Concat": true, "Split": true}

// productOf walks back from an angle value through ops that move values
// to the product computing them.
func productOf(w *work.Work, v *graph.Value) (*graph.Node, string) {
	for steps := 0; steps < 16; steps++ {
		n := v.Producer()
		if n == nil {
			return nil, fmt.Sprintf("the angles come from %q, not from a product", v.Name)
		}
		if !work.IsONNX(n) {
			return nil, fmt.Sprintf("the angles come from the %s op %v", n.OpType, n)
		}
		switch {
		case n.OpType == "Mul" || n.OpType == "MatMul" || outerEinsum(n):
			return n, ""
		case n.OpType == "Concat":
			// The same angles repeated (cat(freqs, freqs)).
			var p *graph.Node
			for _, in := range n.Inputs() {
				q, why := productOf(w, in)
				if q == nil {
					return nil, why
				}
				if p != nil && q != p {
					return nil, "the angles are concatenated from different products"
				}
				p = q
			}
			return p, ""
		case passOps[n.OpType]:
			v = n.Input(0)
		default:
			return nil, fmt.Sprintf("the angles are computed by %s %v, not by a product of positions and frequencies", n.OpType, n)
		}
	}
	return nil, "the angles' chain is too long"
}

// outerEinsum reports whether n is an Einsum of two operands that
// multiplies every element of one with every element of the other
// (i,j->ij: each output element one product, nothing summed).
func outerEinsum(n *graph.Node) bool {
	if n.OpType != "Einsum" || len(n.Inputs()) != 2 {
		return false
	}
	eq := strings.ReplaceAll(n.AttrString("equation", ""), " ", "")
	lhs, rhs, ok := strings.Cut(eq, "->")
	terms := strings.Split(lhs, ",")
	if !ok || len(terms) != 2 || strings.Contains(eq, ".") {
		return false
	}
	// Every label of the operands appears in the output exactly once and
	// no label is shared by both (a shared label would be summed or
	// paired).
	for _, c := range terms[0] {
		if strings.ContainsRune(terms[1], c) {
			return false
		}
	}
	labels := terms[0] + terms[1]
	if len(rhs) != len(labels) {
		return false
	}
	for _, c := range labels {
		if strings.Count(labels, string(c)) != 1 || !strings.ContainsRune(rhs, c) {
			return false
		}
	}
	return true
}

// constRoot walks back from v through ops that move or cast values to a
// constant; nil when v is not computed from one.
func constRoot(w *work.Work, v *graph.Value) *graph.Value {
	for steps := 0; steps < 16 && v != nil; steps++ {
		if w.IsConst(v) {
			return v
		}
		n := v.Producer()
		if n == nil || !work.IsONNX(n) || !(passOps[n.OpType] && n.OpType != "Concat" || n.OpType == "Cast") {
			return nil
		}
		v = n.Input(0)
	}
	return nil
}

// exactAngles finds how the values outs (the cos/sin entering a rotation,
// or an absolute encoding) are computed from the positions: one product of
// positions and frequencies (omega, measured per pair) that every Sin and
// Cos node of their cone reads, maybe scaled by a constant afterwards.
// The caller confirms the result on measured values.
func ExactAngles(w *work.Work, outs []*graph.Value, omega []float64, out graph.DataType) (*Angles, string) {
	cone := DeepCone(w, outs...)
	var trig []*graph.Node
	for _, n := range cone {
		if (n.OpType == "Sin" || n.OpType == "Cos") && work.IsONNX(n) {
			trig = append(trig, n)
		}
	}
	if len(trig) == 0 {
		return nil, "no Sin or Cos node computes the values (a stored table)"
	}
	var prod *graph.Node
	for _, t := range trig {
		p, why := productOf(w, t.Input(0))
		if p == nil {
			return nil, why
		}
		if prod != nil && p != prod {
			return nil, "the sin and cos are computed from different products"
		}
		prod = p
	}
	a := &Angles{Product: w.OrigName(prod), Type: w.ElemType(prod.Output(0)), Scale: 1, Out: out}
	if a.Product == "" {
		a.Product = prod.Output(0).Name
	}
	if !work.IsFloatType(a.Type) {
		return nil, fmt.Sprintf("the angles are %v", a.Type)
	}
	fi := -1
	for i := 0; i < 2; i++ {
		if constRoot(w, prod.Input(i)) != nil {
			fi = i
		}
	}
	pr := NewProbe(w, 1, 4, 0)
	if fi >= 0 {
		root := constRoot(w, prod.Input(fi))
		t, err := pr.Value(prod.Input(fi))
		if err != nil {
			return nil, "the frequencies could not be evaluated: " + err.Error()
		}
		idx, why := matchFreqs(t.Float64s(), omega)
		if idx == nil {
			return nil, why
		}
		vals := t.Float64s()
		for _, i := range idx {
			a.Freq = append(a.Freq, vals[i])
		}
		a.FreqFrom = w.Name(root)
	} else {
		pg, why := freqProgram(w, prod, omega)
		if pg == nil {
			return nil, why
		}
		a.Program = pg
	}
	// A constant scale between the sin and cos and the values used.
	in := map[*graph.Node]bool{}
	for _, n := range cone {
		in[n] = true
	}
	for k, t := range trig {
		sc, from, why := scaleAfter(w, t.Output(0), in)
		if why != "" {
			return nil, why
		}
		if k > 0 && sc != a.Scale {
			return nil, "sin and cos are scaled differently"
		}
		a.Scale = sc
		if a.ScaleFrom == "" {
			a.ScaleFrom = from
		}
	}
	return a, ""
}

// matchFreqs maps every measured frequency to the element of vals that
// equals it (within the measurement's precision).
func matchFreqs(vals, omega []float64) ([]int, string) {
	var idx []int
	for k, om := range omega {
		best, bd := -1, math.Inf(1)
		for i, v := range vals {
			if v <= 0 {
				continue
			}
			if d := math.Abs(math.Log(v / om)); d < bd {
				best, bd = i, d
			}
		}
		if best < 0 || bd > 1e-2 {
			return nil, fmt.Sprintf("no frequency of the product matches the measured frequency %.6g of pair %d", om, k)
		}
		idx = append(idx, best)
	}
	return idx, ""
}

// scaleAfter follows v forward (through the nodes in) and returns the
// constant scalar it is multiplied by, if any, on the way to the values
// used.
func scaleAfter(w *work.Work, v *graph.Value, in map[*graph.Node]bool) (float64, string, string) {
	for steps := 0; steps < 16; steps++ {
		var next *graph.Node
		for _, u := range v.Uses() {
			if in[u.Node] {
				next = u.Node
				break
			}
		}
		if next == nil {
			return 1, "", ""
		}
		switch {
		case next.OpType == "Mul":
			other := next.Input(0)
			if other == v {
				other = next.Input(1)
			}
			t := w.Const(other)
			if t == nil || t.Len() != 1 || !work.IsFloatType(t.DType) {
				return 0, "", fmt.Sprintf("sin or cos is multiplied by %q, not a constant scalar", other.Name)
			}
			sc := t.Float64s()[0]
			if sc == 1 {
				v = next.Output(0)
				continue
			}
			return sc, w.Name(other), ""
		case passOps[next.OpType] || next.OpType == "Cast" || next.OpType == "ScatterND" || next.OpType == "ScatterElements":
			v = next.Output(0)
			if next.OpType == "ScatterND" || next.OpType == "ScatterElements" {
				v = next.Output(0)
			}
		default:
			return 1, "", ""
		}
	}
	return 1, "", ""
}

// freqProgram reads the frequencies of a product whose frequency operand
// is computed from the positions (dynamic rules) as a FreqProgram, and
// confirms it on the operand's values for a few sequence lengths.
func freqProgram(w *work.Work, prod *graph.Node, omega []float64) (*FreqProgram, string) {
	why := "neither operand of the product is a constant or a program of the positions"
	var whys []string
	for i := 0; i < 2; i++ {
		b := &progBuilder{w: w, memo: map[*graph.Value]FreqArg{}}
		if _, ok := b.walk(prod.Input(i)); !ok {
			if b.why != "" {
				whys = append(whys, fmt.Sprintf("operand %d: %s", i, b.why))
				why = "the frequencies: " + strings.Join(whys, "; ")
			}
			continue
		}
		pg := &FreqProgram{Steps: b.steps, Len: max(b.len, 1)}
		if len(pg.Steps) == 0 || !slices.ContainsFunc(pg.Steps, func(s FreqStep) bool { return s.Op == "max_position" || s.Op == "length" }) {
			continue
		}
		// The element order: the operand's values for the length omega
		// was measured at, matched to the measured frequencies.
		pg.Index = make([]int, pg.Len)
		for k := range pg.Index {
			pg.Index[k] = k
		}
		ok := true
		for j, n := range []int{16, 4, 40, 300} {
			t, err := NewProbe(w, 1, n, 0).Value(prod.Input(i))
			if err != nil || t.Len() != pg.Len {
				ok = false
				break
			}
			got := t.Float64s()
			if j == 0 {
				idx, _ := matchFreqs(got, omega)
				if idx == nil {
					ok = false
					break
				}
				pg.Index = idx
			}
			saved := pg.Index
			pg.Index = make([]int, pg.Len)
			for k := range pg.Index {
				pg.Index[k] = k
			}
			f, err := pg.eval(int64(n-1), int64(n))
			pg.Index = saved
			if err != nil || !slices.Equal(f, got) {
				ok = false
				why = fmt.Sprintf("the program of the frequencies does not reproduce them for %d positions", n)
				break
			}
		}
		if ok {
			return pg, ""
		}
	}
	return nil, why
}

// progBuilder reads a FreqProgram backwards from a value.
type progBuilder struct {
	w     *work.Work
	steps []FreqStep
	memo  map[*graph.Value]FreqArg
	vec   map[int]bool
	len   int
	why   string
	depth int
}

func (b *progBuilder) fail(format string, args ...any) (FreqArg, bool) {
	if b.why == "" {
		b.why = fmt.Sprintf(format, args...)
	}
	return FreqArg{}, false
}

// walk returns the operand computing v.
func (b *progBuilder) walk(v *graph.Value) (FreqArg, bool) {
	w := b.w
	if a, ok := b.memo[v]; ok {
		return a, true
	}
	b.depth++
	defer func() { b.depth-- }()
	if b.depth > 64 || len(b.steps) > 64 {
		return b.fail("too many steps")
	}
	if t := w.Const(v); t != nil {
		if !work.IsFloatType(t.DType) && !t.DType.IsInt() {
			return b.fail("a constant of type %v", t.DType)
		}
		vals := t.Float64s()
		if len(vals) > 1 && !b.setLen(len(vals)) {
			return b.fail("vectors of %d and %d elements", b.len, len(vals))
		}
		a := FreqArg{Step: -1, Const: vals, From: w.Name(v)}
		b.memo[v] = a
		return a, true
	}
	n := v.Producer()
	if n == nil || !work.IsONNX(n) {
		return b.fail("%q is not computed by ONNX ops", v.Name)
	}
	var a FreqArg
	switch op := n.OpType; {
	case op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Expand" || op == "Identity" || op == "Flatten" || op == "Transpose":
		x, ok := b.walk(n.Input(0))
		if !ok {
			return x, false
		}
		a = x
	case op == "ReduceMax":
		if !b.isPositions(n.Input(0)) {
			return b.fail("ReduceMax %v does not read the positions", n)
		}
		a = b.add(FreqStep{Op: "max_position", Type: w.ElemType(n.Output(0)), Node: w.OrigName(n)}, false)
	case op == "Gather":
		sh := n.Input(0).Producer()
		if sh == nil || sh.OpType != "Shape" || !b.isPositions(sh.Input(0)) {
			return b.fail("Gather %v does not read the number of positions", n)
		}
		a = b.add(FreqStep{Op: "length", Type: graph.Int64, Node: w.OrigName(n)}, false)
	case op == "If":
		// A choice between two sets of frequencies (LongRoPE's short and
		// long factors): both branches are programs, the condition too.
		sgs := n.Subgraphs()
		i := v.OutputIndex()
		if len(sgs) != 2 || i >= len(sgs[0].Outputs) || i >= len(sgs[1].Outputs) {
			return b.fail("If %v: branches", n)
		}
		then, els := sgs[0].Outputs[i], sgs[1].Outputs[i]
		if n.Attr("else_branch") != nil && n.Attr("else_branch").Graph == sgs[0] {
			then, els = els, then
		}
		st := FreqStep{Op: "Where", Type: w.ElemType(v), Node: w.OrigName(n)}
		args, vec, x, ok := b.walkArgs([]*graph.Value{n.Input(0), then, els})
		if !ok {
			return x, false
		}
		st.Args = args
		if st.Type == graph.Undefined {
			st.Type = w.ElemType(then)
		}
		a = b.add(st, vec)
	case slices.Contains(FreqOps, op):
		st := FreqStep{Op: op, Type: w.ElemType(n.Output(0)), Node: w.OrigName(n)}
		args, vec, x, ok := b.walkArgs(n.Inputs())
		if !ok {
			return x, false
		}
		st.Args = args
		if op == "Clip" && len(st.Args) == 1 {
			lo, hi := n.AttrFloat("min", float32(math.Inf(-1))), n.AttrFloat("max", float32(math.Inf(1)))
			st.Args = append(st.Args, FreqArg{Step: -1, Const: []float64{float64(lo)}}, FreqArg{Step: -1, Const: []float64{float64(hi)}})
		}
		if !work.IsFloatType(st.Type) && !st.Type.IsInt() && st.Type != graph.Bool {
			return b.fail("%s %v computes %v", op, n, st.Type)
		}
		a = b.add(st, vec)
	default:
		return b.fail("%s %v is not an element-wise op onnxpe transcribes", op, n)
	}
	b.memo[v] = a
	return a, true
}

// walkArgs walks the operands of a step: their args (an optional input
// left out is NaN) and whether one is a vector; on failure, the failed
// arg.
func (b *progBuilder) walkArgs(ins []*graph.Value) ([]FreqArg, bool, FreqArg, bool) {
	var args []FreqArg
	vec := false
	for _, in := range ins {
		if in == nil {
			args = append(args, FreqArg{Step: -1, Const: []float64{math.NaN()}})
			continue
		}
		x, ok := b.walk(in)
		if !ok {
			return nil, false, x, false
		}
		if x.Step >= 0 && b.vec[x.Step] || len(x.Const) > 1 {
			vec = true
		}
		args = append(args, x)
	}
	return args, vec, FreqArg{}, true
}

func (b *progBuilder) setLen(n int) bool {
	if b.len == 0 || b.len == n {
		b.len = n
		return true
	}
	return false
}

func (b *progBuilder) add(st FreqStep, vec bool) FreqArg {
	if b.vec == nil {
		b.vec = map[int]bool{}
	}
	st.Vector = vec
	b.steps = append(b.steps, st)
	b.vec[len(b.steps)-1] = vec
	return FreqArg{Step: len(b.steps) - 1}
}

// isPositions reports whether v holds the positions (an input of that
// role, maybe cast or reshaped).
func (b *progBuilder) isPositions(v *graph.Value) bool {
	for steps := 0; steps < 8 && v != nil; steps++ {
		if v.Producer() == nil {
			return b.w.Role(v) == work.RolePositions
		}
		n := v.Producer()
		if !work.LayoutOps[n.OpType] {
			return false
		}
		v = n.Input(0)
	}
	return false
}

// confirmAngles checks a's arithmetic against measured cos and sin rows
// (row i at position start+i, one value per pair): every value must be
// what a computes.
func (a *Angles) Confirm(start int, cos, sin [][]float64) string {
	if len(cos) == 0 || start < 0 {
		return "no measured rows to confirm the arithmetic on"
	}
	n := start + len(cos)
	f, err := a.freqsAt(n)
	if err != nil {
		return err.Error()
	}
	pos := make([]float64, len(cos))
	for i := range pos {
		pos[i] = float64(start + i)
	}
	return a.ConfirmAt(pos, f, cos, sin)
}

// confirmAt checks a's arithmetic with frequencies f against measured cos
// and sin rows at the positions pos (row i at pos[i], one value per pair).
func (a *Angles) ConfirmAt(pos, f []float64, cos, sin [][]float64) string {
	for i := range cos {
		for k := range cos[i] {
			c, s := a.SinCos(pos[i], f[k])
			if math.Abs(c-cos[i][k]) > 1e-6*math.Max(1, math.Abs(c)) || math.Abs(s-sin[i][k]) > 1e-6*math.Max(1, math.Abs(s)) {
				return fmt.Sprintf("at position %g pair %d the model gives (%.9g, %.9g), the arithmetic (%.9g, %.9g)", pos[i], k, cos[i][k], sin[i][k], c, s)
			}
		}
	}
	return ""
}

// Const is the value of a constant of the model (an initializer, or a
// value normalisation folded from constants), by the name findings and
// their evidence give it; nil when it is not a constant.
func Const(c *passes.Context, name string) *kernels.Tensor {
	w := work.Of(c)
	v := Lookup(w, name)
	if v == nil {
		return nil
	}
	return w.Const(v)
}
