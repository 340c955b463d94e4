package kernels

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
)

// DomainML is the domain of ONNX's classical machine-learning ops.
const DomainML = "ai.onnx.ml"

// The ai.onnx.ml ops of ONNX's backend tests: Binarizer,
// ArrayFeatureExtractor, LabelEncoder and TreeEnsemble (version 5).

func binarizer(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	th := float64(c.Float("threshold", 0))
	v := x.Float64s()
	for i, e := range v {
		if e > th {
			v[i] = 1
		} else {
			v[i] = 0
		}
	}
	out := c.alloc(x.DType, x.Shape...)
	fromFloat64(out, v)
	return []*Tensor{out}, nil
}

// arrayFeatureExtractor selects elements along the last axis (a 1-D input
// gives one row).
func arrayFeatureExtractor(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, idx := in[0], in[1].Int64s()
	if len(x.Shape) == 0 {
		return nil, fmt.Errorf("input must have at least one axis")
	}
	last := x.Shape[len(x.Shape)-1]
	shape := slices.Clone(x.Shape[:len(x.Shape)-1])
	if len(shape) == 0 {
		shape = []int{1}
	}
	shape = append(shape, len(idx))
	out := c.alloc(x.DType, shape...)
	rows := x.Len() / max(last, 1)
	if last == 0 {
		rows = shapeSize(x.Shape[:len(x.Shape)-1])
	}
	for _, k := range idx {
		if k < 0 || k >= int64(last) {
			return nil, fmt.Errorf("index %d outside the last axis of %d", k, last)
		}
	}
	for r := range rows {
		for j, k := range idx {
			copyAny(out, r*len(idx)+j, x, r*last+int(k), 1)
		}
	}
	return []*Tensor{out}, nil
}

// attrValues reads a LabelEncoder key or value list: the named list
// attribute of each kind, or the tensor attribute; it returns the values
// as a tensor.
func attrValues(c *Call, prefix string) (*Tensor, error) {
	if a := c.Attr(prefix + "_tensor"); a != nil && a.Tensor != nil {
		return FromGraph(a.Tensor)
	}
	if a := c.Attr(prefix + "_floats"); a != nil {
		f := a.Floats()
		return FromSlice([]int{len(f)}, slices.Clone(f)), nil
	}
	if a := c.Attr(prefix + "_int64s"); a != nil {
		v := a.Ints()
		return FromSlice([]int{len(v)}, slices.Clone(v)), nil
	}
	if a := c.Attr(prefix + "_strings"); a != nil {
		v := a.Strings()
		return FromSlice([]int{len(v)}, slices.Clone(v)), nil
	}
	return nil, fmt.Errorf("no %s_* attribute", prefix)
}

// labelEncoder maps each element of X through the keys to the values,
// and those without a key to the default.
func labelEncoder(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	keys, err := attrValues(c, "keys")
	if err != nil {
		return nil, err
	}
	vals, err := attrValues(c, "values")
	if err != nil {
		return nil, err
	}
	if keys.Len() != vals.Len() {
		return nil, fmt.Errorf("%d keys and %d values", keys.Len(), vals.Len())
	}
	if keys.DType != x.DType && !(isFloatType(keys.DType) && isFloatType(x.DType)) {
		return nil, fmt.Errorf("keys of %v for an input of %v", keys.DType, x.DType)
	}
	out := c.alloc(vals.DType, x.Shape...)
	// The default: default_tensor, or default_<kind> by the values' kind.
	def := c.alloc(vals.DType, 1)
	switch {
	case c.Attr("default_tensor") != nil && c.Attr("default_tensor").Tensor != nil:
		d, err := FromGraph(c.Attr("default_tensor").Tensor)
		if err != nil {
			return nil, err
		}
		if d.Len() != 1 || d.DType != vals.DType {
			return nil, fmt.Errorf("default_tensor %v: want one %v", d, vals.DType)
		}
		def = d
	case vals.DType == graph.String:
		Data[string](def)[0] = c.String("default_string", "_Unused")
	case vals.DType == graph.Int64:
		Data[int64](def)[0] = c.Int("default_int64", -1)
	default:
		fromFloat64(def, []float64{float64(c.Float("default_float", float32(math.Copysign(0, -1))))})
	}
	// Index the keys by their string or float64 value.
	find := map[any]int{}
	key := func(t *Tensor, i int) any {
		if t.DType == graph.String {
			return Data[string](t)[i]
		}
		if isFloatType(t.DType) {
			return t.Float64s()[i]
		}
		return t.Int64s()[i]
	}
	for i := range keys.Len() {
		k := key(keys, i)
		if _, ok := find[k]; !ok {
			find[k] = i
		}
	}
	var xs []any
	switch {
	case x.DType == graph.String:
		for _, s := range Data[string](x) {
			xs = append(xs, s)
		}
	case isFloatType(x.DType):
		for _, f := range x.Float64s() {
			xs = append(xs, f)
		}
	default:
		for _, v := range x.Int64s() {
			xs = append(xs, v)
		}
	}
	for i, k := range xs {
		if j, ok := find[k]; ok {
			copyAny(out, i, vals, j, 1)
		} else {
			copyAny(out, i, def, 0, 1)
		}
	}
	return []*Tensor{out}, nil
}

