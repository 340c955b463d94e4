package rewrite

import (
	"fmt"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/work"
)

// upgradeOpset upgrades the default domain of m to version to, converting
// the nodes whose signature changed on the way as ONNX's version converter
// does (attributes that became inputs, Softmax's axis, Split's
// num_outputs, GridSample's mode names, GroupNormalization's per-channel
// scale), in the main graph, its subgraphs and the model-local functions.
// It refuses, naming the node and op, what cannot be converted: an op that
// no longer exists, a training-mode BatchNormalization, an attribute that
// must become an input but is a function's attribute reference.
// rank, when not nil, gives the rank of a value (-1 when unknown).
func upgradeOpset(m *graph.Model, to int64, rank func(*graph.Value) int) error {
	from := m.OpsetVersion("")
	if from == 0 {
		from = graph.AssumedOpset("")
	}
	if from >= to {
		return nil
	}
	if from < 11 {
		return fmt.Errorf("%w: the model imports opset %d; onnxpe upgrades models from opset 11 on to %d", ErrRewrite, from, to)
	}
	if rank == nil {
		rank = func(*graph.Value) int { return -1 }
	}
	cv := &converter{m: m, from: from, to: to, rank: rank}
	// Nodes are listed first: converting one inserts nodes before it.
	convert := func(g *graph.Graph, v int64) error {
		var nodes []*graph.Node
		g.Walk(func(n *graph.Node) { nodes = append(nodes, n) })
		for _, n := range nodes {
			if err := cv.node(n, v); err != nil {
				return err
			}
		}
		return nil
	}
	if err := convert(m.Graph, from); err != nil {
		return err
	}
	for _, f := range m.Functions {
		fv := int64(0)
		for _, o := range f.Opsets() {
			if o.Domain == "" || o.Domain == "ai.onnx" {
				fv = o.Version
			}
		}
		if fv == 0 || fv >= to {
			continue
		}
		if fv < 11 {
			return fmt.Errorf("%w: function %s imports opset %d; onnxpe upgrades from opset 11 on", ErrRewrite, f.Name, fv)
		}
		if err := convert(f.Body, fv); err != nil {
			return err
		}
		f.SetOpsetVersion("", to)
	}
	m.SetOpsetVersion("", to)
	if m.IRVersion() < irFor(to) {
		m.SetIRVersion(irFor(to))
	}
	return nil
}

// irFor is the first IR version that knows opset v of the default domain.
func irFor(v int64) int64 {
	switch {
	case v >= 23:
		return 11
	case v >= 21:
		return 10
	case v >= 19:
		return 9
	case v >= 15:
		return 8
	}
	return 7
}

type converter struct {
	m        *graph.Model
	from, to int64
	rank     func(*graph.Value) int
}

// removed are default-domain ops that opset 23 no longer has.
var removed = map[string]string{
	"Scatter":  "deprecated in opset 11 (ScatterElements replaces it)",
	"Upsample": "deprecated in opset 10 (Resize replaces it)",
}

// axesToInput lists the ops whose axes attribute became an input, with the
// opset that made it one.
var axesToInput = map[string]int64{
	"Squeeze": 13, "Unsqueeze": 13, "ReduceSum": 13,
	"ReduceL1": 18, "ReduceL2": 18, "ReduceLogSum": 18, "ReduceLogSumExp": 18, "ReduceMax": 18,
	"ReduceMean": 18, "ReduceMin": 18, "ReduceProd": 18, "ReduceSumSquare": 18,
}

func (cv *converter) fail(n *graph.Node, format string, args ...any) error {
	return fmt.Errorf("%w: upgrading opset %d to %d: node %q (%s) %s", ErrRewrite, cv.from, cv.to, work.NodeName(n), n.OpType, fmt.Sprintf(format, args...))
}

// attrToInput moves attribute name of n to input i as an int64 constant
// (a 1-D tensor), unless it is absent.
func (cv *converter) attrToInput(n *graph.Node, name string, i int) error {
	a := n.Attr(name)
	if a == nil {
		return nil
	}
	if a.RefAttrName() != "" {
		return cv.fail(n, "takes %s from a function attribute (%s); as an input it would need a value", name, a.RefAttrName())
	}
	vals := a.Ints()
	t, err := graph.NewTensor(cv.m.NewName(work.NodeName(n)+"_"+name), graph.Int64, []int64{int64(len(vals))}, vals)
	if err != nil {
		return err
	}
	g := n.Graph()
	c := g.NewNode("Constant", "", nil, 1, graph.TensorAttr("value", t))
	c.Name = cv.m.NewName(work.NodeName(n) + "_" + name)
	g.InsertBefore(n, c)
	for len(n.Inputs()) < i {
		n.SetInput(len(n.Inputs()), nil)
	}
	n.SetInput(i, c.Output(0))
	removeAttr(n, name)
	return nil
}

