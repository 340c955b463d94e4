package kernels

import (
	"archive/zip"
	bin "encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"codeberg.org/sbinet/npyio/npy/float16"
	"codeberg.org/sbinet/npyio/npz"
	xf16 "github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
)

// FeedInputs lists the inputs a caller must feed: the graph inputs that no
// initializer provides, in order.
func FeedInputs(m *graph.Model) []*graph.Value {
	var out []*graph.Value
	for _, v := range m.Graph.Inputs {
		if v.Const == nil {
			out = append(out, v)
		}
	}
	return out
}

// ReadInputs reads the values to feed a model from path: an ONNX test-data
// folder (input_0.pb ... in the order of the model's inputs; a case folder
// holding test_data_set_0/ works too) or a NumPy .npz archive whose arrays
// are named after the inputs.
func ReadInputs(path string, m *graph.Model) (map[string]*Tensor, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		if strings.HasSuffix(path, ".npz") {
			return readNPZInputs(path, m)
		}
		return nil, fmt.Errorf("%s: inputs must be a test-data folder or a .npz file", path)
	}
	return readFolder(path, "input", FeedInputs(m))
}

// ReadOutputs reads expected outputs (output_0.pb ...) from a test-data
// folder, keyed by the model's output names.
func ReadOutputs(dir string, m *graph.Model) (map[string]*Tensor, error) {
	return readFolder(dir, "output", m.Graph.Outputs)
}

