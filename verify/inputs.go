package verify

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// ReadSets reads given input sets for model m from path: a .npz file (one
// set), an ONNX test-data folder (input_N.pb, one set), or a folder of
// test_data_set_N folders (one set each, in numeric order). With outputs,
// each set's output_N.pb files are read too and must be present.
func ReadSets(path string, m *graph.Model, outputs bool) ([]NamedInputs, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		if outputs {
			return nil, fmt.Errorf("%s: reference outputs must be a test-data folder (output_N.pb files)", path)
		}
		in, err := kernels.ReadInputs(path, m)
		if err != nil {
			return nil, err
		}
		return []NamedInputs{{Name: filepath.Base(path), Inputs: in}}, nil
	}
	dirs, _ := filepath.Glob(filepath.Join(path, "test_data_set_*"))
	var sets []string
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			sets = append(sets, d)
		}
	}
	num := func(d string) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "test_data_set_"))
		return n
	}
	sort.Slice(sets, func(i, j int) bool { return num(sets[i]) < num(sets[j]) })
	if len(sets) == 0 {
		sets = []string{path}
	}
	var out []NamedInputs
	for _, d := range sets {
		in, err := kernels.ReadInputs(d, m)
		if err != nil {
			return nil, err
		}
		s := NamedInputs{Name: filepath.Base(d), Inputs: in}
		if outputs {
			s.Outputs, err = kernels.ReadOutputs(d, m)
			if err != nil {
				return nil, err
			}
		}
		out = append(out, s)
	}
	return out, nil
}
