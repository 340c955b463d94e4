package metamorph

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// PinShapes gives every input the caller feeds a static shape: each
// dynamic dimension takes sizes[param] (its dim_param's name), else def.
// It returns the pinned sizes of each input.
func PinShapes(m *graph.Model, sizes map[string]int, def int) (map[string][]int, error) {
	out := map[string][]int{}
	for _, v := range kernels.FeedInputs(m) {
		if v.Type == nil || !v.Type.IsTensor() {
			return nil, fmt.Errorf("input %s has no tensor type", v.Name)
		}
		dims, ok := v.Type.Shape()
		if !ok {
			return nil, fmt.Errorf("input %s has no shape", v.Name)
		}
		shape := make([]int, len(dims))
		sz := make([]int64, len(dims))
		for i, d := range dims {
			switch {
			case d.Known:
				shape[i] = int(d.Value)
			case d.Param != "" && sizes[d.Param] > 0:
				shape[i] = sizes[d.Param]
			default:
				shape[i] = def
			}
			sz[i] = int64(shape[i])
		}
		v.Type = graph.TensorType(v.Type.ElemType(), graph.Dims(sz...))
		out[v.Name] = shape
	}
	return out, nil
}

// SampleInputs makes inputs of the pinned shapes: zeros for integers
// (token 0, position 0 exist in every model), true for bools, and numbers
// in [-1, 1) for floats.
func SampleInputs(m *graph.Model, shapes map[string][]int, seed uint64) (map[string]*kernels.Tensor, error) {
	rng := rand.New(rand.NewPCG(seed, 3))
	out := map[string]*kernels.Tensor{}
	for _, v := range kernels.FeedInputs(m) {
		shape, ok := shapes[v.Name]
		if !ok {
			return nil, fmt.Errorf("no shape for input %s", v.Name)
		}
		n := 1
		dims := make([]int64, len(shape))
		for i, d := range shape {
			n *= d
			dims[i] = int64(d)
		}
		dt := v.Type.ElemType()
		var data any
		switch {
		case dt == graph.Bool:
			b := make([]bool, n)
			for i := range b {
				b[i] = true
			}
			data = b
		case dt.IsFloat():
			f := make([]float64, n)
			for i := range f {
				f[i] = 2*rng.Float64() - 1
			}
			t, err := graph.TensorFromFloat64(v.Name, dt, dims, f)
			if err != nil {
				return nil, err
			}
			kt, err := kernels.FromGraph(t)
			if err != nil {
				return nil, err
			}
			out[v.Name] = kt
			continue
		case dt.IsInt():
			out[v.Name] = kernels.New(dt, shape...)
			continue
		default:
			return nil, fmt.Errorf("input %s: element type %v", v.Name, dt)
		}
		t, err := graph.NewTensor(v.Name, dt, dims, data)
		if err != nil {
			return nil, err
		}
		if out[v.Name], err = kernels.FromGraph(t); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// FoldValues constant-folds what the nodes named carry (names as reports
// print them, DisplayName) in m's main graph, whose inputs must have static
// shapes (PinShapes): of those nodes, the outputs that do not depend on
// the values of the graph's inputs (only on their shapes and on constants)
// and do not read a stored table (tables stay: the positions that index
// them are folded), and that a node outside that set reads, are evaluated
// with the executor
// on inputs, and stored as initializers in their place; the nodes no
// longer needed are removed. It returns the number of values stored and
// the names of the nodes removed.
func FoldValues(m *graph.Model, nodes []string, inputs map[string]*kernels.Tensor) (*graph.Model, int, []string, error) {
	g := m.Graph
	want := map[string]bool{}
	for _, n := range nodes {
		want[n] = true
	}
	// Values that depend on the inputs' values: the inputs, then every
	// output of a node reading one, except Shape and Size (static
	// shapes) and nodes holding subgraphs, which count as dependent.
	dep := map[*graph.Value]bool{}
	for _, v := range kernels.FeedInputs(m) {
		dep[v] = true
	}
	for _, n := range g.Nodes() {
		d := len(n.Subgraphs()) > 0 || !defaultDomain(n.Domain) || n.OpType == "RandomNormal" ||
			n.OpType == "RandomUniform" || n.OpType == "RandomNormalLike" || n.OpType == "RandomUniformLike" || n.OpType == "Multinomial"
		if n.OpType != "Shape" && n.OpType != "Size" {
			for _, v := range n.Inputs() {
				if dep[v] {
					d = true
				}
			}
		}
		if d {
			for _, o := range n.Outputs() {
				dep[o] = true
			}
		}
	}
	// Stored tables stay: a node reading a table (a Gather or Slice of an
	// initializer or Constant of rank 2 or more), and every node after
	// one, is not folded; what it reads is (the positions it gathers).
	// So do a layer's weights: a product with a weight matrix (a
	// projection of the encoding, Transformer-XL's W_r) is the layer's,
	// not the encoding's, and is not folded into it.
	isTable := func(v *graph.Value) bool {
		t, ok := graph.ConstantValue(v)
		return ok && len(t.Dims()) >= 2
	}
	readsTable := map[*graph.Node]bool{}
	for _, n := range g.Nodes() {
		switch n.OpType {
		case "Gather", "GatherElements", "GatherND", "Slice":
			if len(n.Inputs()) > 0 && isTable(n.Input(0)) {
				readsTable[n] = true
			}
		case "MatMul", "Gemm", "Einsum":
			for _, v := range n.Inputs() {
				if v != nil && isTable(v) {
					readsTable[n] = true
				}
			}
		}
		for _, v := range n.Inputs() {
			if v != nil && v.Producer() != nil && readsTable[v.Producer()] {
				readsTable[n] = true
			}
		}
	}
	inSet := map[*graph.Node]bool{}
	for _, n := range g.Nodes() {
		if want[DisplayName(n)] && n.OpType != "Constant" && !dep[n.Output(0)] && !readsTable[n] {
			inSet[n] = true
		}
	}
	var fold []*graph.Value
	for n := range inSet {
		for _, o := range n.Outputs() {
			if o.Name == "" || dep[o] {
				continue
			}
			outside := o.IsGraphOutput()
			for _, u := range o.Uses() {
				if !inSet[u.Node] {
					outside = true
				}
			}
			if outside {
				fold = append(fold, o)
			}
		}
	}
	if len(fold) == 0 {
		return nil, 0, nil, notApplicable("no node of the finding computes a value independent of the inputs' values")
	}
	slices.SortFunc(fold, func(a, b *graph.Value) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	s, err := kernels.NewSession(m, kernels.Options{})
	if err != nil {
		return nil, 0, nil, err
	}
	names := make([]string, len(fold))
	for i, v := range fold {
		names[i] = v.Name
	}
	vals, err := s.Eval(inputs, names)
	if err != nil {
		return nil, 0, nil, err
	}
	before := map[string]bool{}
	for _, n := range g.Nodes() {
		before[DisplayName(n)] = true
	}
	for _, v := range fold {
		t, err := vals[v.Name].ToGraph(m.NewName(v.Name + "_folded"))
		if err != nil {
			return nil, 0, nil, err
		}
		c := g.AddInitializer(t)
		v.ReplaceKeepingName(c)
	}
	g.EliminateDeadCode()
	after := map[string]bool{}
	for _, n := range g.Nodes() {
		after[DisplayName(n)] = true
	}
	var removed []string
	for n := range before {
		if !after[n] {
			removed = append(removed, n)
		}
	}
	slices.Sort(removed)
	out, err := Reencode(m)
	return out, len(fold), removed, err
}