// treeEnsemble evaluates an ensemble of decision trees (TreeEnsemble 5)
// on each row of X and aggregates the leaf weights per target.
func treeEnsemble(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	if len(x.Shape) != 2 {
		return nil, fmt.Errorf("X %v must be 2-D", x.Shape)
	}
	tensorAttr := func(name string) ([]float64, error) {
		a := c.Attr(name)
		if a == nil || a.Tensor == nil {
			return nil, nil
		}
		t, err := FromGraph(a.Tensor)
		if err != nil {
			return nil, err
		}
		return t.Float64s(), nil
	}
	splits, err := tensorAttr("nodes_splits")
	if err != nil {
		return nil, err
	}
	modesF, err := tensorAttr("nodes_modes")
	if err != nil {
		return nil, err
	}
	weights, err := tensorAttr("leaf_weights")
	if err != nil {
		return nil, err
	}
	members, err := tensorAttr("membership_values")
	if err != nil {
		return nil, err
	}
	feat, tn, fn := c.Ints("nodes_featureids"), c.Ints("nodes_truenodeids"), c.Ints("nodes_falsenodeids")
	tl, fl := c.Ints("nodes_trueleafs"), c.Ints("nodes_falseleafs")
	targets, roots := c.Ints("leaf_targetids"), c.Ints("tree_roots")
	missing := c.Ints("nodes_missing_value_tracks_true")
	nt := int(c.Int("n_targets", 0))
	nn := len(modesF)
	for _, l := range [][]int64{feat, tn, fn, tl, fl} {
		if len(l) != nn {
			return nil, fmt.Errorf("the nodes_* attributes differ in length")
		}
	}
	if len(splits) != nn || len(targets) != len(weights) || nt <= 0 || missing != nil && len(missing) != nn {
		return nil, fmt.Errorf("inconsistent tree attributes (%d nodes, %d splits, %d leaves, %d weights, n_targets %d)", nn, len(splits), len(targets), len(weights), nt)
	}
	// The member set of each BRANCH_MEMBER node, in node order.
	sets := make([]map[float64]bool, nn)
	mi := 0
	for i, m := range modesF {
		if m != 6 {
			continue
		}
		sets[i] = map[float64]bool{}
		for mi < len(members) && !math.IsNaN(members[mi]) {
			sets[i][members[mi]] = true
			mi++
		}
		mi++ // the NaN delimiter
	}
	for _, t := range targets {
		if t < 0 || t >= int64(nt) {
			return nil, fmt.Errorf("leaf target %d outside [0, %d)", t, nt)
		}
	}
	rows, cols := x.Shape[0], x.Shape[1]
	xs := x.Float64s()
	agg := c.Int("aggregate_function", 1)
	res := make([]float64, rows*nt)
	for r := range rows {
		row := xs[r*cols : (r+1)*cols]
		out := res[r*nt : (r+1)*nt]
		switch agg {
		case 2:
			for j := range out {
				out[j] = math.Inf(1)
			}
		case 3:
			for j := range out {
				out[j] = math.Inf(-1)
			}
		}
		for _, root := range roots {
			i, leaf := int(root), false
			if i < 0 || i >= nn {
				return nil, fmt.Errorf("tree root %d outside the %d nodes", root, nn)
			}
			// A root whose branches are the same leaf is that leaf.
			if tl[i] == 1 && fl[i] == 1 && tn[i] == fn[i] {
				i, leaf = int(tn[i]), true
			}
			for steps := 0; !leaf; steps++ {
				if steps > nn {
					return nil, fmt.Errorf("tree from root %d has a cycle", root)
				}
				f := int(feat[i])
				if f < 0 || f >= cols {
					return nil, fmt.Errorf("feature %d outside the %d columns", f, cols)
				}
				v, s := row[f], splits[i]
				var take bool
				switch modesF[i] {
				case 0:
					take = v <= s
				case 1:
					take = v < s
				case 2:
					take = v >= s
				case 3:
					take = v > s
				case 4:
					take = v == s
				case 5:
					take = v != s
				case 6:
					take = sets[i][v]
				default:
					return nil, fmt.Errorf("node mode %v", modesF[i])
				}
				if math.IsNaN(v) && missing != nil && missing[i] == 1 {
					take = true
				}
				next, isLeaf := fn[i], fl[i] == 1
				if take {
					next, isLeaf = tn[i], tl[i] == 1
				}
				i, leaf = int(next), isLeaf
				if !leaf && (i < 0 || i >= nn) {
					return nil, fmt.Errorf("node %d outside the %d nodes", i, nn)
				}
			}
			if i < 0 || i >= len(weights) {
				return nil, fmt.Errorf("leaf %d outside the %d leaves", i, len(weights))
			}
			t, w := targets[i], weights[i]
			switch agg {
			case 0, 1:
				out[t] += w
			case 2:
				out[t] = math.Min(out[t], w)
			case 3:
				out[t] = math.Max(out[t], w)
			default:
				return nil, fmt.Errorf("aggregate_function %d", agg)
			}
		}
		if agg == 0 {
			for j := range out {
				out[j] /= float64(len(roots))
			}
		}
		if err := postTransform(out, c.Int("post_transform", 0)); err != nil {
			return nil, err
		}
	}
	y := c.alloc(x.DType, rows, nt)
	if !isFloatType(y.DType) {
		y = c.alloc(graph.Float, rows, nt)
	}
	storeRounded(c, y, res)
	return []*Tensor{y}, nil
}

