package graph

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// protoModel is a model written directly as protobuf (with the rule breaks
// the builders cannot make): nodes in the given order, the given imports.
func protoModel(producer string, opsets map[string]int64, nodes ...*onnxpb.NodeProto) []byte {
	f32 := int32(Float)
	vi := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32}}}}
	}
	m := &onnxpb.ModelProto{IrVersion: proto.Int64(8), Graph: &onnxpb.GraphProto{Name: proto.String("g"), Node: nodes,
		Input: []*onnxpb.ValueInfoProto{vi("x")}, Output: []*onnxpb.ValueInfoProto{vi("z")}}}
	if producer != "" {
		m.ProducerName = proto.String(producer)
	}
	for d, v := range opsets {
		m.OpsetImport = append(m.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: proto.String(d), Version: proto.Int64(v)})
	}
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func pnode(op, domain string, in []string, out ...string) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{Name: proto.String(op + "_" + out[0]), OpType: proto.String(op), Domain: proto.String(domain), Input: in, Output: out}
}

func TestRepairs(t *testing.T) {
	onnx17 := map[string]int64{"": 17}
	for _, tc := range []struct {
		name  string
		data  []byte
		kinds []string
		want  []string
	}{
		{"well formed", protoModel("t", onnx17, pnode("Neg", "", []string{"x"}, "y"), pnode("Relu", "", []string{"y"}, "z")), nil, nil},
		{"unsorted", protoModel("t", onnx17, pnode("Relu", "", []string{"y"}, "z"), pnode("Neg", "", []string{"x"}, "y")),
			[]string{"order"}, []string{`main graph: nodes are not in topological order (node "Relu_z" (Relu) reads "y" before node "Neg_y" (Neg) computes it)`}},
		{"missing com.microsoft", protoModel("t", onnx17, pnode("Neg", "", []string{"x"}, "y"), pnode("Gelu", "com.microsoft", []string{"y"}, "z")),
			[]string{"opset"}, []string{"nodes use domain com.microsoft, which the opset imports leave out (node \"Gelu_z\" (com.microsoft.Gelu)): read at version 1"}},
		{"missing default domain", protoModel("t", map[string]int64{"com.microsoft": 1}, pnode("Neg", "", []string{"x"}, "y"), pnode("Gelu", "com.microsoft", []string{"y"}, "z")),
			[]string{"opset"}, []string{"nodes use domain ai.onnx, which the opset imports leave out (node \"Neg_y\" (Neg)): read at version 26"}},
		{"no producer", protoModel("", onnx17, pnode("Neg", "", []string{"x"}, "z")), []string{"producer"}, []string{"names no producer"}},
		{"all three", protoModel("", onnx17, pnode("Gelu", "com.microsoft", []string{"y"}, "z"), pnode("Neg", "", []string{"x"}, "y")),
			[]string{"producer", "order", "opset"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(tc.data, "")
			if err != nil {
				t.Fatal(err)
			}
			rs := m.Repairs()
			if len(rs) != len(tc.kinds) {
				t.Fatalf("repairs %v, want kinds %v", rs, tc.kinds)
			}
			for i, r := range rs {
				if r.Kind != tc.kinds[i] {
					t.Errorf("repair %d is %q (%s), want %q", i, r.Kind, r.Msg, tc.kinds[i])
				}
				if i < len(tc.want) && !strings.Contains(r.Msg, tc.want[i]) {
					t.Errorf("repair %d: %q does not say %q", i, r.Msg, tc.want[i])
				}
			}
			// The file is kept as it was: saving writes the same bytes.
			b, err := m.Marshal()
			if err != nil || string(b) != string(tc.data) {
				t.Errorf("saved bytes differ from the loaded ones (%v)", err)
			}
		})
	}
}

func TestAmbiguousModelsStayErrors(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		data       []byte
	}{
		{"value defined twice", `value name "y" is defined twice`,
			protoModel("t", map[string]int64{"": 17}, pnode("Neg", "", []string{"x"}, "y"), pnode("Relu", "", []string{"x"}, "y"), pnode("Relu", "", []string{"y"}, "z"))},
		{"no opset imports", "imports no operator set", protoModel("t", nil, pnode("Neg", "", []string{"x"}, "z"))},
		{"cycle", "cycle", protoModel("t", map[string]int64{"": 17}, pnode("Add", "", []string{"x", "z"}, "y"), pnode("Relu", "", []string{"y"}, "z"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.data, "")
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want ErrInvalid saying %q", err, tc.want)
			}
		})
	}
}

// TestFunctionImportsCount checks that a node of a model-local function
// body whose domain only the function imports needs no repair, and that a
// call to a local function needs no import of the function's domain.
func TestFunctionImportsCount(t *testing.T) {
	m := NewModel(8, "t", Opset{Domain: "", Version: 17})
	f := m.AddFunction("local", "F")
	f.SetOpsetVersion("com.microsoft", 1)
	in := f.Body.AddInput("a", nil)
	g := f.Body.Op("Gelu", []*Value{in}, 1)
	f.Body.Nodes()[0].Domain = "com.microsoft"
	f.Body.AddOutput(g[0])
	x := m.Graph.AddInput("x", TensorType(Float, nil))
	n := m.Graph.NewNode("F", "local", []*Value{x}, 1)
	m.Graph.Append(n)
	m.Graph.AddOutput(n.Outputs()[0])
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	lm, err := Decode(b, "")
	if err != nil {
		t.Fatal(err)
	}
	if rs := lm.Repairs(); len(rs) != 0 {
		t.Errorf("repairs %v, want none", rs)
	}
}
