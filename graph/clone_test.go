package graph_test

import (
	"bytes"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/testmodels"
)

func TestCloneIsIndependent(t *testing.T) {
	models := map[string]*graph.Model{"llama": testmodels.Llama(testmodels.DefaultLlama)}
	for _, s := range testmodels.Synthetics() {
		models[s.Name] = s.Build()
	}
	for name, m := range models {
		want, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		c := m.Clone()
		got, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the clone does not encode as the original", name)
		}
		// Edit the clone everywhere: the original must not change.
		c.Graph.Walk(func(n *graph.Node) {
			for i, in := range n.Inputs() {
				if in != nil && in.Const != nil {
					n.SetInput(i, nil)
				}
			}
		})
		nodes := c.Graph.Nodes()
		last := nodes[len(nodes)-1]
		for _, o := range last.Outputs() {
			o.Name = "renamed_in_clone"
		}
		c.Graph.AddInitializer(mustFloat(t))
		c.Graph.EliminateDeadCode()
		if after, _ := m.Marshal(); !bytes.Equal(after, want) {
			t.Errorf("%s: editing the clone changed the original", name)
		}
		if err := m.Graph.CheckAcyclic(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		for _, n := range m.Graph.Nodes() {
			for _, in := range n.Inputs() {
				if in == nil {
					continue
				}
				found := false
				for _, u := range in.Uses() {
					if u.Node == n {
						found = true
					}
				}
				if !found {
					t.Fatalf("%s: node %v reads %s, which does not list it", name, n, in.Name)
				}
			}
		}
	}
}

func mustFloat(t *testing.T) *graph.Tensor {
	x, err := graph.NewTensor("added", graph.Float, []int64{1}, []float32{1})
	if err != nil {
		t.Fatal(err)
	}
	return x
}