// postTransform applies a tree ensemble's post_transform to one row of
// scores.
func postTransform(v []float64, kind int64) error {
	switch kind {
	case 0:
	case 1, 3: // SOFTMAX, SOFTMAX_ZERO (zeros stay zero)
		m := math.Inf(-1)
		for _, x := range v {
			m = math.Max(m, x)
		}
		var s float64
		for i, x := range v {
			if kind == 3 && x == 0 {
				v[i] = 0
				continue
			}
			v[i] = math.Exp(x - m)
			s += v[i]
		}
		for i := range v {
			if s > 0 {
				v[i] /= s
			}
		}
	case 2: // LOGISTIC
		for i, x := range v {
			v[i] = sigmoid(x)
		}
	case 4: // PROBIT
		for i, x := range v {
			v[i] = math.Sqrt2 * math.Erfinv(2*x-1)
		}
	default:
		return fmt.Errorf("post_transform %d", kind)
	}
	return nil
}

func init() {
	Register(DomainML, "Binarizer", 1, 0, binarizer, 0)
	Register(DomainML, "ArrayFeatureExtractor", 1, 0, arrayFeatureExtractor, Native)
	Register(DomainML, "LabelEncoder", 1, 0, labelEncoder, Native)
	Register(DomainML, "TreeEnsemble", 5, 0, treeEnsemble, 0)
}
