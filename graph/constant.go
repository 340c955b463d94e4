package graph

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// ConstantValue returns the tensor a value is known to hold without running
// the model: an initializer that is not also a graph input (inputs with a
// default may be overridden by the caller), or the output of a Constant
// node in any of its forms (value, value_float, value_floats, value_int,
// value_ints, value_string, value_strings; sparse_value is densified). It
// looks through Identity nodes. ok is false for anything else.
func ConstantValue(v *Value) (t *Tensor, ok bool) {
	for v != nil {
		if v.Const != nil {
			if v.IsGraphInput() {
				return nil, false
			}
			return v.Const, true
		}
		n := v.producer
		if n == nil {
			return nil, false
		}
		switch {
		case n.OpType == "Identity" && isONNXDomain(n.Domain):
			v = n.Input(0)
		case n.OpType == "Constant" && isONNXDomain(n.Domain):
			t, err := ConstantNodeValue(n)
			return t, err == nil
		default:
			return nil, false
		}
	}
	return nil, false
}

func isONNXDomain(d string) bool { return d == "" || d == "ai.onnx" }

// ConstantNodeValue is the tensor of a Constant node, whichever attribute
// holds it.
func ConstantNodeValue(n *Node) (*Tensor, error) {
	if len(n.Attrs) != 1 {
		return nil, fmt.Errorf("graph: Constant node %v has %d attributes, want 1", n, len(n.Attrs))
	}
	t, err := ConstantFromAttr(n.Attrs[0].Name(), n.Attrs[0], n.Output(0).Name)
	if err != nil {
		return nil, fmt.Errorf("graph: Constant node %v: %w", n, err)
	}
	return t, nil
}

// ConstantFromAttr is the tensor named name that a Constant node's
// attribute kind (value, value_float, value_floats, value_int, value_ints,
// value_string, value_strings, sparse_value) with value a stands for.
// Executors call it after resolving an attribute reference inside a
// function body, so a may carry the calling node's attribute name.
func ConstantFromAttr(kind string, a *Attr, name string) (*Tensor, error) {
	switch kind {
	case "value":
		if a.Tensor == nil {
			return nil, fmt.Errorf("value is not a tensor")
		}
		return a.Tensor, nil
	case "value_float":
		return NewTensor(name, Float, nil, []float32{a.Float()})
	case "value_floats":
		return NewTensor(name, Float, []int64{int64(len(a.Floats()))}, append([]float32{}, a.Floats()...))
	case "value_int":
		return NewTensor(name, Int64, nil, []int64{a.Int()})
	case "value_ints":
		return NewTensor(name, Int64, []int64{int64(len(a.Ints()))}, append([]int64{}, a.Ints()...))
	case "value_string":
		return stringTensor(name, nil, [][]byte{a.pb.GetS()}), nil
	case "value_strings":
		return stringTensor(name, []int64{int64(len(a.pb.Strings))}, a.pb.Strings), nil
	case "sparse_value":
		return densify(name, a.pb.GetSparseTensor())
	}
	return nil, fmt.Errorf("unknown attribute %q", kind)
}

func stringTensor(name string, dims []int64, s [][]byte) *Tensor {
	return &Tensor{pb: &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(String)), Dims: dims, StringData: s}}
}

// densify turns a sparse tensor into a dense one of the same element type.
func densify(name string, sp *onnxpb.SparseTensorProto) (*Tensor, error) {
	if sp == nil || sp.Values == nil || sp.Indices == nil {
		return nil, fmt.Errorf("graph: sparse constant %q lacks values or indices", name)
	}
	vals := &Tensor{pb: sp.Values}
	idx := &Tensor{pb: sp.Indices}
	if err := vals.check(); err != nil {
		return nil, err
	}
	if err := idx.check(); err != nil {
		return nil, err
	}
	n, err := numElements(sp.Dims)
	if err != nil {
		return nil, err
	}
	dt := vals.DataType()
	size := dt.Bits() / 8
	if size == 0 || dt.Bits()%8 != 0 {
		return nil, fmt.Errorf("graph: sparse constant %q of %v is not supported", name, dt)
	}
	if n*int64(size) > MaxTensorBytes {
		return nil, fmt.Errorf("graph: sparse constant %q is too large", name)
	}
	raw, err := vals.RawBytes()
	if err != nil {
		return nil, err
	}
	ix, err := idx.Int64s()
	if err != nil {
		return nil, err
	}
	nnz := vals.Len()
	rank := int64(len(sp.Dims))
	out := make([]byte, n*int64(size))
	for i := int64(0); i < nnz; i++ {
		var lin int64
		switch {
		case int64(len(ix)) == nnz: // linearised indices
			lin = ix[i]
		case int64(len(ix)) == nnz*rank: // [NNZ, rank]
			for d := int64(0); d < rank; d++ {
				lin = lin*sp.Dims[d] + ix[i*rank+d]
			}
		default:
			return nil, fmt.Errorf("graph: sparse constant %q: %d indices for %d values", name, len(ix), nnz)
		}
		if lin < 0 || lin >= n {
			return nil, fmt.Errorf("graph: sparse constant %q: index %d out of range", name, lin)
		}
		copy(out[lin*int64(size):], raw[i*int64(size):(i+1)*int64(size)])
	}
	return &Tensor{pb: &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(dt)), Dims: append([]int64{}, sp.Dims...), RawData: out}}, nil
}
