package kernels

import (
	"fmt"

	"github.com/onnxpe/onnxpe/graph"
)

// Optionals and SequenceMap. An optional value that holds a tensor or a
// sequence is that tensor or sequence; an empty one is a Tensor made by
// NewNone. OptionalHasElement and OptionalGetElement also take plain
// tensors and sequences (opset 18), and an absent input is an empty
// optional.

func optionalOp(c *Call, in []*Tensor) ([]*Tensor, error) {
	if x := optIn(in, 0); x != nil {
		return []*Tensor{x}, nil
	}
	return []*Tensor{NewNone(graph.Undefined)}, nil
}

func optionalHasElement(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := optIn(in, 0)
	return []*Tensor{Scalar(x != nil && !x.IsNone())}, nil
}

func optionalGetElement(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := optIn(in, 0)
	if x == nil || x.IsNone() {
		return nil, fmt.Errorf("the optional input holds no value")
	}
	return []*Tensor{x}, nil
}

// sequenceMap runs the body once per element of the first input (a
// sequence): the body's inputs are the i-th element of each sequence
// input and the tensor inputs as they are; output j collects the body's
// j-th output of every iteration into a sequence.
func sequenceMap(c *Call, in []*Tensor) ([]*Tensor, error) {
	s, err := seqIn(in, 0)
	if err != nil {
		return nil, err
	}
	n := len(s.seq)
	for i, t := range in[1:] {
		if t != nil && t.IsSequence() && len(t.seq) != n {
			return nil, fmt.Errorf("sequence input %d has %d elements, the first %d", i+1, len(t.seq), n)
		}
	}
	nout := c.NumOutputs()
	outs := make([][]*Tensor, nout)
	args := make([]*Tensor, len(in))
	for i := range n {
		for j, t := range in {
			if t != nil && t.IsSequence() {
				args[j] = t.seq[i]
			} else {
				args[j] = t
			}
		}
		res, err := c.runSub("body", args)
		if err != nil {
			return nil, err
		}
		if len(res) != nout {
			return nil, fmt.Errorf("the body has %d outputs, the node %d", len(res), nout)
		}
		for j, r := range res {
			if r.notTensor() {
				return nil, fmt.Errorf("body output %d is not a tensor", j)
			}
			outs[j] = append(outs[j], r)
		}
	}
	result := make([]*Tensor, nout)
	for j := range result {
		dt := graph.Undefined
		if a := c.Attr("body"); a != nil && a.Graph != nil && j < len(a.Graph.Outputs) {
			if ty := a.Graph.Outputs[j].Type; ty != nil && ty.IsTensor() {
				dt = ty.ElemType()
			}
		}
		if len(outs[j]) > 0 {
			dt = outs[j][0].DType
		}
		result[j] = NewSequence(dt, outs[j])
	}
	return result, nil
}

func init() {
	r := func(op string, since int64, fn Kernel) { Register("", op, since, 0, fn, Native) }
	r("Optional", 15, optionalOp)
	r("OptionalHasElement", 15, optionalHasElement)
	r("OptionalGetElement", 15, optionalGetElement)
	r("SequenceMap", 17, sequenceMap)
}
