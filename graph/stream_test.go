package graph

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// InlineAll streams external tensors into the model file: the bytes are
// those of marshalling the model with every tensor read into memory (as
// Save did), for tensors in initializers, in Constant nodes and in a
// subgraph's Constant.
func TestInlineStreamsTheSameBytes(t *testing.T) {
	m := NewModel(9, "t", Opset{Version: 17})
	g := m.Graph
	vals := func(n int, k float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = k + float32(i)
		}
		return v
	}
	mk := func(name string, n int, k float32) *Tensor {
		tt, err := NewTensor(name, Float, []int64{int64(n)}, vals(n, k))
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	x := g.AddInput("x", TensorType(Float, nil))
	w := g.AddInitializer(mk("w", 1000, 1))
	c := g.Op("Constant", nil, 1, TensorAttr("value", mk("c", 3000, 2)))[0]
	cond := g.AddInput("cond", TensorType(Bool, nil))
	then := g.NewSubgraph("then")
	then.AddOutput(then.Op("Constant", nil, 1, TensorAttr("value", mk("t", 5000, 3)))[0])
	els := g.NewSubgraph("else")
	els.AddOutput(els.Op("Constant", nil, 1, TensorAttr("value", mk("e", 5000, 4)))[0])
	ifn := g.NewNode("If", "", []*Value{cond}, 1, GraphAttr("then_branch", then), GraphAttr("else_branch", els))
	g.Append(ifn)
	s := g.Op("Add", []*Value{x, w}, 1)[0]
	g.AddOutput(g.Op("Add", []*Value{s, c}, 1)[0])
	g.AddOutput(ifn.Output(0))
	dir := t.TempDir()
	ext := filepath.Join(dir, "ext.onnx")
	if err := m.Save(ext, SaveOptions{External: ExternalizeLarge, Threshold: 1}); err != nil {
		t.Fatal(err)
	}
	me, err := Load(ext)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	me.eachTensor(func(t *Tensor) {
		if t.ext != nil {
			n++
		}
	})
	if n != 4 {
		t.Fatalf("%d external tensors, want 4", n)
	}
	want, err := me.encode(func(t *Tensor) (*onnxpb.TensorProto, error) {
		if t.ext == nil {
			return t.pb, nil
		}
		raw, err := t.RawBytes()
		if err != nil {
			return nil, err
		}
		tp := proto.Clone(t.pb).(*onnxpb.TensorProto)
		tp.ExternalData, tp.DataLocation, tp.RawData = nil, nil, raw
		return tp, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	inl := filepath.Join(dir, "inline.onnx")
	if err := me.Save(inl, SaveOptions{External: InlineAll}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(inl)
	if !bytes.Equal(got, want) {
		t.Fatalf("streamed %d bytes, marshalled %d: they differ", len(got), len(want))
	}
	// And back out: the side file holds the same values.
	mi, err := Load(inl)
	if err != nil {
		t.Fatal(err)
	}
	back := filepath.Join(dir, "back.onnx")
	if err := mi.Save(back, SaveOptions{External: ExternalizeLarge, Threshold: 1}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(ext + ".data")
	b, _ := os.ReadFile(back + ".data")
	if !bytes.Equal(a, b) {
		t.Error("externalizing the inlined model gave another side file")
	}
}
