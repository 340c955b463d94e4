package graph

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// AttrType is the kind of an attribute's value; the numbers are the
// format's own.
type AttrType int32

// Attribute kinds.
const (
	AttrUndefined     AttrType = 0
	AttrFloat         AttrType = 1
	AttrInt           AttrType = 2
	AttrString        AttrType = 3
	AttrTensor        AttrType = 4
	AttrGraph         AttrType = 5
	AttrFloats        AttrType = 6
	AttrInts          AttrType = 7
	AttrStrings       AttrType = 8
	AttrTensors       AttrType = 9
	AttrGraphs        AttrType = 10
	AttrSparseTensor  AttrType = 11
	AttrSparseTensors AttrType = 12
	AttrTypeProto     AttrType = 13
	AttrTypeProtos    AttrType = 14
)

func (a AttrType) String() string {
	names := [...]string{"undefined", "float", "int", "string", "tensor", "graph", "floats", "ints",
		"strings", "tensors", "graphs", "sparse_tensor", "sparse_tensors", "type_proto", "type_protos"}
	if a >= 0 && int(a) < len(names) {
		return names[a]
	}
	return fmt.Sprintf("attr_type(%d)", int32(a))
}

// Attr is a named attribute of a node or a function. Scalars and lists are
// read with the typed getters; tensor and graph values are IR objects.
type Attr struct {
	pb      *onnxpb.AttributeProto // scalars, lists, strings, sparse and type values; t/g/tensors/graphs are cleared
	Tensor  *Tensor                // AttrTensor
	Graph   *Graph                 // AttrGraph
	Tensors []*Tensor              // AttrTensors
	Graphs  []*Graph               // AttrGraphs
}

// Name is the attribute's name.
func (a *Attr) Name() string { return a.pb.GetName() }

// Type is the attribute's kind. For attributes written before IR 2 without
// a type, it is inferred from the field that is set.
func (a *Attr) Type() AttrType {
	if a.pb.Type != nil {
		return AttrType(a.pb.GetType())
	}
	switch {
	case a.pb.F != nil:
		return AttrFloat
	case a.pb.I != nil:
		return AttrInt
	case a.pb.S != nil:
		return AttrString
	case a.Tensor != nil:
		return AttrTensor
	case a.Graph != nil:
		return AttrGraph
	case len(a.pb.Floats) > 0:
		return AttrFloats
	case len(a.pb.Ints) > 0:
		return AttrInts
	case len(a.pb.Strings) > 0:
		return AttrStrings
	case len(a.Tensors) > 0:
		return AttrTensors
	case len(a.Graphs) > 0:
		return AttrGraphs
	}
	return AttrUndefined
}

// RefAttrName is, inside a function body, the name of the calling node's
// attribute that this one stands for; empty otherwise.
func (a *Attr) RefAttrName() string { return a.pb.GetRefAttrName() }

// Float is the value of a float attribute.
func (a *Attr) Float() float32 { return a.pb.GetF() }

// Int is the value of an int attribute.
func (a *Attr) Int() int64 { return a.pb.GetI() }

// String is the value of a string attribute.
func (a *Attr) String() string { return string(a.pb.GetS()) }

// Floats is the value of a floats attribute.
func (a *Attr) Floats() []float32 { return a.pb.Floats }

// Ints is the value of an ints attribute.
func (a *Attr) Ints() []int64 { return a.pb.Ints }

// Strings is the value of a strings attribute.
func (a *Attr) Strings() []string {
	s := make([]string, len(a.pb.Strings))
	for i, b := range a.pb.Strings {
		s[i] = string(b)
	}
	return s
}

// Value returns the attribute's value as a Go value (float32, int64,
// string, *Tensor, *Graph, []float32, []int64, []string, []*Tensor,
// []*Graph), for printing and generic code.
func (a *Attr) Value() any {
	switch a.Type() {
	case AttrFloat:
		return a.Float()
	case AttrInt:
		return a.Int()
	case AttrString:
		return a.String()
	case AttrTensor:
		return a.Tensor
	case AttrGraph:
		return a.Graph
	case AttrFloats:
		return a.Floats()
	case AttrInts:
		return a.Ints()
	case AttrStrings:
		return a.Strings()
	case AttrTensors:
		return a.Tensors
	case AttrGraphs:
		return a.Graphs
	}
	return nil
}

func newAttr(name string, t AttrType) *Attr {
	return &Attr{pb: &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_AttributeType(t).Enum()}}
}

// IntAttr makes an int attribute.
func IntAttr(name string, v int64) *Attr {
	a := newAttr(name, AttrInt)
	a.pb.I = proto.Int64(v)
	return a
}

// FloatAttr makes a float attribute.
func FloatAttr(name string, v float32) *Attr {
	a := newAttr(name, AttrFloat)
	a.pb.F = proto.Float32(v)
	return a
}

// StringAttr makes a string attribute.
func StringAttr(name, v string) *Attr {
	a := newAttr(name, AttrString)
	a.pb.S = []byte(v)
	return a
}

// IntsAttr makes an ints attribute.
func IntsAttr(name string, v ...int64) *Attr {
	a := newAttr(name, AttrInts)
	a.pb.Ints = append([]int64{}, v...)
	return a
}

// FloatsAttr makes a floats attribute.
func FloatsAttr(name string, v ...float32) *Attr {
	a := newAttr(name, AttrFloats)
	a.pb.Floats = append([]float32{}, v...)
	return a
}

// StringsAttr makes a strings attribute.
func StringsAttr(name string, v ...string) *Attr {
	a := newAttr(name, AttrStrings)
	for _, x := range v {
		a.pb.Strings = append(a.pb.Strings, []byte(x))
	}
	return a
}

// TensorAttr makes a tensor attribute.
func TensorAttr(name string, t *Tensor) *Attr {
	a := newAttr(name, AttrTensor)
	a.Tensor = t
	return a
}

// GraphAttr makes a graph attribute.
func GraphAttr(name string, g *Graph) *Attr {
	a := newAttr(name, AttrGraph)
	a.Graph = g
	return a
}

// Equal reports whether two attributes of scalar or list kind have the
// same name and value (tensor and graph values compare by identity).
func (a *Attr) Equal(b *Attr) bool {
	if a.Name() != b.Name() || a.Type() != b.Type() {
		return false
	}
	switch a.Type() {
	case AttrFloat:
		return a.Float() == b.Float() || math.IsNaN(float64(a.Float())) && math.IsNaN(float64(b.Float()))
	case AttrTensor:
		return a.Tensor == b.Tensor
	case AttrGraph:
		return a.Graph == b.Graph
	}
	return proto.Equal(a.pb, b.pb)
}

// Renamed returns a copy of a under another name and without an attribute
// reference: what inlining a function call puts in place of a body
// attribute that refers to the caller's. Tensor and graph values are
// shared, not copied.
func (a *Attr) Renamed(name string) *Attr {
	c := &Attr{pb: proto.Clone(a.pb).(*onnxpb.AttributeProto), Tensor: a.Tensor, Graph: a.Graph, Tensors: a.Tensors, Graphs: a.Graphs}
	c.pb.Name = proto.String(name)
	c.pb.RefAttrName = nil
	return c
}

// RefAttr makes an attribute of a node inside a function body that stands
// for the calling node's attribute ref (ref_attr_name).
func RefAttr(name, ref string, t AttrType) *Attr {
	a := newAttr(name, t)
	a.pb.RefAttrName = proto.String(ref)
	return a
}
