package graph

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// withAttrs is pnode with attributes.
func withAttrs(n *onnxpb.NodeProto, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	n.Attribute = attrs
	return n
}

func attrType(t AttrType) *onnxpb.AttributeProto_AttributeType {
	return onnxpb.AttributeProto_AttributeType(t).Enum()
}

// Models ONNX Runtime refuses at load are refused (B8, B9): attributes of
// a type their op's schema does not declare, attributes whose type field
// disagrees with their value, opset imports newer than known. Each error
// names the node, the attribute, what was expected and what was found.
func TestLoadRefusesWhatORTRefuses(t *testing.T) {
	onnx17 := map[string]int64{"": 17}
	for _, tc := range []struct {
		name string
		data []byte
		want []string
	}{
		{"perm a string", protoModel("t", onnx17, withAttrs(pnode("Transpose", "", []string{"x"}, "z"),
			&onnxpb.AttributeProto{Name: proto.String("perm"), Type: attrType(AttrString), S: []byte("abc")})),
			[]string{`node "Transpose_z" (Transpose)`, "attribute perm", "has type a string", "Transpose-17 declares it a list of ints"}},
		{"axis a float", protoModel("t", onnx17, withAttrs(pnode("Gather", "", []string{"x", "x"}, "z"),
			&onnxpb.AttributeProto{Name: proto.String("axis"), Type: attrType(AttrFloat), F: proto.Float32(1.5)})),
			[]string{`node "Gather_z" (Gather)`, "attribute axis", "a float", "an int"}},
		{"type field disagrees with the value", protoModel("t", onnx17, withAttrs(pnode("Softmax", "", []string{"x"}, "z"),
			&onnxpb.AttributeProto{Name: proto.String("axis"), Type: attrType(AttrInt), F: proto.Float32(1)})),
			[]string{`node "Softmax_z"`, "attribute axis", "declared an int but holds a float"}},
		{"two values", protoModel("t", onnx17, withAttrs(pnode("MyOp", "my.domain", []string{"x"}, "z"),
			&onnxpb.AttributeProto{Name: proto.String("k"), I: proto.Int64(1), S: []byte("s")})),
			[]string{"attribute k holds values of 2 types (int, string)"}},
		{"opset 99", protoModel("t", map[string]int64{"": 99}, pnode("Relu", "", []string{"x"}, "z")),
			[]string{"operator set ai.onnx version 99", "the newest is 28"}},
		{"ml opset 6", protoModel("t", map[string]int64{"": 17, "ai.onnx.ml": 6}, pnode("Relu", "", []string{"x"}, "z")),
			[]string{"ai.onnx.ml version 6", "the newest is 5"}},
		// GlobalLpPool's p was a float in version 1 and is an int since 2:
		// the schema of the model's version is the one checked.
		{"p of GlobalLpPool-2", protoModel("t", map[string]int64{"": 2}, withAttrs(pnode("GlobalLpPool", "", []string{"x"}, "z"),
			&onnxpb.AttributeProto{Name: proto.String("p"), Type: attrType(AttrFloat), F: proto.Float32(2)})),
			[]string{"GlobalLpPool-2 declares it an int"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.data, "")
			if err == nil || !errors.Is(err, ErrInvalid) {
				t.Fatalf("loaded (err %v)", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// What is well typed loads: the right types, an op of an unknown
	// domain, an attribute the schema does not list, version 1's float p.
	for name, data := range map[string][]byte{
		"perm ints": protoModel("t", onnx17, withAttrs(pnode("Transpose", "", []string{"x"}, "z"),
			&onnxpb.AttributeProto{Name: proto.String("perm"), Type: attrType(AttrInts), Ints: []int64{1, 0}})),
		"untyped old attribute": protoModel("t", onnx17, withAttrs(pnode("Softmax", "", []string{"x"}, "z"),
			&onnxpb.AttributeProto{Name: proto.String("axis"), I: proto.Int64(1)})),
		"vendor op": protoModel("t", map[string]int64{"": 17, "my.domain": 400}, withAttrs(pnode("MyOp", "my.domain", []string{"x"}, "z"),
			&onnxpb.AttributeProto{Name: proto.String("perm"), Type: attrType(AttrString), S: []byte("abc")})),
		"p of GlobalLpPool-1": protoModel("t", map[string]int64{"": 1}, withAttrs(pnode("GlobalLpPool", "", []string{"x"}, "z"),
			&onnxpb.AttributeProto{Name: proto.String("p"), Type: attrType(AttrFloat), F: proto.Float32(2)})),
		"empty ints": protoModel("t", onnx17, withAttrs(pnode("Transpose", "", []string{"x"}, "z"),
			&onnxpb.AttributeProto{Name: proto.String("perm"), Type: attrType(AttrInts)})),
	} {
		if _, err := Decode(data, ""); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A long name is shortened in messages: its start and end and its length.
func TestShortName(t *testing.T) {
	long := strings.Repeat("é", 1<<19) // 1 MiB
	s := ShortName("n" + long + "end")
	if len(s) > 120 || !strings.HasPrefix(s, "né") || !strings.HasSuffix(s, "end") || !strings.Contains(s, "(1048580 bytes)") {
		t.Errorf("ShortName gave %q", s)
	}
	if ShortName("short") != "short" {
		t.Error("a short name changed")
	}
	if !utf8.ValidString(s) {
		t.Errorf("cut inside a rune: %q", s)
	}
	m := protoModel("t", map[string]int64{"": 17}, withAttrs(&onnxpb.NodeProto{Name: proto.String(long), OpType: proto.String("Transpose"), Input: []string{"x"}, Output: []string{"z"}},
		&onnxpb.AttributeProto{Name: proto.String("perm"), Type: attrType(AttrString), S: []byte("abc")}))
	_, err := Decode(m, "")
	if err == nil || len(err.Error()) > 400 {
		t.Errorf("error of %d bytes for a node with a 1 MiB name", len(err.Error()))
	}
}
