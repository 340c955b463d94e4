package graph

import (
	"fmt"
	"sort"
	"strings"
)

// Real model files break some rules of the ONNX format that ONNX Runtime
// tolerates: their nodes are not in topological order, or their opset
// imports leave out a domain their nodes use, or they name no producer.
// Load accepts them as ONNX Runtime does and records each tolerance as a
// Repair, which tools print as a warning: nothing is repaired silently.
// What is truly ambiguous stays an error: a value name defined twice, a
// cycle, a model with nodes that imports no operator set at all (ONNX
// Runtime refuses it too: which version of the operators it means is
// unknown).

// Repair is one rule of the ONNX format a loaded model breaks and what the
// loader and the executor do instead.
type Repair struct {
	// Kind is "order", "opset" or "producer".
	Kind string
	// Msg is one sentence saying what is broken and what is done.
	Msg string
}

func (r Repair) String() string { return r.Msg }

// Repairs lists the rules the model breaks that Load tolerated, in a
// stable order (empty for a well-formed model).
func (m *Model) Repairs() []Repair { return m.repairs }

// AssumedOpsets are the versions a domain that a node uses but the opset
// imports leave out is read at: the newest version of each domain ONNX
// Runtime 1.30 knows, which it adds to such a model's imports.
var AssumedOpsets = map[string]int64{
	"":                         26,
	"ai.onnx.ml":               5,
	"ai.onnx.preview":          1,
	"ai.onnx.preview.training": 1,
	"ai.onnx.training":         1,
	"com.microsoft":            1,
}

// AssumedOpset is the version a domain missing from the opset imports is
// read at: AssumedOpsets, or 1 for other domains.
func AssumedOpset(domain string) int64 {
	if domain == "ai.onnx" {
		domain = ""
	}
	if v, ok := AssumedOpsets[domain]; ok {
		return v
	}
	return 1
}

// findRepairs records the tolerated rule breaks of a freshly loaded model,
// or returns the error of a model too ambiguous to load.
func (m *Model) findRepairs() error {
	if len(m.shell.OpsetImport) == 0 {
		var first *Node
		m.Walk(func(n *Node) {
			if first == nil && m.Function(n.Domain, n.OpType, n.Overload) == nil {
				first = n
			}
		})
		if first != nil {
			return fmt.Errorf("%w: the model imports no operator set (opset_import is empty), so the version of the operators its nodes (%s, ...) use is unknown (ONNX Runtime refuses such a model too)", ErrInvalid, nodeDesc(first))
		}
	}
	if m.ProducerName() == "" {
		m.repairs = append(m.repairs, Repair{Kind: "producer", Msg: "the model names no producer (producer_name is empty): loaded as it is; nothing depends on it"})
	}
	// Nodes out of order: one repair per graph, naming its first node that
	// reads a value a later node computes.
	m.Graph.walkGraphs(func(g *Graph) { m.checkOrder(g, "") })
	for _, f := range m.Functions {
		fn := f
		f.Body.walkGraphs(func(g *Graph) { m.checkOrder(g, "function "+fn.Domain+"."+fn.Name) })
	}
	// Domains used without an import.
	missing := map[string][]string{} // domain -> the first nodes using it
	note := func(domain string, n *Node, imported func(string) bool) {
		if m.Function(n.Domain, n.OpType, n.Overload) != nil || imported(domain) {
			return
		}
		if len(missing[domain]) < 3 {
			missing[domain] = append(missing[domain], nodeDesc(n))
		}
	}
	modelImports := func(d string) bool { return m.OpsetVersion(d) != 0 }
	m.Graph.Walk(func(n *Node) { note(normDomainName(n.Domain), n, modelImports) })
	for _, f := range m.Functions {
		fimp := func(d string) bool {
			for _, o := range f.Opsets() {
				if sameDomain(o.Domain, d) {
					return true
				}
			}
			return modelImports(d)
		}
		f.Body.Walk(func(n *Node) { note(normDomainName(n.Domain), n, fimp) })
	}
	domains := make([]string, 0, len(missing))
	for d := range missing {
		domains = append(domains, d)
	}
	sort.Strings(domains)
	for _, d := range domains {
		name := d
		if d == "" {
			name = "ai.onnx"
		}
		m.repairs = append(m.repairs, Repair{Kind: "opset", Msg: fmt.Sprintf(
			"nodes use domain %s, which the opset imports leave out (%s): read at version %d, the newest ONNX Runtime 1.30 knows (as it does)",
			name, strings.Join(missing[d], ", "), AssumedOpset(d))})
	}
	return nil
}

// nodeDesc names a node in a repair: node "name" (domain.op).
func nodeDesc(n *Node) string {
	op := n.OpType
	if d := normDomainName(n.Domain); d != "" {
		op = d + "." + op
	}
	return fmt.Sprintf("node %q (%s)", ShortName(n.Name), op)
}

func normDomainName(d string) string {
	if d == "ai.onnx" {
		return ""
	}
	return d
}

// checkOrder records a repair when g's stored node order is not
// topological.
func (m *Model) checkOrder(g *Graph, where string) {
	pos := make(map[*Node]int, len(g.nodes))
	for i, n := range g.nodes {
		pos[n] = i
	}
	for i, n := range g.nodes {
		deps := append([]*Value(nil), n.inputs...)
		for _, sg := range n.Subgraphs() {
			deps = append(deps, sg.outerReads()...)
		}
		for _, v := range deps {
			if v == nil || v.producer == nil {
				continue
			}
			if j, ok := pos[v.producer]; ok && j > i {
				if where == "" {
					where = "main graph"
					if g.parent != nil {
						where = fmt.Sprintf("graph %q", g.Name)
					}
				}
				m.repairs = append(m.repairs, Repair{Kind: "order", Msg: fmt.Sprintf(
					"%s: nodes are not in topological order (%s reads %q before %s computes it): they run in dependency order; the file keeps its order",
					where, nodeDesc(n), v.Name, nodeDesc(v.producer))})
				return
			}
		}
	}
}

// walkGraphs calls f for g and every subgraph nested in its nodes.
func (g *Graph) walkGraphs(f func(*Graph)) {
	f(g)
	for _, n := range g.nodes {
		for _, sg := range n.Subgraphs() {
			sg.walkGraphs(f)
		}
	}
}
