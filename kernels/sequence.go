package kernels

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
)

// Sequence ops, enough for exporters that build lists of tensors (for
// example GPT-J's rotate_every_two through torch.stack inside a Loop).

func seqIn(in []*Tensor, i int) (*Tensor, error) {
	if i >= len(in) || !in[i].IsSequence() {
		return nil, fmt.Errorf("input %d is not a sequence", i)
	}
	return in[i], nil
}

func seqPos(p *Tensor, n int, insert bool) (int, error) {
	if p.Len() != 1 || p.DType != graph.Int64 && p.DType != graph.Int32 {
		return 0, fmt.Errorf("position must be one int32 or int64, not %v", p)
	}
	v := p.Int64s()[0]
	hi := int64(n)
	if !insert {
		hi--
	}
	if v < -int64(n) || v > hi {
		return 0, fmt.Errorf("position %d out of range for length %d", v, n)
	}
	if v < 0 {
		v += int64(n)
	}
	return int(v), nil
}

func init() {
	r := func(op string, since int64, fn Kernel) { Register("", op, since, 0, fn, Native) }
	r("SequenceEmpty", 11, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		dt := graph.DataType(c.Int("dtype", int64(graph.Float)))
		return []*Tensor{NewSequence(dt, nil)}, nil
	})
	r("SequenceConstruct", 11, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		return []*Tensor{NewSequence(in[0].DType, in)}, nil
	})
	r("SequenceInsert", 11, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		s, err := seqIn(in, 0)
		if err != nil {
			return nil, err
		}
		ts := s.seq
		pos := len(ts)
		if p := optIn(in, 2); p != nil {
			if pos, err = seqPos(p, len(ts), true); err != nil {
				return nil, err
			}
		}
		if in[1].DType != s.DType && len(ts) > 0 {
			return nil, fmt.Errorf("inserting %v into a sequence of %v", in[1].DType, s.DType)
		}
		return []*Tensor{NewSequence(in[1].DType, slices.Insert(slices.Clone(ts), pos, in[1]))}, nil
	})
	r("SequenceAt", 11, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		s, err := seqIn(in, 0)
		if err != nil {
			return nil, err
		}
		pos, err := seqPos(in[1], len(s.seq), false)
		if err != nil {
			return nil, err
		}
		return []*Tensor{s.seq[pos]}, nil
	})
	r("SequenceErase", 11, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		s, err := seqIn(in, 0)
		if err != nil {
			return nil, err
		}
		pos := len(s.seq) - 1
		if p := optIn(in, 1); p != nil {
			if pos, err = seqPos(p, len(s.seq), false); err != nil {
				return nil, err
			}
		}
		if pos < 0 {
			return nil, fmt.Errorf("erase from an empty sequence")
		}
		return []*Tensor{NewSequence(s.DType, slices.Delete(slices.Clone(s.seq), pos, pos+1))}, nil
	})
	r("SequenceLength", 11, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		s, err := seqIn(in, 0)
		if err != nil {
			return nil, err
		}
		return []*Tensor{Scalar(int64(len(s.seq)))}, nil
	})
	r("ConcatFromSequence", 11, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		s, err := seqIn(in, 0)
		if err != nil {
			return nil, err
		}
		if len(s.seq) == 0 {
			return nil, fmt.Errorf("empty sequence")
		}
		ts := s.seq
		axis := c.Int("axis", 0)
		if c.Int("new_axis", 0) == 1 {
			r := len(ts[0].Shape) + 1
			a, err := normAxis(axis, r)
			if err != nil {
				return nil, err
			}
			ex := make([]*Tensor, len(ts))
			for i, t := range ts {
				ex[i] = view(t, slices.Insert(slices.Clone(t.Shape), a, 1))
			}
			ts, axis = ex, int64(a)
		}
		cc := &Call{Node: c.Node, Opset: 13, attrs: attrList{{name: "axis", a: graph.IntAttr("axis", axis)}}}
		return concat(cc, ts)
	})
	r("SplitToSequence", 11, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		x := in[0]
		axis, err := normAxis(c.Int("axis", 0), len(x.Shape))
		if err != nil {
			return nil, err
		}
		dim := x.Shape[axis]
		var sizes []int
		sp := optIn(in, 1)
		switch {
		case sp == nil:
			for range dim {
				sizes = append(sizes, 1)
			}
		case len(sp.Shape) == 0:
			n := int(sp.Int64s()[0])
			if n <= 0 {
				return nil, fmt.Errorf("split size %d", n)
			}
			for o := 0; o < dim; o += n {
				sizes = append(sizes, min(n, dim-o))
			}
		default:
			sizes = toInts(sp.Int64s())
		}
		var ts []*Tensor
		off := 0
		for _, n := range sizes {
			if off+n > dim || n < 0 {
				return nil, fmt.Errorf("split sizes %v for dimension %d", sizes, dim)
			}
			t := sliceAxis(nil, x, axis, off, n)
			if sp == nil && c.Int("keepdims", 1) == 0 {
				t = view(t, slices.Delete(slices.Clone(t.Shape), axis, axis+1))
			}
			ts = append(ts, t)
			off += n
		}
		if off != dim {
			return nil, fmt.Errorf("split sizes %v for dimension %d", sizes, dim)
		}
		return []*Tensor{NewSequence(x.DType, ts)}, nil
	})
}
