package kernels

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"codeberg.org/sbinet/npyio/npz"

	"github.com/onnxpe/onnxpe/graph"
)

// npzBytes builds an .npz archive of arrays (a seed of FuzzReadNPZ).
func npzBytes(t testing.TB, vs map[string]any) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := npz.NewWriter(&buf)
	for k, v := range vs {
		if err := w.Write(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzReadNPZ: ReadInputs of an .npz file of any content returns tensors
// or an error; it never panics (nor allocates without bound).
func FuzzReadNPZ(f *testing.F) {
	f.Add(npzBytes(f, map[string]any{"x": []float32{1, 2, 3}}))
	f.Add(npzBytes(f, map[string]any{"x": []int64{1, 2}, "y": []bool{true}}))
	f.Add(npzBytes(f, map[string]any{"x": []float64{}}))
	f.Add(npzBytes(f, map[string]any{"x": []uint8{1, 2, 3, 4}, "y": []int8{-1}}))
	f.Add([]byte("PK\x03\x04"))
	f.Add([]byte{})
	m := graph.NewModel(9, "fuzz", graph.Opset{Version: 17})
	m.Graph.AddInput("x", graph.TensorType(graph.Float, nil))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "in.npz")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ins, err := ReadInputs(path, m)
		if err == nil {
			if x := ins["x"]; x == nil || x.Len() != lenAny(x.Raw()) {
				t.Fatalf("ReadInputs gave %v without an error", x)
			}
		}
		// Every array, whatever its name and type.
		r, err := openNPZ(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		for _, k := range r.Keys() {
			if x, err := readNPZArray(r, k, npzLimit(int64(len(data)))); err == nil && x.Len() != lenAny(x.Raw()) {
				t.Fatalf("array %s: %v holds %d elements", k, x, lenAny(x.Raw()))
			}
		}
	})
}
