package graph_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/conformance"
	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// corpus lists every model.onnx of the vendored conformance data
// and of testmodels/.
func corpus(t testing.TB) []string {
	t.Helper()
	files := conformance.Models(t)
	m, err := filepath.Glob("../testmodels/models/*/*.onnx")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, m...)
}

func TestRoundTripIsByteIdentical(t *testing.T) {
	files := append(corpus(t), conformance.BackendModels(t)...)
	if len(files) < 2900 {
		t.Fatalf("found %d models, want the 969 + 1942 conformance models and the corpus", len(files))
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := graph.Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		got, err := m.Marshal()
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: saved %d bytes differ from the %d loaded", f, len(got), len(want))
		}
	}
	t.Logf("%d models round-tripped", len(files))
}

// TestUnknownFieldsSurvive adds fields this schema does not know (as a
// newer ONNX would write them) to the model, the graph, a node, an
// attribute, a tensor and a value declaration: saving keeps them all.
func TestUnknownFieldsSurvive(t *testing.T) {
	m, _ := smallModel(t)
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	mp := &onnxpb.ModelProto{}
	if err := proto.Unmarshal(data, mp); err != nil {
		t.Fatal(err)
	}
	// Field 999, varint 42; field 1000, bytes "new".
	unknown := protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 42)
	unknown = protowire.AppendString(protowire.AppendTag(unknown, 1000, protowire.BytesType), "new")
	add := func(msg proto.Message) {
		r := msg.ProtoReflect()
		r.SetUnknown(append(r.GetUnknown(), unknown...))
	}
	add(mp)
	add(mp.Graph)
	add(mp.Graph.Node[0])
	add(mp.Graph.Initializer[0])
	add(mp.Graph.Input[0])
	add(mp.Graph.Input[0].Type.GetTensorType().Shape)
	mp.Graph.Node[1].Attribute = append(mp.Graph.Node[1].Attribute, &onnxpb.AttributeProto{Name: proto.String("future"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(1)})
	add(mp.Graph.Node[1].Attribute[0])
	want, err := proto.Marshal(mp)
	if err != nil {
		t.Fatal(err)
	}
	back, err := graph.Decode(want, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := back.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("unknown fields were lost: %d bytes in, %d out", len(want), len(got))
	}
}
