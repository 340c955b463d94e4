package cli

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"archive/zip"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/conformance"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestRunReproducesConformanceOutputs runs conformance cases through the
// command line, writes the outputs and compares them with the expected
// files at the conformance tolerance (rtol 1e-3, atol 1e-7).
func TestRunReproducesConformanceOutputs(t *testing.T) {
	for _, c := range []string{"test_gather_0", "test_matmul_4d", "test_softmax_axis_1", "test_layer_normalization_4d_axis0", "test_reduce_mean_keepdims_example", "test_slice_neg_steps"} {
		dir := conformance.Case(t, "onnx-node", c)
		out := t.TempDir()
		for _, acc := range []string{"float32", "float64"} {
			code, js, errOut := runCLI(t, "run", filepath.Join(dir, "model.onnx"), "--inputs", dir, "--outputs", out, "--json", "--accumulate", acc)
			if code != 0 {
				t.Fatalf("%s: exit %d: %s", c, code, errOut)
			}
			var r RunReport
			if err := json.Unmarshal([]byte(js), &r); err != nil || len(r.Outputs) == 0 {
				t.Fatalf("%s: bad JSON %q", c, js)
			}
			m, err := graph.Load(filepath.Join(dir, "model.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := kernels.ReadOutputs(out, m)
			if err != nil {
				t.Fatal(err)
			}
			want, err := kernels.ReadOutputs(filepath.Join(dir, "test_data_set_0"), m)
			if err != nil {
				t.Fatal(err)
			}
			for name, w := range want {
				g := got[name]
				if g == nil || !equalShape(g.Shape, w.Shape) {
					t.Fatalf("%s: output %q shape %v, want %v", c, name, g, w.Shape)
				}
				gv, wv := g.Float64s(), w.Float64s()
				for i := range wv {
					if !(math.Abs(gv[i]-wv[i]) <= 1e-7+1e-3*math.Abs(wv[i])) && !(math.IsNaN(gv[i]) && math.IsNaN(wv[i])) {
						t.Fatalf("%s (%s): output %q[%d] = %v, want %v", c, acc, name, i, gv[i], wv[i])
					}
				}
			}
		}
	}
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRunWithNPZ(t *testing.T) {
	dir := conformance.Case(t, "onnx-node", "test_gather_0")
	m, err := graph.Load(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	feeds, err := kernels.ReadInputs(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "in.npz")
	writeNPZ(t, p, feeds)
	code, out, errOut := runCLI(t, "run", filepath.Join(dir, "model.onnx"), "--inputs", p)
	if code != 0 || !strings.Contains(out, "-2.55299") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	// A .npz missing an input is bad input.
	q := filepath.Join(t.TempDir(), "short.npz")
	writeNPZ(t, q, map[string]*kernels.Tensor{"data": feeds["data"]})
	if code, _, errOut := runCLI(t, "run", filepath.Join(dir, "model.onnx"), "--inputs", q); code != 2 || !strings.Contains(errOut, `"indices"`) {
		t.Fatalf("missing array: exit %d %q", code, errOut)
	}
}

// writeNPZ writes tensors as a NumPy .npz archive with their shapes, the
// way numpy.savez does.
func writeNPZ(t *testing.T, path string, ts map[string]*kernels.Tensor) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for name, tt := range ts {
		descr := map[graph.DataType]string{graph.Float: "<f4", graph.Int64: "<i8"}[tt.DType]
		if descr == "" {
			t.Fatalf("writeNPZ: %v", tt.DType)
		}
		shape := ""
		for _, d := range tt.Shape {
			shape += fmt.Sprintf("%d, ", d)
		}
		hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, strings.TrimSuffix(shape, " "))
		for (10+len(hdr)+1)%64 != 0 {
			hdr += " "
		}
		hdr += "\n"
		w, err := zw.Create(name + ".npy")
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("\x93NUMPY\x01\x00"))
		binary.Write(w, binary.LittleEndian, uint16(len(hdr)))
		w.Write([]byte(hdr))
		binary.Write(w, binary.LittleEndian, tt.Raw())
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestRunErrorExitCodes(t *testing.T) {
	if code := exitCode(runError("m.onnx", fmt.Errorf("node %q: %w", "n", kernels.ErrInternal))); code != ExitInternal {
		t.Errorf("a kernel's internal error exits %d, want %d", code, ExitInternal)
	}
	if code := exitCode(runError("m.onnx", fmt.Errorf("unsupported op"))); code != ExitBadInput {
		t.Errorf("an unsupported op exits %d, want %d", code, ExitBadInput)
	}
}

// TestRunRefusesHugeBroadcast runs testdata/broadcast_64gib: a 343-byte
// model whose Add broadcasts Range(0, n) as a column and as a row, with
// n = 131072 in its test data, to float32[131072,131072] (64 GiB). The run
// must exit 2 with one line naming the node, before allocating it (it used
// to die with "fatal error: runtime: out of memory" and a stack dump).
func TestRunRefusesHugeBroadcast(t *testing.T) {
	dir := filepath.Join("testdata", "broadcast_64gib")
	code, out, errOut := runCLI(t, "run", filepath.Join(dir, "model.onnx"), "--inputs", dir)
	if code != ExitBadInput {
		t.Errorf("exit %d, want %d", code, ExitBadInput)
	}
	if out != "" {
		t.Errorf("stdout %q, want nothing", out)
	}
	if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, `node "Add"`) || !strings.Contains(errOut, "tensor too large") {
		t.Errorf("stderr %q, want one line naming the Add node and the size", errOut)
	}
}

// TestStatsOfHugeValues: the statistics of float64 outputs near the
// type's limits stay finite (the sum of squares overflowed: NaN has no
// JSON, and run --json failed with an internal error).
func TestStatsOfHugeValues(t *testing.T) {
	for _, c := range []struct {
		vals           []float64
		mean, std, tol float64
	}{
		{[]float64{1e300, -1e300}, 0, 1e300, 1e285},
		{[]float64{1.7e308, 1.7e308, 1.7e308}, 1.7e308, 0, 1e294},
		{[]float64{1, 2, 3, 4, math.NaN(), math.Inf(1)}, 2.5, math.Sqrt(1.25), 1e-15},
		{[]float64{0, 0}, 0, 0, 0},
	} {
		s := statsOf("y", kernels.FromSlice([]int{len(c.vals)}, c.vals))
		if math.Abs(s.Mean-c.mean) > c.tol || math.Abs(s.Std-c.std) > c.tol {
			t.Errorf("%v: mean %g, std %g; want %g, %g", c.vals, s.Mean, s.Std, c.mean, c.std)
		}
		if _, err := json.Marshal(s); err != nil {
			t.Errorf("%v: %v", c.vals, err)
		}
	}
}

// TestRunJSONReportsLoadApartFromCompute runs a Llama whose weights are in
// a side file with --json: the report (valid against reports.schema.json)
// gives the load and compute times apart and the memory of the weights
// (packed for the products, used in place over the mapped file) and of
// the intermediates.
func TestRunJSONReportsLoadApartFromCompute(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.onnx")
	if err := testmodels.Llama(testmodels.DefaultLlama).Save(model, graph.SaveOptions{External: graph.ExternalizeLarge, Threshold: 256}); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "inputs")
	os.Mkdir(in, 0o755)
	for i, name := range []string{"input_ids", "position_ids"} {
		if err := kernels.WriteTensorFile(filepath.Join(in, fmt.Sprintf("input_%d.pb", i)), name, kernels.FromSlice([]int{1, 4}, []int64{3, 1, 4, 1 + int64(i)})); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCLI(t, "run", model, "--inputs", in, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	doc, err := oneJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := compileDefs(t, "reports.schema.json", ReportsSchema, "run")["run"].Validate(doc); err != nil {
		t.Fatalf("the report does not follow reports.schema.json: %v\n%s", err, out)
	}
	var r RunReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.LoadSeconds <= 0 || r.ComputeSeconds <= 0 {
		t.Errorf("load %g s, compute %g s", r.LoadSeconds, r.ComputeSeconds)
	}
	if m := r.Memory; m.PackedWeightBytes <= 0 || m.MappedWeightBytes <= 0 || m.PeakIntermediateBytes <= 0 {
		t.Errorf("memory %+v", m)
	}
}
