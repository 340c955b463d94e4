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

// TestCloneNewNames: names a clone hands out are unused in the clone and
// in the original, whether or not the original had handed out names
// before (its set is then shared, not copied), and clones of clones too;
// the original's own new names stay unique in it.
func TestCloneNewNames(t *testing.T) {
	for _, collected := range []bool{false, true} {
		m := testmodels.Llama(testmodels.DefaultLlama)
		if !collected {
			var err error
			if m, err = graph.Decode(marshalOrFail(t, m), ""); err != nil { // a loaded model: no names handed out yet
				t.Fatal(err)
			}
		}
		names := map[string]bool{}
		m.Walk(func(n *graph.Node) {
			names[n.Name] = true
			for _, o := range n.Outputs() {
				names[o.Name] = true
			}
		})
		for _, v := range m.Graph.Initializers {
			names[v.Name] = true
		}
		c := m.Clone()
		cc := c.Clone()
		fresh := map[*graph.Model]map[string]bool{c: {}, cc: {}}
		for i := 0; i < 50; i++ {
			for _, x := range []*graph.Model{c, cc, c} {
				// A base the model already uses, so that suffixes are tried.
				name := x.NewName(m.Graph.Initializers[0].Name)
				if names[name] || fresh[x][name] {
					t.Fatalf("collected %v: %q handed out twice or already used", collected, name)
				}
				fresh[x][name] = true
				x.Graph.AddInitializer(mustNamed(t, name))
			}
		}
		got := map[string]bool{}
		for _, v := range c.Graph.Initializers {
			if got[v.Name] {
				t.Fatalf("collected %v: the clone has two initializers %q", collected, v.Name)
			}
			got[v.Name] = true
		}
		if n := m.NewName(m.Graph.Initializers[0].Name); names[n] {
			t.Errorf("collected %v: the original handed out %q, which it uses", collected, n)
		}
	}
}

func marshalOrFail(t *testing.T, m *graph.Model) []byte {
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustNamed(t *testing.T, name string) *graph.Tensor {
	x, err := graph.NewTensor(name, graph.Float, []int64{1}, []float32{1})
	if err != nil {
		t.Fatal(err)
	}
	return x
}
