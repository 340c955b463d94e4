package graph

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// Type is the declared type of a value: a tensor type with an element type
// and a shape whose dimensions are numbers or symbols, or one of the other
// ONNX types (sequence, map, optional, sparse tensor), which this package
// carries but does not look into.
type Type struct {
	pb *onnxpb.TypeProto
}

// Dim is one dimension of a declared shape: a number, a symbol such as
// "batch", or unknown (neither).
type Dim struct {
	Value int64
	Param string
	Known bool // Value holds the size
}

func (d Dim) String() string {
	switch {
	case d.Known:
		return fmt.Sprint(d.Value)
	case d.Param != "":
		return d.Param
	}
	return "?"
}

// TensorType makes a tensor type. A nil dims means an unknown rank.
func TensorType(dt DataType, dims []Dim) *Type {
	tt := &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(dt))}
	if dims != nil {
		tt.Shape = &onnxpb.TensorShapeProto{}
		for _, d := range dims {
			pd := &onnxpb.TensorShapeProto_Dimension{}
			switch {
			case d.Known:
				pd.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d.Value}
			case d.Param != "":
				pd.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: d.Param}
			}
			tt.Shape.Dim = append(tt.Shape.Dim, pd)
		}
	}
	return &Type{pb: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: tt}}}
}

// SequenceType makes the type of sequences of elem.
func SequenceType(elem *Type) *Type {
	return &Type{pb: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_SequenceType{
		SequenceType: &onnxpb.TypeProto_Sequence{ElemType: proto.Clone(elem.pb).(*onnxpb.TypeProto)}}}}
}

// OptionalType makes the type of optional values of elem.
func OptionalType(elem *Type) *Type {
	return &Type{pb: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_OptionalType{
		OptionalType: &onnxpb.TypeProto_Optional{ElemType: proto.Clone(elem.pb).(*onnxpb.TypeProto)}}}}
}

// Dims makes known dimensions from sizes.
func Dims(sizes ...int64) []Dim {
	d := make([]Dim, len(sizes))
	for i, s := range sizes {
		d[i] = Dim{Value: s, Known: true}
	}
	return d
}

// IsTensor reports whether t is a (dense) tensor type.
func (t *Type) IsTensor() bool { return t != nil && t.pb.GetTensorType() != nil }

// Kind names the type's kind: "tensor", "sequence", "map", "optional",
// "sparse_tensor", "opaque" or "unknown".
func (t *Type) Kind() string {
	if t == nil {
		return "unknown"
	}
	switch t.pb.Value.(type) {
	case *onnxpb.TypeProto_TensorType:
		return "tensor"
	case *onnxpb.TypeProto_SequenceType:
		return "sequence"
	case *onnxpb.TypeProto_MapType:
		return "map"
	case *onnxpb.TypeProto_OptionalType:
		return "optional"
	case *onnxpb.TypeProto_SparseTensorType:
		return "sparse_tensor"
	case *onnxpb.TypeProto_OpaqueType:
		return "opaque"
	}
	return "unknown"
}

// ElemType is the element type of a tensor or sparse tensor type.
func (t *Type) ElemType() DataType {
	if t == nil {
		return Undefined
	}
	if tt := t.pb.GetTensorType(); tt != nil {
		return DataType(tt.GetElemType())
	}
	if st := t.pb.GetSparseTensorType(); st != nil {
		return DataType(st.GetElemType())
	}
	return Undefined
}

// Shape is the declared shape of a tensor type; ok is false when the rank
// is unknown.
func (t *Type) Shape() (dims []Dim, ok bool) {
	if t == nil {
		return nil, false
	}
	var sp *onnxpb.TensorShapeProto
	if tt := t.pb.GetTensorType(); tt != nil {
		sp = tt.Shape
	} else if st := t.pb.GetSparseTensorType(); st != nil {
		sp = st.Shape
	}
	if sp == nil {
		return nil, false
	}
	dims = make([]Dim, len(sp.Dim))
	for i, d := range sp.Dim {
		switch v := d.Value.(type) {
		case *onnxpb.TensorShapeProto_Dimension_DimValue:
			dims[i] = Dim{Value: v.DimValue, Known: true}
		case *onnxpb.TensorShapeProto_Dimension_DimParam:
			dims[i] = Dim{Param: v.DimParam}
		}
	}
	return dims, true
}

// String prints the type as "float32[batch,seq,64]".
func (t *Type) String() string {
	if t == nil {
		return "?"
	}
	switch t.Kind() {
	case "tensor", "sparse_tensor":
		s := t.ElemType().String()
		if t.Kind() == "sparse_tensor" {
			s = "sparse " + s
		}
		dims, ok := t.Shape()
		if !ok {
			return s + "[...]"
		}
		parts := make([]string, len(dims))
		for i, d := range dims {
			parts[i] = d.String()
		}
		return s + "[" + strings.Join(parts, ",") + "]"
	case "sequence":
		return "seq(" + (&Type{pb: t.pb.GetSequenceType().GetElemType()}).String() + ")"
	case "optional":
		return "optional(" + (&Type{pb: t.pb.GetOptionalType().GetElemType()}).String() + ")"
	case "map":
		m := t.pb.GetMapType()
		return "map(" + DataType(m.GetKeyType()).String() + "," + (&Type{pb: m.GetValueType()}).String() + ")"
	}
	return t.Kind()
}

// Clone returns a deep copy.
func (t *Type) Clone() *Type {
	if t == nil {
		return nil
	}
	return &Type{pb: proto.Clone(t.pb).(*onnxpb.TypeProto)}
}
