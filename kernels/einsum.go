package kernels

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
)

// Einsum: the equation is parsed into one label list per operand (the
// dimensions covered by "..." get labels of their own, right-aligned so
// that they broadcast), repeated labels within an operand become
// diagonals, labels no one else needs are summed out early, and operands
// are contracted pairwise as batched matrix products.

type labeled struct {
	t      *Tensor
	labels []rune
}

const ellipsisBase = rune(0x10000)

func parseEinsum(eq string, ranks []int) (ins [][]rune, out []rune, err error) {
	eq = strings.ReplaceAll(eq, " ", "")
	lhs, rhs, explicit := strings.Cut(eq, "->")
	terms := strings.Split(lhs, ",")
	if len(terms) != len(ranks) {
		return nil, nil, fmt.Errorf("equation %q has %d operands, the node %d", eq, len(terms), len(ranks))
	}
	ell := 0
	parse := func(term string, rank int) ([]rune, error) {
		before, after, has := strings.Cut(term, "...")
		nl := len(before) + len(after)
		var ls []rune
		ls = append(ls, []rune(before)...)
		if has {
			e := rank - nl
			if e < 0 {
				return nil, fmt.Errorf("term %q for rank %d", term, rank)
			}
			ell = max(ell, e)
			for k := e; k > 0; k-- {
				ls = append(ls, ellipsisBase+rune(k)) // k counts from the right
			}
		} else if nl != rank {
			return nil, fmt.Errorf("term %q for rank %d", term, rank)
		}
		ls = append(ls, []rune(after)...)
		for _, r := range ls {
			if r < ellipsisBase && !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return nil, fmt.Errorf("bad label %q in %q", r, term)
			}
		}
		return ls, nil
	}
	for i, t := range terms {
		ls, err := parse(t, ranks[i])
		if err != nil {
			return nil, nil, err
		}
		ins = append(ins, ls)
	}
	if explicit {
		before, after, has := strings.Cut(rhs, "...")
		out = append(out, []rune(before)...)
		if has {
			for k := ell; k > 0; k-- {
				out = append(out, ellipsisBase+rune(k))
			}
		}
		out = append(out, []rune(after)...)
	} else {
		count := map[rune]int{}
		for _, ls := range ins {
			for _, r := range ls {
				count[r]++
			}
		}
		for k := ell; k > 0; k-- {
			out = append(out, ellipsisBase+rune(k))
		}
		var once []rune
		for r, c := range count {
			if c == 1 && r < ellipsisBase {
				once = append(once, r)
			}
		}
		sort.Slice(once, func(i, j int) bool { return once[i] < once[j] })
		out = append(out, once...)
	}
	for _, r := range out {
		found := false
		for _, ls := range ins {
			found = found || slices.Contains(ls, r)
		}
		if !found {
			return nil, nil, fmt.Errorf("output label %q appears in no operand", r)
		}
	}
	return ins, out, nil
}

// diagonal removes repeated labels by taking diagonals.
func diagonal(c *Call, x labeled) (labeled, error) {
	var uniq []rune
	for _, r := range x.labels {
		if !slices.Contains(uniq, r) {
			uniq = append(uniq, r)
		}
	}
	if len(uniq) == len(x.labels) {
		return x, nil
	}
	st := stridesOf(x.t.Shape)
	shape := make([]int, len(uniq))
	strides := make([]int, len(uniq))
	for i, r := range uniq {
		shape[i] = -1
		for j, l := range x.labels {
			if l != r {
				continue
			}
			if shape[i] >= 0 && shape[i] != x.t.Shape[j] {
				return x, fmt.Errorf("label %q has sizes %d and %d", r, shape[i], x.t.Shape[j])
			}
			shape[i] = x.t.Shape[j]
			strides[i] += st[j]
		}
	}
	out := c.alloc(x.t.DType, shape...)
	copyStrided(out, x.t, strides, 0)
	return labeled{out, uniq}, nil
}

// sumOut sums the labels of x that keep does not contain.
func sumOut(c *Call, x labeled, keep func(rune) bool) (labeled, error) {
	var axes []int
	var rest []rune
	for i, r := range x.labels {
		if keep(r) {
			rest = append(rest, r)
		} else {
			axes = append(axes, i)
		}
	}
	if len(axes) == 0 {
		return x, nil
	}
	t, err := reduceAny(c, redSum, x.t, axes)
	return labeled{t, rest}, err
}

func reduceAny(c *Call, op redOp, x *Tensor, axes []int) (*Tensor, error) {
	switch x.DType {
	case graph.Float:
		return reduceT[float32](c, op, x, axes, false), nil
	case graph.Double:
		return reduceT[float64](c, op, x, axes, false), nil
	case graph.Int64:
		return reduceT[int64](c, op, x, axes, false), nil
	case graph.Int32:
		return reduceT[int32](c, op, x, axes, false), nil
	case graph.Uint32:
		return reduceT[uint32](c, op, x, axes, false), nil
	case graph.Uint64:
		return reduceT[uint64](c, op, x, axes, false), nil
	}
	return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
}

