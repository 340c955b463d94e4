package verify

import (
	"fmt"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// Divergence is where two graphs first compute different values, found
// by comparing the intermediate values both compute under the same name.
type Divergence struct {
	// Set is the input set run (the smallest one that differs).
	Set string `json:"set"`
	// Shared counts the values compared (node outputs both graphs name
	// alike, with the same type and shape).
	Shared int `json:"shared"`
	// Value is the first of them, in A's order, that differs; empty when
	// all agree (the difference then comes from nodes only one graph has).
	Value string `json:"value,omitempty"`
	NodeA string `json:"node_a,omitempty"`
	OpA   string `json:"op_a,omitempty"`
	NodeB string `json:"node_b,omitempty"`
	OpB   string `json:"op_b,omitempty"`
	// Diff compares the value in A and B.
	Diff *OutputDiff `json:"diff,omitempty"`
	// Agreeing are the node's inputs that both graphs compute alike.
	Agreeing []string `json:"agreeing_inputs,omitempty"`
	// LastAgreeing is the last shared value (in A's order) before Value
	// that agrees.
	LastAgreeing string `json:"last_agreeing,omitempty"`
	Summary      string `json:"summary"`
}

// bisect runs both models on the smallest differing set with every
// shared intermediate value exposed, in onnxpe's kernels.
func (c *comparison) bisect(a, b *graph.Model) (*Divergence, error) {
	var set *inputSet
	best := -1
	for i, s := range c.rep.Sets {
		if s.Equal || s.Error != "" {
			continue
		}
		for _, st := range c.sets {
			if st.name != s.Name {
				continue
			}
			n := 0
			for _, t := range st.inputs {
				n += t.Len()
			}
			if best < 0 || n < best {
				best, set = n, st
			}
		}
		_ = i
	}
	if set == nil {
		return nil, fmt.Errorf("no input set that both models ran differs")
	}
	type shared struct {
		va, vb *graph.Value
	}
	var list []shared
	for _, n := range a.Graph.Nodes() {
		for _, o := range n.Outputs() {
			if o.Name == "" {
				continue
			}
			w := b.Graph.Lookup(o.Name)
			if w == nil || w.Producer() == nil || w.Graph() != b.Graph {
				continue
			}
			list = append(list, shared{o, w})
		}
	}
	if len(list) == 0 {
		return &Divergence{Set: set.name, Summary: "the graphs compute no value under the same name: nothing to bisect"}, nil
	}
	names := make([]string, len(list))
	for i, s := range list {
		names[i] = s.va.Name
	}
	c.progress("bisect: A go: " + set.name)
	outA, err := runExposed(a, names, set.inputs, c.opts.Threads)
	if err != nil {
		return nil, fmt.Errorf("model A: %w", err)
	}
	c.progress("bisect: B go: " + set.name)
	outB, err := runExposed(b, names, set.inputs, c.opts.Threads)
	if err != nil {
		return nil, fmt.Errorf("model B: %w", err)
	}
	d := &Divergence{Set: set.name}
	agree := map[string]bool{}
	for _, s := range list {
		ta, tb := outA[s.va.Name], outB[s.va.Name]
		if ta == nil || tb == nil || ta.IsSequence() || tb.IsSequence() || ta.DType != tb.DType || !sameShape(ta.Shape, tb.Shape) {
			continue
		}
		d.Shared++
		diff := diffTensors(s.va.Name, ta, tb, c.opts.Policy.For(ta.DType), c.an.positionMapFor(s.va, set, ta.Shape))
		if diff.Equal {
			agree[s.va.Name] = true
			if d.Value == "" {
				d.LastAgreeing = s.va.Name
			}
			continue
		}
		if d.Value != "" {
			continue
		}
		d.Value = s.va.Name
		pa, pb := s.va.Producer(), s.vb.Producer()
		d.NodeA, d.OpA = pa.Name, opLabel(pa)
		d.NodeB, d.OpB = pb.Name, opLabel(pb)
		d.Diff = &diff
		for _, in := range pa.Inputs() {
			if in != nil && agree[in.Name] {
				d.Agreeing = append(d.Agreeing, in.Name)
			}
		}
	}
	switch {
	case d.Value == "":
		d.Summary = fmt.Sprintf("all %d values both graphs compute under the same name agree on set %s; the difference comes from nodes only one graph has", d.Shared, set.name)
		if d.LastAgreeing != "" {
			d.Summary += " (after " + d.LastAgreeing + ")"
		}
	default:
		d.Summary = fmt.Sprintf("first divergence on set %s: value %q, computed by node %q (%s) in A and %q (%s) in B: %s",
			set.name, d.Value, d.NodeA, d.OpA, d.NodeB, d.OpB, describeMismatch(*d.Diff))
		if len(d.Agreeing) > 0 {
			d.Summary += "; its inputs " + strings.Join(d.Agreeing, ", ") + " agree"
		}
	}
	return d, nil
}

func opLabel(n *graph.Node) string {
	if n.Domain != "" && n.Domain != "ai.onnx" {
		return n.Domain + "." + n.OpType
	}
	return n.OpType
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// runExposed runs m returning the named values.
func runExposed(m *graph.Model, names []string, in map[string]*kernels.Tensor, threads int) (map[string]*kernels.Tensor, error) {
	r, err := newGoRunner(m, threads, names)
	if err != nil {
		return nil, err
	}
	defer r.close()
	return r.run(in, nil)
}