func readFolder(dir, prefix string, vals []*graph.Value) (map[string]*Tensor, error) {
	files, _ := filepath.Glob(filepath.Join(dir, prefix+"_*.pb"))
	if len(files) == 0 {
		if sub := filepath.Join(dir, "test_data_set_0"); isDir(sub) {
			return readFolder(sub, prefix, vals)
		}
	}
	if len(files) != len(vals) {
		return nil, fmt.Errorf("%s: %d %s_N.pb files for %d %ss of the model", dir, len(files), prefix, len(vals), prefix)
	}
	out := make(map[string]*Tensor, len(vals))
	for i, v := range vals {
		p := filepath.Join(dir, fmt.Sprintf("%s_%d.pb", prefix, i))
		if v.Type != nil && !v.Type.IsTensor() {
			return nil, fmt.Errorf("%s: %s %q is a %s; only tensors are supported", p, prefix, v.Name, v.Type.Kind())
		}
		t, err := ReadTensorFile(p)
		if err != nil {
			return nil, err
		}
		out[v.Name] = t
	}
	return out, nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func readNPZInputs(path string, m *graph.Model) (map[string]*Tensor, error) {
	f, fi, err := graph.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := openNPZ(f, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	limit := npzLimit(fi.Size())
	keys := map[string]string{}
	for _, k := range r.Keys() {
		keys[strings.TrimSuffix(k, ".npy")] = k
	}
	all := sortedKeys(keys)
	out := map[string]*Tensor{}
	for _, v := range FeedInputs(m) {
		k, ok := keys[v.Name]
		if !ok {
			has := "no array at all"
			if len(all) > 0 {
				has = "its arrays are " + strings.Join(all, ", ")
			}
			return nil, fmt.Errorf("%s: no array named %q for input %q of the model (%s)", path, v.Name, v.Name, has)
		}
		delete(keys, v.Name)
		t, err := readNPZArray(r, k, limit)
		if err != nil {
			return nil, fmt.Errorf("%s: array %q: %w", path, v.Name, err)
		}
		out[v.Name] = t
	}
	if len(keys) > 0 {
		return nil, fmt.Errorf("%s: arrays %s are not inputs of the model", path, strings.Join(sortedKeys(keys), ", "))
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// openNPZ opens an .npz archive of size bytes read from ra. The NumPy
// parser allocates the header length an array claims, so each array's
// header is checked first; a panic of the parser on a malformed file is
// an error.
func openNPZ(ra io.ReaderAt, size int64) (r *npz.Reader, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("malformed .npz archive (%v)", p)
		}
	}()
	z, err := zip.NewReader(ra, size)
	if err != nil {
		return nil, err
	}
	for _, f := range z.File {
		if err := checkNPYHeader(f); err != nil {
			return nil, fmt.Errorf("array %q: %w", f.Name, err)
		}
	}
	return npz.NewReader(ra, size)
}

// maxNPYHeader bounds the header of a .npy array (NumPy writes a few
// hundred bytes).
const maxNPYHeader = 1 << 16

// checkNPYHeader reads the fixed start of the .npy file f and checks the
// header length it gives.
func checkNPYHeader(f *zip.File) error {
	rc, err := f.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	var b [12]byte
	if _, err := io.ReadFull(rc, b[:10]); err != nil {
		return fmt.Errorf("not a .npy array: %w", err)
	}
	if string(b[:6]) != "\x93NUMPY" {
		return fmt.Errorf("not a .npy array")
	}
	var n int64
	switch b[6] {
	case 1:
		n = int64(bin.LittleEndian.Uint16(b[8:10]))
	case 2, 3:
		if _, err := io.ReadFull(rc, b[10:12]); err != nil {
			return fmt.Errorf("not a .npy array: %w", err)
		}
		n = int64(bin.LittleEndian.Uint32(b[8:12]))
	default:
		return fmt.Errorf(".npy version %d is not supported", b[6])
	}
	if n > maxNPYHeader {
		return fmt.Errorf(".npy header of %d bytes", n)
	}
	return nil
}

// npzLimit bounds the bytes of the arrays of an .npz file of size bytes:
// deflate expands at most about 1032 times.
func npzLimit(size int64) int64 { return 1032*size + 1<<16 }

// readNPZArray reads array key of r, of at most limit bytes. The file is
// outside input: a header that does not fit its data, or a parser panic
// on malformed data, is an error.
func readNPZArray(r *npz.Reader, key string, limit int64) (t *Tensor, err error) {
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, fmt.Errorf("malformed array (%v)", p)
		}
	}()
	h := r.Header(key)
	if h == nil {
		return nil, fmt.Errorf("no header")
	}
	if h.Descr.Fortran {
		return nil, fmt.Errorf("Fortran-ordered arrays are not supported")
	}
	shape := append([]int{}, h.Descr.Shape...)
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("negative dimension in shape %v", shape)
		}
		if d > 0 && n > limit/int64(d) {
			return nil, fmt.Errorf("shape %v is larger than the file can hold", shape)
		}
		n *= int64(d)
	}
	if n*8 > limit {
		return nil, fmt.Errorf("shape %v is larger than the file can hold", shape)
	}
	kind := strings.TrimLeft(strings.Trim(h.Descr.Type, `'"`), "<|=")
	if strings.Contains(h.Descr.Type, ">") {
		return nil, fmt.Errorf("big-endian arrays are not supported")
	}
	read := func(ptr any) error {
		if err := r.Read(key, ptr); err != nil {
			return err
		}
		if got := reflect.ValueOf(ptr).Elem().Len(); int64(got) != n {
			return fmt.Errorf("%d elements for shape %v", got, shape)
		}
		return nil
	}
	switch kind {
	case "f4":
		var d []float32
		if err := read(&d); err != nil {
			return nil, err
		}
		return FromSlice(shape, d), nil
	case "f8":
		var d []float64
		if err := read(&d); err != nil {
			return nil, err
		}
		return FromSlice(shape, d), nil
	case "f2":
		var d []float16.Num
		if err := read(&d); err != nil {
			return nil, err
		}
		h := make([]xf16.Float16, len(d))
		for i, x := range d {
			h[i] = xf16.Fromfloat32(x.Float32())
		}
		return FromSlice(shape, h), nil
	case "i8":
		var d []int64
		if err := read(&d); err != nil {
			return nil, err
		}
		return FromSlice(shape, d), nil
	case "i4":
		var d []int32
		if err := read(&d); err != nil {
			return nil, err
		}
		return FromSlice(shape, d), nil
	case "i1":
		var d []int8
		if err := read(&d); err != nil {
			return nil, err
		}
		return FromSlice(shape, d), nil
	case "u1":
		var d []uint8
		if err := read(&d); err != nil {
			return nil, err
		}
		return FromSlice(shape, d), nil
	case "b1":
		var d []bool
		if err := read(&d); err != nil {
			return nil, err
		}
		return FromSlice(shape, d), nil
	}
	return nil, fmt.Errorf("NumPy dtype %q is not supported", h.Descr.Type)
}
