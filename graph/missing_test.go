package graph

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestLoadWithMissingExternalData(t *testing.T) {
	dir := t.TempDir()
	m := NewModel(8, "t", Opset{Domain: "", Version: 17})
	big := make([]float32, 4096)
	w, err := NewTensor("w", Float, []int64{4096}, big)
	if err != nil {
		t.Fatal(err)
	}
	small, _ := NewTensor("s", Float, []int64{2}, []float32{1, 2})
	x := m.Graph.AddInput("x", TensorType(Float, Dims(4096)))
	m.Graph.AddOutput(m.Graph.Op("Add", []*Value{x, m.Graph.AddInitializer(w)}, 1)[0])
	m.Graph.AddInitializer(small)
	path := filepath.Join(dir, "m.onnx")
	if err := m.Save(path, SaveOptions{External: ExternalizeLarge}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path + ".data"); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); !errors.Is(err, ErrExternalMissing) {
		t.Fatalf("Load without the side file: %v, want ErrExternalMissing", err)
	}
	got, err := LoadWith(path, LoadOptions{AllowMissingExternal: true})
	if err != nil {
		t.Fatal(err)
	}
	var seen int
	for _, v := range got.Graph.Initializers {
		switch e := v.Const.External(); {
		case e != nil:
			seen++
			if !e.Missing() {
				t.Error("an absent side file is not marked missing")
			}
			if _, err := v.Const.RawBytes(); !errors.Is(err, ErrExternalMissing) {
				t.Errorf("reading an absent tensor: %v", err)
			}
		default:
			if f, err := v.Const.Float64s(); err != nil || f[1] != 2 {
				t.Errorf("inline tensor: %v %v", f, err)
			}
		}
	}
	if seen != 1 {
		t.Errorf("%d external tensors, want 1", seen)
	}
}
