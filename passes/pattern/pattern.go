package pattern

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
)

// Pattern is a small pattern language over the working copy: a pattern
// matches the value a node computes, with named captures of values and
// nodes, commutative operands matched both ways, reusable sub-patterns and
// checks that say why they failed. Rules are written with the builder
// functions below:
//
//	x := Capture("x")
//	rotateHalf := Op("Concat", Op("Neg", Op("Slice", x)), Op("Slice", x))
//	softmax := Op("Div", Op("Exp", x).As("e"), Op("ReduceSum", Ref("e")))
//
// A pattern sees through Cast and Identity when built with Thru.
type Pattern interface {
	match(m *matcher, v *graph.Value) bool
}

// Env is what matching needs of the graph a pattern is matched in: the
// names its failure reasons give values, and what checks read of shapes
// (the working copy implements it).
type Env interface {
	// ValueName names v in failure reasons.
	ValueName(v *graph.Value) string
	// Rank is v's rank, -1 when unknown.
	Rank(v *graph.Value) int
	// Axes are the axes an op reads from its attribute or from input i
	// (the forms of different opsets).
	Axes(n *graph.Node, input int) ([]int64, bool)
}

// Match is a successful match: the captured values and nodes, and every
// node the pattern matched (in the order matched).
type Match struct {
	Values  map[string]*graph.Value
	NodesBy map[string]*graph.Node
	Nodes   []*graph.Node
}

type matcher struct {
	env   Env
	vals  map[string]*graph.Value
	nodes map[string]*graph.Node
	seen  []*graph.Node
	depth int
	best  int
	miss  Failure
}

// Failure is why a match failed: the reason of the attempt that got
// furthest, and the value it failed at (with its producer, nil for an
// input or a constant).
type Failure struct {
	Reason string
	Value  *graph.Value
	Node   *graph.Node
}

func (f *Failure) String() string { return f.Reason }

func (m *matcher) fail(v *graph.Value, reason string) bool {
	if m.depth >= m.best {
		m.best = m.depth
		m.miss = Failure{Reason: reason, Value: v}
		if v != nil {
			m.miss.Node = v.Producer()
		}
	}
	return false
}

// snapshot and restore undo the captures of a failed alternative.
type matchState struct {
	vals  map[string]*graph.Value
	nodes map[string]*graph.Node
	seen  int
}

func (m *matcher) save() matchState {
	return matchState{vals: clone(m.vals), nodes: cloneN(m.nodes), seen: len(m.seen)}
}

func (m *matcher) restore(s matchState) {
	m.vals, m.nodes, m.seen = s.vals, s.nodes, m.seen[:s.seen]
}

func clone(x map[string]*graph.Value) map[string]*graph.Value {
	y := make(map[string]*graph.Value, len(x))
	for k, v := range x {
		y[k] = v
	}
	return y
}

func cloneN(x map[string]*graph.Node) map[string]*graph.Node {
	y := make(map[string]*graph.Node, len(x))
	for k, v := range x {
		y[k] = v
	}
	return y
}

// MatchValue matches p against v; on failure it says why the attempt
// that got furthest failed, and where.
func MatchValue(env Env, p Pattern, v *graph.Value) (*Match, *Failure) {
	m := &matcher{env: env, vals: map[string]*graph.Value{}, nodes: map[string]*graph.Node{}, best: -1}
	if p.match(m, v) {
		return &Match{Values: m.vals, NodesBy: m.nodes, Nodes: slices.Clone(m.seen)}, nil
	}
	miss := m.miss
	return nil, &miss
}

// opPat matches a node of one op type whose first inputs match ins.
type opPat struct {
	ops  []string
	ins  []Pattern
	comm bool
	name string
}

// Op matches a node computing v with op type op (ONNX domain) whose
// inputs match ins in order; inputs after those given are free.
func Op(op string, ins ...Pattern) *opPat { return &opPat{ops: []string{op}, ins: ins} }

// OpOf is Op for any of several op types.
func OpOf(ops []string, ins ...Pattern) *opPat { return &opPat{ops: ops, ins: ins} }

// Comm matches a commutative binary op with its operands either way.
func Comm(op string, a, b Pattern) *opPat {
	return &opPat{ops: []string{op}, ins: []Pattern{a, b}, comm: true}
}

// As names the node the pattern matches.
func (p *opPat) As(name string) *opPat { p.name = name; return p }

