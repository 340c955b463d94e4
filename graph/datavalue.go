package graph

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// DataValue is a value of ONNX test data that need not be a tensor: a tensor,
// a sequence of values, or an optional value (present or not). ONNX's
// backend tests store sequences as SequenceProto and optionals as
// OptionalProto files; a file holds no mark of its own kind, so it is
// read as the kind the model declares for it.
type DataValue struct {
	Kind     string       // "tensor", "sequence" or "optional"
	Tensor   *Tensor      // a tensor
	Sequence []*DataValue // a sequence's elements (possibly none)
	// ElemType is the element type of a sequence's tensors (Undefined
	// when the file does not say).
	ElemType DataType
	// Elem is an optional's value, nil when it is absent.
	Elem *DataValue
}

// Elem is the type of the elements of a sequence type, or of the value of
// an optional type (nil for other kinds).
func (t *Type) Elem() *Type {
	if t == nil {
		return nil
	}
	if s := t.pb.GetSequenceType(); s != nil {
		return &Type{pb: s.GetElemType()}
	}
	if o := t.pb.GetOptionalType(); o != nil {
		return &Type{pb: o.GetElemType()}
	}
	return nil
}

// maxValueDepth bounds the nesting of sequences and optionals a file may
// hold.
const maxValueDepth = 8

// DecodeValue reads one serialized value of the kind typ declares: a
// TensorProto, a SequenceProto or an OptionalProto.
func DecodeValue(data []byte, typ *Type) (*DataValue, error) {
	switch typ.Kind() {
	case "tensor":
		t, err := DecodeTensor(data)
		if err != nil {
			return nil, err
		}
		return &DataValue{Kind: "tensor", Tensor: t}, nil
	case "sequence":
		sp := &onnxpb.SequenceProto{}
		if err := proto.Unmarshal(data, sp); err != nil {
			return nil, fmt.Errorf("not a SequenceProto: %w", err)
		}
		return sequenceValue(sp, typ, 0)
	case "optional":
		op := &onnxpb.OptionalProto{}
		if err := proto.Unmarshal(data, op); err != nil {
			return nil, fmt.Errorf("not an OptionalProto: %w", err)
		}
		return optionalValue(op, typ, 0)
	}
	return nil, fmt.Errorf("values of type %v are not supported", typ)
}

func tensorValue(tp *onnxpb.TensorProto) (*DataValue, error) {
	b, err := proto.Marshal(tp)
	if err != nil {
		return nil, err
	}
	t, err := DecodeTensor(b)
	if err != nil {
		return nil, err
	}
	return &DataValue{Kind: "tensor", Tensor: t}, nil
}

func sequenceValue(sp *onnxpb.SequenceProto, typ *Type, depth int) (*DataValue, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("values nested more than %d deep", maxValueDepth)
	}
	v := &DataValue{Kind: "sequence", Sequence: []*DataValue{}}
	elem := typ.Elem()
	switch elem.Kind() {
	case "tensor":
		v.ElemType = elem.ElemType()
		for _, tp := range sp.TensorValues {
			e, err := tensorValue(tp)
			if err != nil {
				return nil, err
			}
			v.Sequence = append(v.Sequence, e)
		}
	case "sequence":
		for _, s := range sp.SequenceValues {
			e, err := sequenceValue(s, elem, depth+1)
			if err != nil {
				return nil, err
			}
			v.Sequence = append(v.Sequence, e)
		}
	case "optional":
		for _, o := range sp.OptionalValues {
			e, err := optionalValue(o, elem, depth+1)
			if err != nil {
				return nil, err
			}
			v.Sequence = append(v.Sequence, e)
		}
	default:
		return nil, fmt.Errorf("sequences of %v are not supported", elem)
	}
	return v, nil
}

func optionalValue(op *onnxpb.OptionalProto, typ *Type, depth int) (*DataValue, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("values nested more than %d deep", maxValueDepth)
	}
	v := &DataValue{Kind: "optional"}
	elem := typ.Elem()
	var err error
	switch elem.Kind() {
	case "tensor":
		if op.TensorValue != nil {
			v.Elem, err = tensorValue(op.TensorValue)
		}
	case "sequence":
		if op.SequenceValue != nil {
			v.Elem, err = sequenceValue(op.SequenceValue, elem, depth+1)
		}
	default:
		return nil, fmt.Errorf("optionals of %v are not supported", elem)
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// ReadValueFile reads a test-data file holding a value of type typ.
func ReadValueFile(path string, typ *Type) (*DataValue, error) {
	data, err := ReadRegularFile(path, MaxModelBytes)
	if err != nil {
		return nil, err
	}
	v, err := DecodeValue(data, typ)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
