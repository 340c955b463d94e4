package graph_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/conformance"
	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

func TestConstantValueForms(t *testing.T) {
	attr := func(a *onnxpb.AttributeProto) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: proto.String("Constant"), Output: []string{a.GetName() + "_out"}, Attribute: []*onnxpb.AttributeProto{a}}
	}
	typ := func(t onnxpb.AttributeProto_AttributeType) *onnxpb.AttributeProto_AttributeType { return t.Enum() }
	gp := &onnxpb.GraphProto{
		Input: []*onnxpb.ValueInfoProto{{Name: proto.String("x")}},
		Initializer: []*onnxpb.TensorProto{
			{Name: proto.String("w"), DataType: proto.Int32(1), Dims: []int64{2}, FloatData: []float32{1, 2}},
			{Name: proto.String("x"), DataType: proto.Int32(1), Dims: []int64{1}, FloatData: []float32{9}},
		},
		Node: []*onnxpb.NodeProto{
			attr(&onnxpb.AttributeProto{Name: proto.String("value_float"), Type: typ(onnxpb.AttributeProto_FLOAT), F: proto.Float32(1.5)}),
			attr(&onnxpb.AttributeProto{Name: proto.String("value_floats"), Type: typ(onnxpb.AttributeProto_FLOATS), Floats: []float32{1, 2, 3}}),
			attr(&onnxpb.AttributeProto{Name: proto.String("value_int"), Type: typ(onnxpb.AttributeProto_INT), I: proto.Int64(7)}),
			attr(&onnxpb.AttributeProto{Name: proto.String("value_ints"), Type: typ(onnxpb.AttributeProto_INTS), Ints: []int64{4, 5}}),
			attr(&onnxpb.AttributeProto{Name: proto.String("value"), Type: typ(onnxpb.AttributeProto_TENSOR), T: &onnxpb.TensorProto{DataType: proto.Int32(7), Dims: []int64{1}, Int64Data: []int64{42}}}),
			attr(&onnxpb.AttributeProto{Name: proto.String("sparse_value"), Type: typ(onnxpb.AttributeProto_SPARSE_TENSOR), SparseTensor: &onnxpb.SparseTensorProto{
				Dims:    []int64{2, 3},
				Values:  &onnxpb.TensorProto{DataType: proto.Int32(1), Dims: []int64{2}, FloatData: []float32{5, 6}},
				Indices: &onnxpb.TensorProto{DataType: proto.Int32(7), Dims: []int64{2, 2}, Int64Data: []int64{0, 1, 1, 2}},
			}}),
			{OpType: proto.String("Identity"), Input: []string{"w"}, Output: []string{"w_id"}},
			{OpType: proto.String("Neg"), Input: []string{"w"}, Output: []string{"neg"}},
		},
	}
	m := decode(t, gp)
	want := map[string][]float64{
		"value_float_out": {1.5}, "value_floats_out": {1, 2, 3}, "value_int_out": {7}, "value_ints_out": {4, 5},
		"value_out": {42}, "sparse_value_out": {0, 5, 0, 0, 0, 6}, "w_id": {1, 2}, "w": {1, 2},
	}
	for name, w := range want {
		tt, ok := graph.ConstantValue(m.Graph.Lookup(name))
		if !ok {
			t.Errorf("%s: not constant", name)
			continue
		}
		got, err := tt.Float64s()
		if err != nil || !cmp.Equal(got, w) {
			t.Errorf("%s = %v (%v), want %v", name, got, err, w)
		}
	}
	for _, name := range []string{"x", "neg"} {
		if _, ok := graph.ConstantValue(m.Graph.Lookup(name)); ok {
			t.Errorf("%s should not count as constant", name)
		}
	}
}

// TestConstantValueConformance decodes every Constant node of the
// conformance models.
func TestConstantValueConformance(t *testing.T) {
	count := 0
	for _, p := range append(conformance.Models(t), conformance.BackendModels(t)...) {
		m, err := graph.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		m.Walk(func(n *graph.Node) {
			if n.OpType != "Constant" {
				return
			}
			if _, err := graph.ConstantNodeValue(n); err != nil {
				t.Errorf("%s: %v", p, err)
			}
			count++
		})
	}
	if count < 20 {
		t.Fatalf("only %d Constant nodes seen", count)
	}
}
