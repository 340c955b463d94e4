package metamorph

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
)

// MatMulToEinsum writes every MatMul of the default domain (every graph)
// whose operands both have rank 2 or more as the Einsum
// "...ij,...jk->...ik" (numpy broadcasting of the batch dimensions, as
// MatMul's), keeping the node's name. Ranks come from declared types,
// initializers and a small propagation through shape-preserving and
// rank-setting ops; a MatMul whose ranks are not known stays. It returns
// the number of nodes rewritten.
func MatMulToEinsum(m *graph.Model) (*graph.Model, int, error) {
	count := 0
	for _, g := range Graphs(m) {
		ranks := inferRanks(g)
		for _, n := range g.Nodes() {
			if n.OpType != "MatMul" || !defaultDomain(n.Domain) || len(n.Inputs()) != 2 {
				continue
			}
			if ranks[n.Input(0)] < 2 || ranks[n.Input(1)] < 2 {
				continue
			}
			e := g.NewNode("Einsum", "", n.Inputs(), 1, graph.StringAttr("equation", "...ij,...jk->...ik"))
			e.Name = n.Name
			g.InsertBefore(n, e)
			n.Output(0).ReplaceKeepingName(e.Output(0))
			if err := g.Remove(n); err != nil {
				return nil, 0, err
			}
			count++
		}
	}
	if count == 0 {
		return nil, 0, notApplicable("no MatMul with both ranks known to be 2 or more")
	}
	if v := m.OpsetVersion(""); v != 0 && v < 12 {
		return nil, 0, notApplicable("opset %d has no Einsum", v)
	}
	out, err := Reencode(m)
	return out, count, err
}

func defaultDomain(d string) bool { return d == "" || d == "ai.onnx" }

// inferRanks propagates ranks through g in its order (absent: unknown),
// with the lengths of 1-D integer values (shapes) that set ranks.
func inferRanks(g *graph.Graph) map[*graph.Value]int {
	r := map[*graph.Value]int{}
	lens := map[*graph.Value]int{}
	rank := func(v *graph.Value) int {
		if v == nil {
			return -1
		}
		if k, ok := r[v]; ok {
			return k
		}
		if v.Const != nil {
			return len(v.Const.Dims())
		}
		if v.Type != nil {
			if dims, ok := v.Type.Shape(); ok {
				return len(dims)
			}
		}
		return -1
	}
	length := func(v *graph.Value) int {
		if v == nil {
			return -1
		}
		if l, ok := lens[v]; ok {
			return l
		}
		if t, ok := graph.ConstantValue(v); ok && len(t.Dims()) == 1 {
			return int(t.Dims()[0])
		}
		if v.Type != nil {
			if dims, ok := v.Type.Shape(); ok && len(dims) == 1 && dims[0].Known {
				return int(dims[0].Value)
			}
		}
		return -1
	}
	constInts := func(v *graph.Value) []int64 {
		if v == nil {
			return nil
		}
		t, ok := graph.ConstantValue(v)
		if !ok {
			return nil
		}
		x, err := t.Int64s()
		if err != nil {
			return nil
		}
		return x
	}
	for _, n := range g.Nodes() {
		if !defaultDomain(n.Domain) {
			continue
		}
		in := func(i int) int {
			if i >= len(n.Inputs()) {
				return -1
			}
			return rank(n.Input(i))
		}
		set := func(k int) {
			if k >= 0 && len(n.Outputs()) > 0 {
				r[n.Output(0)] = k
			}
		}
		setAll := func(k int) {
			for _, o := range n.Outputs() {
				if k >= 0 {
					r[o] = k
				}
			}
		}
		setLen := func(l int) {
			if l >= 0 {
				lens[n.Output(0)] = l
				r[n.Output(0)] = 1
			}
		}
		switch n.OpType {
		case "Identity", "Cast", "CastLike", "Neg", "Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Log", "Sqrt", "Abs", "Sin", "Cos",
			"Softmax", "LogSoftmax", "LayerNormalization", "Dropout", "Transpose", "Slice", "Gelu", "CumSum", "Reciprocal",
			"Not", "Clip", "Floor", "Ceil", "Round", "Sign", "Trilu", "Softplus", "HardSigmoid", "Pad", "Tile",
			"IsNaN", "IsInf", "SimplifiedLayerNormalization", "InstanceNormalization", "BatchNormalization":
			set(in(0))
			if l := length(n.Input(0)); l >= 0 && (n.OpType == "Cast" || n.OpType == "Identity" || n.OpType == "Neg" || n.OpType == "Abs") {
				setLen(l)
			}
		case "Add", "Sub", "Mul", "Div", "Where", "Equal", "Less", "Greater", "And", "Or", "Max", "Min", "Mod", "Pow",
			"LessOrEqual", "GreaterOrEqual", "Xor", "BitShift":
			k := -1
			for i := range n.Inputs() {
				ki := in(i)
				if ki < 0 {
					k = -1
					break
				}
				k = max(k, ki)
			}
			set(k)
		case "MatMul":
			a, b := in(0), in(1)
			switch {
			case a < 0 || b < 0:
			case a == 1 && b == 1:
				set(0)
			case a == 1:
				set(b - 1)
			case b == 1:
				set(a - 1)
			default:
				set(max(a, b))
			}
		case "Reshape", "ConstantOfShape":
			set(length(n.Input(len(n.Inputs()) - 1)))
		case "Expand":
			if l := length(n.Input(1)); l >= 0 && in(0) >= 0 {
				set(max(l, in(0)))
			}
		case "Unsqueeze", "Squeeze":
			axes := n.AttrInts("axes")
			if axes == nil && len(n.Inputs()) > 1 {
				axes = constInts(n.Input(1))
			}
			if axes == nil || in(0) < 0 {
				continue
			}
			if n.OpType == "Unsqueeze" {
				set(in(0) + len(axes))
				if in(0) == 0 && len(axes) == 1 {
					setLen(1)
				}
			} else {
				set(in(0) - len(axes))
			}
		case "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp":
			if n.AttrInt("keepdims", 1) == 1 {
				set(in(0))
			} else if axes := n.AttrInts("axes"); axes != nil && in(0) >= 0 {
				set(in(0) - len(axes))
			} else if len(n.Inputs()) > 1 {
				if axes := constInts(n.Input(1)); axes != nil && in(0) >= 0 {
					set(in(0) - len(axes))
				}
			}
		case "Concat":
			k := -1
			total := 0
			for i := range n.Inputs() {
				k = max(k, in(i))
				if l := length(n.Input(i)); l >= 0 && total >= 0 {
					total += l
				} else {
					total = -1
				}
			}
			set(k)
			if k == 1 && total >= 0 {
				setLen(total)
			}
		case "Split":
			setAll(in(0))
		case "Gather":
			if in(0) >= 0 && in(1) >= 0 {
				set(in(0) - 1 + in(1))
				if in(0) == 1 && in(1) == 1 {
					setLen(length(n.Input(1)))
				}
			}
		case "Shape":
			if n.Attr("start") == nil && n.Attr("end") == nil {
				setLen(in(0))
			}
			set(1)
		case "Range":
			set(1)
		case "Flatten", "Gemm":
			set(2)
		case "Constant":
			if t, err := graph.ConstantNodeValue(n); err == nil {
				set(len(t.Dims()))
				if len(t.Dims()) == 1 {
					setLen(int(t.Dims()[0]))
				}
			}
		}
	}
	return r
}

