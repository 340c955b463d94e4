package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/onnxpb"
	"github.com/onnxpe/onnxpe/kernels"
)

// brokenModel writes a model that breaks the three rules ONNX Runtime
// tolerates: its nodes are out of order (Gelu before the Neg it reads),
// its opset imports leave out com.microsoft, and it names no producer. It
// returns the model's path and a test-data folder for it.
func brokenModel(t *testing.T) (string, string) {
	dir := t.TempDir()
	m := graph.NewModel(8, "", graph.Opset{Domain: "", Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, graph.Dims(2, 3)))
	neg := g.NewNode("Neg", "", []*graph.Value{x}, 1)
	gelu := g.NewNode("Gelu", "com.microsoft", neg.Outputs(), 1)
	g.Append(gelu)
	g.Append(neg)
	gelu.Outputs()[0].Type = graph.TensorType(graph.Float, graph.Dims(2, 3))
	g.AddOutput(gelu.Outputs()[0])
	p := filepath.Join(dir, "model.onnx")
	if err := m.Save(p, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	td := filepath.Join(dir, "test_data_set_0")
	os.Mkdir(td, 0o755)
	if err := kernels.WriteTensorFile(filepath.Join(td, "input_0.pb"), "x", kernels.FromSlice([]int{2, 3}, []float32{1, -2, 3, -4, 5, -6})); err != nil {
		t.Fatal(err)
	}
	return p, td
}

// TestLoadWarnsForEachRepair runs and inspects a model that breaks the
// rules ONNX Runtime tolerates: each break is one warning line on stderr,
// the commands succeed, and the outputs are right.
func TestLoadWarnsForEachRepair(t *testing.T) {
	p, td := brokenModel(t)
	wants := []string{"names no producer", "nodes are not in topological order", "leave out (node"}
	code, out, errOut := runCLI(t, "run", p, "--inputs", td, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != len(wants) {
		t.Fatalf("stderr has %d lines, want %d warnings: %q", len(lines), len(wants), errOut)
	}
	for i, w := range wants {
		if !strings.HasPrefix(lines[i], "onnxpe: warning: "+p+": ") || !strings.Contains(lines[i], w) {
			t.Errorf("warning %d: %q, want one about %q", i, lines[i], w)
		}
	}
	var r RunReport
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Outputs) != 1 {
		t.Fatalf("bad JSON %q: %v", out, err)
	}
	// Gelu(-x) at x = 1: -1 * Phi(-1) = -0.158655...
	if got := r.Outputs[0].Min; math.Abs(got-(-0.1586552539)) > 1e-5 {
		t.Errorf("min output %v, want Gelu(-1) = -0.158655", got)
	}
	code, out, errOut = runCLI(t, "inspect", p, "--json")
	if code != 0 || strings.Count(errOut, "onnxpe: warning:") != len(wants) {
		t.Fatalf("inspect: exit %d, stderr %q", code, errOut)
	}
	var ir InspectReport
	if err := json.Unmarshal([]byte(out), &ir); err != nil || len(ir.Repairs) != len(wants) {
		t.Errorf("inspect --json repairs %v (%v)", ir.Repairs, err)
	}
	// A well-formed model warns about nothing.
	if code, _, errOut := runCLI(t, "inspect", gatherModel(t)); code != 0 || errOut != "" {
		t.Errorf("well-formed model: exit %d, stderr %q", code, errOut)
	}
}

// TestAmbiguousModelExits2 checks that a value defined twice stays an
// input error: exit 2, one line naming the file and the value.
func TestAmbiguousModelExits2(t *testing.T) {
	f32 := int32(graph.Float)
	vi := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32}}}}
	}
	node := func(op string, in, out string) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: proto.String(op), Input: []string{in}, Output: []string{out}}
	}
	m := &onnxpb.ModelProto{IrVersion: proto.Int64(8), ProducerName: proto.String("t"),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{Name: proto.String("g"), Input: []*onnxpb.ValueInfoProto{vi("x")}, Output: []*onnxpb.ValueInfoProto{vi("z")},
			Node: []*onnxpb.NodeProto{node("Neg", "x", "y"), node("Relu", "x", "y"), node("Relu", "y", "z")}}}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "dup.onnx")
	os.WriteFile(p, b, 0o644)
	code, out, errOut := runCLI(t, "inspect", p)
	if code != ExitBadInput || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, `value name "y" is defined twice`) {
		t.Errorf("exit %d, stdout %q, stderr %q: want exit 2 and one line about y", code, out, errOut)
	}
}
