package rewrite

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// opsetModel builds x [2, 3, 4] -> ops at opset v -> y.
func opsetModel(v int64, build func(g *graph.Graph, x *graph.Value) *graph.Value) *graph.Model {
	m := graph.NewModel(7, "test", graph.Opset{Version: v})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, graph.Dims(2, 3, 4)))
	g.AddOutput(build(g, x))
	return m
}

func runModel(t *testing.T, m *graph.Model) []float64 {
	t.Helper()
	s, err := kernels.NewSession(m, kernels.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 24)
	for i := range x {
		x[i] = float32(i%7) - 2.5
	}
	out, err := s.Run(map[string]*kernels.Tensor{"x": kernels.FromSlice([]int{2, 3, 4}, x)})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out {
		return o.Float64s()
	}
	return nil
}

// TestUpgradeOpset converts the ops whose signature changed between
// opset 11 and 23 and checks that each computes what it did.
func TestUpgradeOpset(t *testing.T) {
	cases := []struct {
		name  string
		from  int64
		build func(g *graph.Graph, x *graph.Value) *graph.Value
	}{
		{"unsqueeze+squeeze axes", 11, func(g *graph.Graph, x *graph.Value) *graph.Value {
			u := g.Op("Unsqueeze", []*graph.Value{x}, 1, graph.IntsAttr("axes", 1))[0]
			return g.Op("Squeeze", []*graph.Value{u}, 1, graph.IntsAttr("axes", 1))[0]
		}},
		{"five nodes converted in a row (inserting must not skip the last)", 11, func(g *graph.Graph, x *graph.Value) *graph.Value {
			v := x
			for i := 0; i < 5; i++ {
				op := "Unsqueeze"
				if i%2 == 1 {
					op = "Squeeze"
				}
				v = g.Op(op, []*graph.Value{v}, 1, graph.IntsAttr("axes", 0))[0]
			}
			return g.Op("Squeeze", []*graph.Value{v}, 1, graph.IntsAttr("axes", 0))[0]
		}},
		{"reduce sum and mean", 12, func(g *graph.Graph, x *graph.Value) *graph.Value {
			s := g.Op("ReduceSum", []*graph.Value{x}, 1, graph.IntsAttr("axes", -1))[0]
			return g.Op("ReduceMean", []*graph.Value{s}, 1, graph.IntsAttr("axes", 1), graph.IntAttr("keepdims", 0))[0]
		}},
		{"softmax over the middle axis, flattened", 11, func(g *graph.Graph, x *graph.Value) *graph.Value {
			return g.Op("Softmax", []*graph.Value{x}, 1, graph.IntAttr("axis", 1))[0]
		}},
		{"log-softmax over the last axis", 12, func(g *graph.Graph, x *graph.Value) *graph.Value {
			return g.Op("LogSoftmax", []*graph.Value{x}, 1, graph.IntAttr("axis", 2))[0]
		}},
		{"split by sizes", 11, func(g *graph.Graph, x *graph.Value) *graph.Value {
			o := g.Op("Split", []*graph.Value{x}, 2, graph.IntAttr("axis", 2), graph.IntsAttr("split", 1, 3))
			return g.Op("Concat", []*graph.Value{o[1], o[0]}, 1, graph.IntAttr("axis", 2))[0]
		}},
		{"split in equal parts", 17, func(g *graph.Graph, x *graph.Value) *graph.Value {
			o := g.Op("Split", []*graph.Value{x}, 2, graph.IntAttr("axis", 2))
			return g.Op("Sub", []*graph.Value{o[1], o[0]}, 1)[0]
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := opsetModel(c.from, c.build)
			want := runModel(t, m)
			if err := upgradeOpset(m, 23, nil); err != nil {
				t.Fatal(err)
			}
			if m.OpsetVersion("") != 23 || m.IRVersion() < 11 {
				t.Fatalf("opset %d, IR %d", m.OpsetVersion(""), m.IRVersion())
			}
			m.Walk(func(n *graph.Node) {
				for _, a := range []string{"axes", "split"} {
					if n.Attr(a) != nil {
						t.Errorf("%s keeps attribute %s", n.OpType, a)
					}
				}
			})
			got := runModel(t, m)
			if !slices.Equal(got, want) {
				t.Errorf("after the upgrade %v, before %v", got, want)
			}
		})
	}
}

func TestUpgradeOpsetRefusesWhatItCannotConvert(t *testing.T) {
	m := opsetModel(11, func(g *graph.Graph, x *graph.Value) *graph.Value {
		idx := g.AddInitializer(mustTensor(graph.NewTensor("idx", graph.Int64, []int64{2, 3, 4}, make([]int64, 24))))
		n := g.NewNode("Scatter", "", []*graph.Value{x, idx, x}, 1)
		n.Name = "old_scatter"
		g.Append(n)
		return n.Output(0)
	})
	err := upgradeOpset(m, 23, nil)
	if !errors.Is(err, ErrRewrite) || !strings.Contains(err.Error(), `"old_scatter" (Scatter)`) {
		t.Fatalf("got %v, want an error naming the Scatter node", err)
	}
}

func mustTensor(t *graph.Tensor, err error) *graph.Tensor {
	if err != nil {
		panic(err)
	}
	return t
}