// UpgradeOpset upgrades the default domain of m (main graph, subgraphs and
// functions) to version to, converting the nodes whose signature changed
// on the way (axes and split attributes that became inputs, Softmax's
// axis, Split's num_outputs, Dropout's ratio). It returns ErrNotApplicable
// for a model already at to or newer and an error naming the node for what
// it does not convert.
func UpgradeOpset(m *graph.Model, to int64) (*graph.Model, error) {
	from := m.OpsetVersion("")
	if from == 0 {
		from = graph.AssumedOpset("")
	}
	if from >= to {
		return nil, notApplicable("the model imports opset %d", from)
	}
	if from < 11 {
		return nil, notApplicable("opset %d is older than 11", from)
	}
	for _, g := range Graphs(m) {
		ranks := inferRanks(g)
		var nodes []*graph.Node
		g.Walk(func(n *graph.Node) { nodes = append(nodes, n) })
		for _, n := range nodes {
			if n.Graph() != g {
				continue // a subgraph's: converted with its own graph
			}
			if err := upgradeNode(m, n, from, ranks); err != nil {
				return nil, fmt.Errorf("upgrading opset %d to %d: node %q (%s): %w", from, to, DisplayName(n), n.OpType, err)
			}
		}
	}
	for _, f := range m.Functions {
		f.SetOpsetVersion("", to)
	}
	m.SetOpsetVersion("", to)
	if ir := irFor(to); m.IRVersion() < ir {
		m.SetIRVersion(ir)
	}
	return Reencode(m)
}

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

// axesToInput are the ops whose axes attribute became an input, with the
// opset that made it one.
var axesToInput = map[string]int64{
	"Squeeze": 13, "Unsqueeze": 13, "ReduceSum": 13,
	"ReduceL1": 18, "ReduceL2": 18, "ReduceLogSum": 18, "ReduceLogSumExp": 18, "ReduceMax": 18,
	"ReduceMean": 18, "ReduceMin": 18, "ReduceProd": 18, "ReduceSumSquare": 18,
}