func removeAttr(n *graph.Node, name string) {
	out := n.Attrs[:0]
	for _, a := range n.Attrs {
		if a.Name() != name {
			out = append(out, a)
		}
	}
	n.Attrs = out
}

// node converts one node of the default domain from opset from.
func (cv *converter) node(n *graph.Node, from int64) error {
	if n.Domain != "" && n.Domain != "ai.onnx" {
		return nil
	}
	if why, ok := removed[n.OpType]; ok {
		return cv.fail(n, "cannot be converted: it is %s", why)
	}
	if v, ok := axesToInput[n.OpType]; ok && from < v {
		return cv.attrToInput(n, "axes", 1)
	}
	switch n.OpType {
	case "Split":
		if from < 13 {
			if err := cv.attrToInput(n, "split", 1); err != nil {
				return err
			}
		}
		if from < 18 && n.Input(1) == nil && n.Attr("num_outputs") == nil {
			n.SetAttr(graph.IntAttr("num_outputs", int64(len(n.Outputs()))))
		}
	case "Softmax", "LogSoftmax", "Hardmax":
		if from >= 13 {
			return nil
		}
		axis := n.AttrInt("axis", 1)
		if r := cv.rank(n.Input(0)); r > 0 && (axis == -1 || axis == int64(r-1)) {
			n.SetAttr(graph.IntAttr("axis", -1))
			return nil
		}
		// The old semantics: the input flattened to 2-D at axis, the op
		// along the second dimension, the result reshaped back.
		g := n.Graph()
		x := n.Input(0)
		fl := g.NewNode("Flatten", "", []*graph.Value{x}, 1, graph.IntAttr("axis", axis))
		fl.Name = cv.m.NewName(work.NodeName(n) + "_flatten")
		sh := g.NewNode("Shape", "", []*graph.Value{x}, 1)
		sh.Name = cv.m.NewName(work.NodeName(n) + "_shape")
		g.InsertBefore(n, fl)
		g.InsertBefore(n, sh)
		out := n.Output(0)
		sm := g.NewNode(n.OpType, "", []*graph.Value{fl.Output(0)}, 1, graph.IntAttr("axis", -1))
		sm.Name = cv.m.NewName(work.NodeName(n) + "_2d")
		g.InsertBefore(n, sm)
		rs := g.NewNode("Reshape", "", []*graph.Value{sm.Output(0), sh.Output(0)}, 1)
		rs.Name = cv.m.NewName(work.NodeName(n) + "_back")
		g.InsertBefore(n, rs)
		out.ReplaceKeepingName(rs.Output(0))
		return g.Remove(n)
	case "Dropout":
		if from < 12 {
			if a := n.Attr("ratio"); a != nil {
				t, err := graph.NewTensor(cv.m.NewName(work.NodeName(n)+"_ratio"), graph.Float, nil, []float32{a.Float()})
				if err != nil {
					return err
				}
				g := n.Graph()
				c := g.NewNode("Constant", "", nil, 1, graph.TensorAttr("value", t))
				c.Name = cv.m.NewName(work.NodeName(n) + "_ratio")
				g.InsertBefore(n, c)
				n.SetInput(1, c.Output(0))
				removeAttr(n, "ratio")
			}
		}
	case "BatchNormalization":
		if from < 14 {
			for _, o := range n.Outputs()[1:] {
				if o.Name != "" {
					return cv.fail(n, "computes training statistics (outputs beyond the first), which opset 14 reorganised")
				}
			}
		}
	case "DFT":
		if from < 20 {
			if a := n.Attr("axis"); a != nil {
				t, err := graph.NewTensor(cv.m.NewName(work.NodeName(n)+"_axis"), graph.Int64, nil, []int64{a.Int()})
				if err != nil {
					return err
				}
				g := n.Graph()
				c := g.NewNode("Constant", "", nil, 1, graph.TensorAttr("value", t))
				c.Name = cv.m.NewName(work.NodeName(n) + "_axis")
				g.InsertBefore(n, c)
				for len(n.Inputs()) < 2 {
					n.SetInput(len(n.Inputs()), nil)
				}
				n.SetInput(2, c.Output(0))
				removeAttr(n, "axis")
			}
		}
	case "GridSample":
		if from < 20 {
			switch n.AttrString("mode", "bilinear") {
			case "bilinear":
				n.SetAttr(graph.StringAttr("mode", "linear"))
			case "bicubic":
				n.SetAttr(graph.StringAttr("mode", "cubic"))
			}
		}
	case "GroupNormalization":
		if from < 21 {
			return cv.fail(n, "has per-group scale and bias, which opset 21 made per-channel; onnxpe does not convert it")
		}
	}
	return nil
}
