package graph_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
)

// FuzzLoad feeds the loader arbitrary bytes: it must return a model or an
// error, never panic; a model it returns must encode again.
func FuzzLoad(f *testing.F) {
	files := corpus(f)
	for i, p := range files {
		if i%8 != 0 { // a spread of ops, without reading all 900 files
			continue
		}
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := graph.Decode(data, "")
		if err != nil {
			return
		}
		if _, err := m.Marshal(); err != nil {
			t.Fatalf("a loaded model does not encode: %v", err)
		}
		m.Graph.TopoSort()
		m.Graph.EliminateDeadCode()
	})
}

// FuzzDecodeTensor feeds the test-data tensor decoder arbitrary bytes: an
// error or a tensor whose elements decode, never a panic.
func FuzzDecodeTensor(f *testing.F) {
	for i, p := range corpus(f) {
		if i%16 != 0 {
			continue
		}
		dir := filepath.Join(filepath.Dir(p), "test_data_set_0")
		files, _ := filepath.Glob(filepath.Join(dir, "*.pb"))
		for _, tf := range files {
			if b, err := os.ReadFile(tf); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tt, err := graph.DecodeTensor(data)
		if err != nil {
			return
		}
		if tt.DataType() != graph.String {
			if _, err := tt.Data(); err != nil && tt.DataType().Known() {
				t.Fatalf("a decoded tensor of %v does not yield its elements: %v", tt.DataType(), err)
			}
		}
		if _, err := graph.EncodeTensor(tt); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzDecodeValue feeds the sequence and optional test-data decoder
// arbitrary bytes for a sequence of tensors, an optional sequence and an
// optional tensor: an error or a value whose tensors decode, never a
// panic.
func FuzzDecodeValue(f *testing.F) {
	for i, p := range corpus(f) {
		name := filepath.Base(filepath.Dir(p))
		if !strings.Contains(name, "sequence") && !strings.Contains(name, "optional") && i%64 != 0 {
			continue
		}
		dir := filepath.Join(filepath.Dir(p), "test_data_set_0")
		files, _ := filepath.Glob(filepath.Join(dir, "*.pb"))
		for _, tf := range files {
			if b, err := os.ReadFile(tf); err == nil && len(b) < 4096 {
				f.Add(b)
			}
		}
	}
	f32 := graph.TensorType(graph.Float, nil)
	types := []*graph.Type{graph.SequenceType(f32), graph.OptionalType(graph.SequenceType(f32)), graph.OptionalType(f32)}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, typ := range types {
			v, err := graph.DecodeValue(data, typ)
			if err != nil {
				continue
			}
			var walk func(v *graph.DataValue)
			walk = func(v *graph.DataValue) {
				switch {
				case v == nil:
				case v.Tensor != nil:
					if v.Tensor.DataType().Known() && v.Tensor.DataType() != graph.String {
						if _, err := v.Tensor.Data(); err != nil {
							t.Fatalf("a decoded tensor of %v does not yield its elements: %v", v.Tensor.DataType(), err)
						}
					}
				case v.Elem != nil:
					walk(v.Elem)
				default:
					for _, e := range v.Sequence {
						walk(e)
					}
				}
			}
			walk(v)
		}
	})
}
