package graph_test

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"github.com/onnxpe/onnxpe/graph"
)

// TestMappedSideFiles checks Tensor.Mapped: the bytes of an external
// tensor mapped from its side file equal what RawBytes reads; two models
// loaded from the same files share the mapping (the same memory); a side
// file replaced under the same name maps anew; an inline tensor is not
// mapped.
func TestMappedSideFiles(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("side files are mapped on Linux only")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "m.onnx")
	save := func(base float32) {
		m := graph.NewModel(8, "mapped", graph.Opset{Version: 17})
		v := make([]float32, 3000)
		for i := range v {
			v[i] = base + float32(i)
		}
		w, _ := graph.NewTensor("w", graph.Float, []int64{3000}, v)
		small, _ := graph.NewTensor("s", graph.Float, []int64{2}, []float32{1, 2})
		x := m.Graph.AddInput("x", graph.TensorType(graph.Float, graph.Dims(3000)))
		m.Graph.AddOutput(m.Graph.Op("Add", []*graph.Value{x, m.Graph.AddInitializer(w)}, 1)[0])
		m.Graph.AddInitializer(small)
		if err := m.Save(path, graph.SaveOptions{External: graph.ExternalizeLarge}); err != nil {
			t.Fatal(err)
		}
	}
	load := func() (w, s *graph.Tensor) {
		m, err := graph.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return m.Graph.Lookup("w").Const, m.Graph.Lookup("s").Const
	}
	save(0)
	w1, s1 := load()
	b1, ok, err := w1.Mapped()
	if err != nil || !ok {
		t.Fatalf("Mapped: %v %v", ok, err)
	}
	raw, _ := w1.RawBytes()
	if !bytes.Equal(b1, raw) {
		t.Fatal("the mapped bytes differ from the file's")
	}
	if uintptr(unsafe.Pointer(&b1[0]))%4096 != 0 {
		t.Errorf("the tensor is not page aligned in the side file onnxpe wrote")
	}
	if _, ok, _ := s1.Mapped(); ok {
		t.Error("an inline tensor is mapped")
	}
	w2, _ := load()
	b2, _, _ := w2.Mapped()
	if &b1[0] != &b2[0] {
		t.Error("two loads of one side file map it twice")
	}
	graph.PopulateMapped(b1)
	graph.ReleaseMapped(b1)
	if !bytes.Equal(b1, raw) {
		t.Fatal("released pages read back different bytes")
	}
	// Replaced under the same name: the new bytes.
	if err := os.Remove(path + ".data"); err != nil {
		t.Fatal(err)
	}
	save(1)
	w3, _ := load()
	b3, _, _ := w3.Mapped()
	raw3, _ := w3.RawBytes()
	if !bytes.Equal(b3, raw3) || bytes.Equal(b3, raw) {
		t.Error("a replaced side file maps its old bytes")
	}
}

// TestNewExternalTensor writes a tensor's bytes to a side file, refers to
// them with NewExternalTensor, saves the model beside it and reads the
// elements back after loading; sizes that do not match the dims and
// locations that are not plain names are refused, and the tensor is not
// readable before the save.
func TestNewExternalTensor(t *testing.T) {
	dir := t.TempDir()
	want := []float32{1, 2, 3, 4, 5, 6}
	src, _ := graph.NewTensor("w", graph.Float, []int64{2, 3}, want)
	raw, _ := src.RawBytes()
	if err := os.WriteFile(filepath.Join(dir, "w.bin"), append(make([]byte, 64), raw...), 0o644); err != nil {
		t.Fatal(err)
	}
	et, err := graph.NewExternalTensor("w", graph.Float, []int64{2, 3}, "w.bin", 64, int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := et.RawBytes(); err == nil {
		t.Error("a tensor made in memory read its side file before any save")
	}
	m := graph.NewModel(8, "ext", graph.Opset{Version: 17})
	x := m.Graph.AddInput("x", graph.TensorType(graph.Float, graph.Dims(2, 3)))
	m.Graph.AddOutput(m.Graph.Op("Add", []*graph.Value{x, m.Graph.AddInitializer(et)}, 1)[0])
	path := filepath.Join(dir, "m.onnx")
	if err := m.Save(path, graph.SaveOptions{External: graph.KeepStorage}); err != nil {
		t.Fatal(err)
	}
	l, err := graph.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Graph.Lookup("w").Const.Data()
	if err != nil {
		t.Fatal(err)
	}
	if g := got.([]float32); len(g) != len(want) || g[5] != 6 || g[0] != 1 {
		t.Errorf("read back %v, want %v", g, want)
	}
	if _, err := graph.NewExternalTensor("w", graph.Float, []int64{2, 3}, "w.bin", 0, 20); err == nil {
		t.Error("20 bytes for 6 float32s accepted")
	}
	if _, err := graph.NewExternalTensor("w", graph.Float, []int64{2, 3}, "../w.bin", 0, 24); err == nil {
		t.Error("a location outside the folder accepted")
	}
}