func (p *opPat) match(m *matcher, v *graph.Value) bool {
	if v == nil {
		return m.fail(nil, "missing value")
	}
	n := v.Producer()
	if n == nil {
		return m.fail(v, fmt.Sprintf("%s is not computed by %v", m.env.ValueName(v), p.ops))
	}
	if !slices.Contains(p.ops, n.OpType) || !isONNXDomain(n) && n.Domain != "com.microsoft" {
		return m.fail(v, fmt.Sprintf("%s is computed by %s, not %v", m.env.ValueName(v), n.OpType, p.ops))
	}
	if len(n.Inputs()) < len(p.ins) {
		return m.fail(v, fmt.Sprintf("%s has %d inputs", n.OpType, len(n.Inputs())))
	}
	if p.name != "" {
		if old, ok := m.nodes[p.name]; ok && old != n {
			return m.fail(v, fmt.Sprintf("%s: another node than %s", p.name, old.OpType))
		}
	}
	orders := [][]int{seq(len(p.ins))}
	if p.comm && len(p.ins) == 2 {
		orders = append(orders, []int{1, 0})
	}
	for _, ord := range orders {
		s := m.save()
		m.depth++
		ok := true
		for i, pi := range p.ins {
			if !pi.match(m, n.Input(ord[i])) {
				ok = false
				break
			}
		}
		m.depth--
		if ok {
			if p.name != "" {
				m.nodes[p.name] = n
			}
			m.seen = append(m.seen, n)
			return true
		}
		m.restore(s)
	}
	return false
}

// isONNXDomain reports whether n is an op of the default domain.
func isONNXDomain(n *graph.Node) bool { return n.Domain == "" || n.Domain == "ai.onnx" }

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// capPat captures any value under a name; a second use of the name must be
// the same value.
type capPat struct{ name string }

// Capture matches any value and names it; Ref (the same name again)
// matches only that value.
func Capture(name string) Pattern { return capPat{name} }

// Ref is Capture under a name captured before.
func Ref(name string) Pattern { return capPat{name} }

func (p capPat) match(m *matcher, v *graph.Value) bool {
	if v == nil {
		return m.fail(nil, p.name+": missing")
	}
	if old, ok := m.vals[p.name]; ok {
		if old != v {
			return m.fail(v, fmt.Sprintf("%s: %s is not %s", p.name, m.env.ValueName(v), m.env.ValueName(old)))
		}
		return true
	}
	m.vals[p.name] = v
	return true
}

// orPat tries alternatives in order.
type orPat []Pattern

// Or matches the first alternative that matches.
func Or(ps ...Pattern) Pattern { return orPat(ps) }

func (p orPat) match(m *matcher, v *graph.Value) bool {
	for _, q := range p {
		s := m.save()
		if q.match(m, v) {
			return true
		}
		m.restore(s)
	}
	return false
}

// thruPat skips nodes of some ops before matching.
type thruPat struct {
	ops []string
	p   Pattern
}

// Thru matches p on v or on what a chain of Cast/Identity nodes reads.
func Thru(p Pattern) Pattern { return Through([]string{"Cast", "Identity"}, p) }

// Through matches p on v or on what a chain of nodes of the given ops
// (ONNX domain, by their first input) reads: a pattern that sees through
// layout ops, say.
func Through(ops []string, p Pattern) Pattern { return thruPat{ops, p} }

func (p thruPat) match(m *matcher, v *graph.Value) bool {
	for steps := 0; steps < 8; steps++ {
		s := m.save()
		if p.p.match(m, v) {
			return true
		}
		m.restore(s)
		if v == nil || v.Producer() == nil {
			return false
		}
		n := v.Producer()
		if !slices.Contains(p.ops, n.OpType) || !isONNXDomain(n) {
			return false
		}
		m.seen = append(m.seen, n)
		v = n.Input(0)
	}
	return false
}

// checkPat matches p, then runs a check on the match so far.
type checkPat struct {
	p     Pattern
	check func(env Env, vals map[string]*graph.Value, nodes map[string]*graph.Node) string
}

// Check matches p and then check, which returns "" or why it fails.
func Check(p Pattern, check func(env Env, vals map[string]*graph.Value, nodes map[string]*graph.Node) string) Pattern {
	return checkPat{p, check}
}

func (p checkPat) match(m *matcher, v *graph.Value) bool {
	if !p.p.match(m, v) {
		return false
	}
	if why := p.check(m.env, m.vals, m.nodes); why != "" {
		m.depth++
		defer func() { m.depth-- }()
		return m.fail(v, why)
	}
	return true
}

// allPat matches every pattern on the same value.
type allPat []Pattern

// All matches when every pattern matches v (to capture a value and look at
// how it is computed).
func All(ps ...Pattern) Pattern { return allPat(ps) }

func (p allPat) match(m *matcher, v *graph.Value) bool {
	for _, q := range p {
		if !q.match(m, v) {
			return false
		}
	}
	return true
}