func upgradeNode(m *graph.Model, n *graph.Node, from int64, ranks map[*graph.Value]int) error {
	if !defaultDomain(n.Domain) {
		return nil
	}
	toInput := func(name string, i int, scalar bool, dt graph.DataType) error {
		a := n.Attr(name)
		if a == nil {
			return nil
		}
		if a.RefAttrName() != "" {
			return fmt.Errorf("takes %s from a function attribute", name)
		}
		var t *graph.Tensor
		var err error
		switch {
		case dt == graph.Float:
			t, err = graph.NewTensor("", graph.Float, nil, []float32{a.Float()})
		case scalar:
			t, err = graph.NewTensor("", graph.Int64, nil, []int64{a.Int()})
		default:
			v := a.Ints()
			t, err = graph.NewTensor("", graph.Int64, []int64{int64(len(v))}, v)
		}
		if err != nil {
			return err
		}
		g := n.Graph()
		c := g.NewNode("Constant", "", nil, 1, graph.TensorAttr("value", t))
		c.Name = m.NewName(DisplayName(n) + "_" + name)
		g.InsertBefore(n, c)
		for len(n.Inputs()) < i {
			n.SetInput(len(n.Inputs()), nil)
		}
		n.SetInput(i, c.Output(0))
		removeAttr(n, name)
		return nil
	}
	if v, ok := axesToInput[n.OpType]; ok && from < v {
		return toInput("axes", 1, false, graph.Int64)
	}
	switch n.OpType {
	case "Scatter", "Upsample":
		return fmt.Errorf("the op no longer exists")
	case "Split":
		if from < 13 {
			if err := toInput("split", 1, false, graph.Int64); err != nil {
				return err
			}
		}
		if from < 18 && (len(n.Inputs()) < 2 || n.Input(1) == nil) && n.Attr("num_outputs") == nil {
			n.SetAttr(graph.IntAttr("num_outputs", int64(len(n.Outputs()))))
		}
	case "Softmax", "LogSoftmax", "Hardmax":
		if from >= 13 {
			return nil
		}
		axis := n.AttrInt("axis", 1)
		if r, ok := ranks[n.Input(0)]; ok && r > 0 && (axis == -1 || axis == int64(r-1)) {
			n.SetAttr(graph.IntAttr("axis", -1))
			return nil
		}
		// The old semantics: the input flattened to 2-D at axis, the op
		// along the second dimension, the result reshaped back.
		g := n.Graph()
		x := n.Input(0)
		fl := g.NewNode("Flatten", "", []*graph.Value{x}, 1, graph.IntAttr("axis", axis))
		fl.Name = m.NewName(DisplayName(n) + "_flatten")
		sh := g.NewNode("Shape", "", []*graph.Value{x}, 1)
		sh.Name = m.NewName(DisplayName(n) + "_shape")
		sm := g.NewNode(n.OpType, "", []*graph.Value{fl.Output(0)}, 1, graph.IntAttr("axis", -1))
		sm.Name = m.NewName(DisplayName(n) + "_2d")
		rs := g.NewNode("Reshape", "", []*graph.Value{sm.Output(0), sh.Output(0)}, 1)
		rs.Name = DisplayName(n)
		for _, k := range []*graph.Node{fl, sh, sm, rs} {
			g.InsertBefore(n, k)
		}
		n.Output(0).ReplaceKeepingName(rs.Output(0))
		return g.Remove(n)
	case "Dropout":
		if from < 12 {
			return toInput("ratio", 1, true, graph.Float)
		}
	case "BatchNormalization":
		if from < 14 && len(n.Outputs()) > 1 {
			for _, o := range n.Outputs()[1:] {
				if o.Name != "" {
					return fmt.Errorf("computes training statistics")
				}
			}
		}
	case "GroupNormalization":
		if from < 21 {
			return fmt.Errorf("per-group scale and bias became per-channel in opset 21")
		}
	}
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

// ExternalData saves m with every tensor of 64 bytes or more in a side
// file under dir and loads it back from there: the weights are then
// external data, read lazily from the file.
func ExternalData(m *graph.Model, dir string) (*graph.Model, int, error) {
	path := filepath.Join(dir, "model.onnx")
	if err := m.Save(path, graph.SaveOptions{External: graph.ExternalizeLarge, Threshold: 64, Location: "model.onnx.data"}); err != nil {
		return nil, 0, err
	}
	out, err := graph.Load(path)
	if err != nil {
		return nil, 0, err
	}
	count := 0
	for _, g := range Graphs(out) {
		for _, v := range g.Initializers {
			if v.Const != nil && v.Const.IsExternal() {
				count++
			}
		}
	}
	if count == 0 {
		return nil, 0, notApplicable("no tensor of 64 bytes or more")
	}
	if _, err := os.Stat(path + ".data"); err != nil {
		return nil, 0, err
	}
	return out, count, nil
}

// WrapInIf moves every node of the main graph into the then branch of an
// If whose condition is a constant true (a bool initializer); the else
// branch is a second copy of the same nodes. Graph inputs and initializers
// stay in the main graph (the branches read them from the outer scope);
// the nodes of the then branch keep their names, the else branch's get
// "_else" appended, and the main graph's outputs keep theirs. Models whose
// main graph holds nodes with subgraphs of their own are refused.
func WrapInIf(m *graph.Model) (*graph.Model, error) {
	g := m.Graph
	if err := g.TopoSort(); err != nil {
		return nil, err
	}
	nodes := g.Nodes()
	if len(nodes) == 0 {
		return nil, notApplicable("no node")
	}
	for _, n := range nodes {
		if len(n.Subgraphs()) > 0 {
			return nil, notApplicable("node %s holds subgraphs", DisplayName(n))
		}
	}
	cond, err := graph.NewTensor(m.NewName("if_cond"), graph.Bool, nil, []bool{true})
	if err != nil {
		return nil, err
	}
	cv := g.AddInitializer(cond)
	branch := func(name, suffix string) (*graph.Graph, error) {
		sg := g.NewSubgraph(m.NewName(name))
		vmap := map[*graph.Value]*graph.Value{}
		for _, n := range nodes {
			var ins []*graph.Value
			for _, v := range n.Inputs() {
				if w, ok := vmap[v]; ok {
					ins = append(ins, w)
				} else {
					ins = append(ins, v) // a graph input or initializer, or nil
				}
			}
			nn := sg.NewNode(n.OpType, n.Domain, ins, len(n.Outputs()), n.Attrs...)
			nn.Name = n.Name
			if nn.Name != "" {
				nn.Name += suffix
			}
			sg.Append(nn)
			for i, o := range n.Outputs() {
				vmap[o] = nn.Output(i)
				if o.Name != "" {
					if err := sg.RenameValue(nn.Output(i), o.Name+suffix); err != nil {
						return nil, err
					}
				}
			}
		}
		for _, o := range g.Outputs {
			w, ok := vmap[o]
			if !ok {
				id := sg.NewNode("Identity", "", []*graph.Value{o}, 1)
				sg.Append(id)
				w = id.Output(0)
			}
			sg.AddOutput(w)
		}
		return sg, nil
	}
	// The then branch's values take the names they had, after the main
	// graph's nodes are gone; its outputs are renamed (the If's outputs
	// take the graph outputs' names).
	elseG, err := branch("else_branch", "_else")
	if err != nil {
		return nil, err
	}
	thenG, err := branch("then_branch", "_then")
	if err != nil {
		return nil, err
	}
	outs := slices2(g.Outputs)
	ifn := g.NewNode("If", "", []*graph.Value{cv}, len(outs), graph.GraphAttr("then_branch", thenG), graph.GraphAttr("else_branch", elseG))
	ifn.Name = m.NewName("wrap_if")
	g.Append(ifn)
	for i, o := range outs {
		if o.Producer() == nil {
			return nil, notApplicable("graph output %s is an input or initializer", o.Name)
		}
		o.ReplaceKeepingName(ifn.Output(i))
		ifn.Output(i).Type = o.Type
	}
	// The old nodes go, readers first (the graph's order need not be
	// topological).
	for left := nodes; len(left) > 0; {
		var keep []*graph.Node
		for i := len(left) - 1; i >= 0; i-- {
			if g.Remove(left[i]) != nil {
				keep = append(keep, left[i])
			}
		}
		if len(keep) == len(left) {
			return nil, fmt.Errorf("%d nodes of the main graph cannot be removed: %v", len(keep), g.Remove(keep[0]))
		}
		slices.Reverse(keep)
		left = keep
	}
	// Now that the main graph's values are gone, the then branch's take
	// their names back (its outputs keep the suffix).
	isOut := map[*graph.Value]bool{}
	for _, o := range thenG.Outputs {
		isOut[o] = true
	}
	for _, n := range thenG.Nodes() {
		n.Name = strings.TrimSuffix(n.Name, "_then")
		for _, o := range n.Outputs() {
			if o.Name != "" && !isOut[o] {
				// A name the main graph still holds keeps the suffix.
				_ = thenG.RenameValue(o, strings.TrimSuffix(o.Name, "_then"))
			}
		}
	}
	return Reencode(m)
}

func slices2[T any](s []T) []T { return append([]T(nil), s...) }