func permuteTo(c *Call, x labeled, order []rune) labeled {
	perm := make([]int, len(order))
	for i, r := range order {
		perm[i] = slices.Index(x.labels, r)
	}
	return labeled{transposeC(c, x.t, perm), order}
}

func sizeOf(x labeled, r rune) int {
	if i := slices.Index(x.labels, r); i >= 0 {
		return x.t.Shape[i]
	}
	return 1
}

// contract multiplies a and b, summing the labels in both that keep does
// not contain.
func contract(c *Call, a, b labeled, keep func(rune) bool) (labeled, error) {
	var batch, ao, bo, con []rune
	for _, r := range a.labels {
		switch {
		case slices.Contains(b.labels, r) && keep(r):
			batch = append(batch, r)
		case slices.Contains(b.labels, r):
			con = append(con, r)
		default:
			ao = append(ao, r)
		}
	}
	for _, r := range b.labels {
		if !slices.Contains(a.labels, r) {
			bo = append(bo, r)
		}
	}
	a = permuteTo(c, a, slices.Concat(batch, ao, con))
	b = permuteTo(c, b, slices.Concat(batch, con, bo))
	// broadcast batch and contracted sizes (ellipsis dims of size 1)
	size := func(r rune) int { return max(sizeOf(a, r), sizeOf(b, r)) }
	dims := func(ls []rune) []int {
		d := make([]int, len(ls))
		for i, r := range ls {
			d[i] = size(r)
		}
		return d
	}
	ashape := slices.Concat(dims(batch), a.t.Shape[len(batch):len(batch)+len(ao)], dims(con))
	bshape := slices.Concat(dims(batch), dims(con), b.t.Shape[len(batch)+len(con):])
	for i, r := range slices.Concat(batch, ao, con) {
		if a.t.Shape[i] != ashape[i] && a.t.Shape[i] != 1 {
			return labeled{}, fmt.Errorf("label %q has sizes %d and %d", r, a.t.Shape[i], ashape[i])
		}
	}
	for i, r := range slices.Concat(batch, con, bo) {
		if b.t.Shape[i] != bshape[i] && b.t.Shape[i] != 1 {
			return labeled{}, fmt.Errorf("label %q has sizes %d and %d", r, b.t.Shape[i], bshape[i])
		}
	}
	at, bt := expandC(c, a.t, ashape), expandC(c, b.t, bshape)
	nb := shapeSize(dims(batch))
	m := shapeSize(ashape[len(batch) : len(batch)+len(ao)])
	k := shapeSize(dims(con))
	n := shapeSize(bshape[len(batch)+len(con):])
	p, err := batchedMatMul(c, view(at, []int{nb, m, k}), view(bt, []int{nb, k, n}), false, false, 1)
	if err != nil {
		return labeled{}, err
	}
	shape := slices.Concat(dims(batch), ashape[len(batch):len(batch)+len(ao)], bshape[len(batch)+len(con):])
	return labeled{view(p, shape), slices.Concat(batch, ao, bo)}, nil
}

func einsum(c *Call, in []*Tensor) ([]*Tensor, error) {
	eq := c.String("equation", "")
	ranks := make([]int, len(in))
	for i, t := range in {
		ranks[i] = len(t.Shape)
	}
	ls, out, err := parseEinsum(eq, ranks)
	if err != nil {
		return nil, err
	}
	ops := make([]labeled, len(in))
	for i, t := range in {
		if t.DType != in[0].DType {
			return nil, fmt.Errorf("operand types differ")
		}
		if ops[i], err = diagonal(c, labeled{t, ls[i]}); err != nil {
			return nil, err
		}
	}
	needed := func(skip int, from int) func(rune) bool {
		return func(r rune) bool {
			if slices.Contains(out, r) {
				return true
			}
			for j := from; j < len(ops); j++ {
				if j != skip && slices.Contains(ops[j].labels, r) {
					return true
				}
			}
			return false
		}
	}
	for i := range ops {
		keep := func(r rune) bool {
			if slices.Contains(out, r) {
				return true
			}
			for j := range ops {
				if j != i && slices.Contains(ops[j].labels, r) {
					return true
				}
			}
			return false
		}
		if ops[i], err = sumOut(c, ops[i], keep); err != nil {
			return nil, err
		}
	}
	cur := ops[0]
	for i := 1; i < len(ops); i++ {
		if cur, err = contract(c, cur, ops[i], needed(-1, i+1)); err != nil {
			return nil, err
		}
	}
	if cur, err = sumOut(c, cur, func(r rune) bool { return slices.Contains(out, r) }); err != nil {
		return nil, err
	}
	res := permuteTo(c, cur, out)
	if len(res.labels) != len(out) {
		return nil, fmt.Errorf("internal: labels %q for output %q", res.labels, out)
	}
	return []*Tensor{res.t}, nil
}

func init() {
	reg("Einsum", 12, 0, einsum)
}
