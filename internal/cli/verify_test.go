package cli

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/onnxpe/onnxpe/verify"
)

func corpusFile(name, file string) string {
	return filepath.Join(testmodels.Dir(), "models", name, file)
}

// saveEdited loads a corpus model, edits it and saves it into a temporary
// folder.
func saveEdited(t *testing.T, name string, edit func(m *graph.Model)) string {
	t.Helper()
	m, err := graph.Load(corpusFile(name, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	edit(m)
	p := filepath.Join(t.TempDir(), name+".onnx")
	if err := m.Save(p, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVerifyEqualPairExitsZero(t *testing.T) {
	a, b := corpusFile("rope_llama", "model.onnx"), corpusFile("rope_llama", "ort_extended.onnx")
	code, out, errOut := runCLI(t, "verify", a, b)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{"SET", "MAX ABS", "ULP", "FIRST POS", "long", "far", "equal: models A and B agree on 4 input sets"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	code, js, _ := runCLI(t, "verify", a, b, "--json")
	var r verify.Report
	if code != 0 || json.Unmarshal([]byte(js), &r) != nil || !r.Equal || len(r.Sets) != 4 {
		t.Fatalf("--json: exit %d, %d sets\n%s", code, len(r.Sets), js)
	}
	if r.Sets[0].Outputs[0].Tolerance != verify.DefaultFloat32 {
		t.Errorf("tolerance %+v, want the float32 default", r.Sets[0].Outputs[0].Tolerance)
	}
}

// TestVerifyJUnit writes the report of a differing pair as JUnit XML and
// parses it: one test case per input set, failed where the set differs.
func TestVerifyJUnit(t *testing.T) {
	a := corpusFile("learned_gpt2", "model.onnx")
	b := saveEdited(t, "learned_gpt2", func(m *graph.Model) {
		for _, v := range m.Graph.Initializers {
			if v.Name == "wpe.weight" {
				d, _ := v.Const.Data()
				w := append([]float32(nil), d.([]float32)...)
				w[63*32+5] += 0.01 // the last position's row
				v.Const, _ = graph.NewTensor(v.Name, graph.Float, v.Const.Dims(), w)
				return
			}
		}
		t.Fatal("no wpe.weight")
	})
	xmlPath := filepath.Join(t.TempDir(), "verify.xml")
	code, js, errOut := runCLI(t, "verify", a, b, "--json", "--junit", xmlPath)
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, errOut)
	}
	var r verify.Report
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(xmlPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName xml.Name `xml:"testsuites"`
		Tests   int      `xml:"tests,attr"`
		Fails   int      `xml:"failures,attr"`
		Suites  []struct {
			Cases []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
				Error   *struct{} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("not JUnit XML: %v\n%s", err, data)
	}
	if len(doc.Suites) != 1 || len(doc.Suites[0].Cases) != len(r.Sets) || doc.Tests != len(r.Sets) || len(r.Sets) < 3 {
		t.Fatalf("%d suites, %d cases, tests=%d for %d input sets\n%s", len(doc.Suites), len(doc.Suites[0].Cases), doc.Tests, len(r.Sets), data)
	}
	failed := 0
	for i, c := range doc.Suites[0].Cases {
		if c.Name != r.Sets[i].Name {
			t.Errorf("case %d is %q, set %q", i, c.Name, r.Sets[i].Name)
		}
		if (c.Failure != nil) != !r.Sets[i].Equal {
			t.Errorf("case %s: failure %v, set equal %v", c.Name, c.Failure != nil, r.Sets[i].Equal)
		}
		if c.Failure != nil {
			failed++
		}
	}
	if failed != 1 || doc.Fails != 1 {
		t.Errorf("%d failed cases (attribute %d), want 1 (the long set)", failed, doc.Fails)
	}
}

// TestVerifyBadPairsExitTwo: pairs that cannot be compared exit 2 with one
// line on stderr and nothing on stdout.
func TestVerifyBadPairsExitTwo(t *testing.T) {
	gpt2 := corpusFile("learned_gpt2", "model.onnx")
	int32IDs := saveEdited(t, "learned_gpt2", func(m *graph.Model) {
		v := m.Graph.Inputs[0]
		dims, _ := v.Type.Shape()
		v.Type = graph.TensorType(graph.Int32, dims)
	})
	unknownOp := saveEdited(t, "learned_gpt2", func(m *graph.Model) {
		for _, n := range m.Graph.Nodes() {
			if n.OpType == "Softmax" {
				n.OpType = "NoSuchSoftmax"
				return
			}
		}
	})
	failsToRun := saveEdited(t, "learned_gpt2", func(m *graph.Model) {
		// Reshape to a size no input gives: every run fails.
		for _, n := range m.Graph.Nodes() {
			if n.OpType == "Reshape" {
				bad, _ := graph.NewTensor("bad_shape", graph.Int64, []int64{2}, []int64{7, 1000003})
				n.SetInput(1, m.Graph.AddInitializer(bad))
				return
			}
		}
	})
	corrupt := filepath.Join(t.TempDir(), "corrupt.onnx")
	os.WriteFile(corrupt, []byte("not a model"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{gpt2, corpusFile("rope_llama", "model.onnx")}, `has no input "position_ids"`},
		{[]string{gpt2, int32IDs}, `input "input_ids" is int64`},
		{[]string{gpt2, unknownOp}, "NoSuchSoftmax"},
		{[]string{gpt2, failsToRun}, "cannot run input set"},
		{[]string{failsToRun, gpt2}, "cannot run input set"},
		{[]string{gpt2, corrupt}, "corrupt.onnx"},
		{[]string{gpt2}, "give a model B"},
		{[]string{gpt2, gpt2, "--runtime", "tpu"}, "--runtime"},
		{[]string{gpt2, gpt2, "--seq", "0"}, "--seq"},
		{[]string{gpt2, "--against", t.TempDir()}, "input_N.pb"},
		{[]string{"--precision", gpt2, "--as", "float8"}, "--as"},
	} {
		code, out, errOut := runCLI(t, append([]string{"verify"}, c.args...)...)
		t.Logf("%s", errOut)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", c.args, code, errOut)
		}
		if lines := strings.Count(strings.TrimSpace(errOut), "\n"); lines != 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: stderr %q, want one line with %q", c.args, errOut, c.want)
		}
		if out != "" {
			t.Errorf("%v: wrote to stdout: %q", c.args, out)
		}
	}
}

func TestVerifyAgainstReference(t *testing.T) {
	for _, name := range []string{"rope_llama_fp16", "rope_kvcache", "t5_decoder"} {
		code, out, errOut := runCLI(t, "verify", corpusFile(name, "model.onnx"), "--against", corpusFile(name, "test_data_set_0"))
		if code != 0 || !strings.Contains(out, "reference outputs agree on 1 input set") {
			t.Errorf("%s: exit %d\n%s%s", name, code, out, errOut)
		}
	}
	// A tolerance below the float16 model's difference from PyTorch fails.
	code, _, errOut := runCLI(t, "verify", corpusFile("rope_llama_fp16", "model.onnx"), "--against", corpusFile("rope_llama_fp16", "test_data_set_0"), "--atol", "0", "--rtol", "0")
	if code != 1 || !strings.Contains(errOut, "not equal") {
		t.Errorf("zero tolerance: exit %d %s", code, errOut)
	}
}

// TestVerifyGivenInputsAndSweepFlags uses --inputs (a folder and an .npz
// file), --seq and --batch, and --bisect on a differing pair.
func TestVerifyGivenInputsAndSweepFlags(t *testing.T) {
	a, b := corpusFile("rope_kvcache", "model.onnx"), corpusFile("rope_kvcache", "ort_basic.onnx")
	code, js, errOut := runCLI(t, "verify", a, b, "--inputs", corpusFile("rope_kvcache", "test_data_set_0"), "--json")
	var r verify.Report
	if code != 0 || json.Unmarshal([]byte(js), &r) != nil || len(r.Sets) != 1 || r.Sets[0].Name != "test_data_set_0" {
		t.Fatalf("--inputs folder: exit %d %s\n%s", code, errOut, js)
	}
	// The same inputs as an .npz file.
	m, err := graph.Load(a)
	if err != nil {
		t.Fatal(err)
	}
	in, err := kernels.ReadInputs(corpusFile("rope_kvcache", "test_data_set_0"), m)
	if err != nil {
		t.Fatal(err)
	}
	npz := filepath.Join(t.TempDir(), "feeds.npz")
	writeNPZ(t, npz, in)
	code, js, errOut = runCLI(t, "verify", a, b, "--inputs", npz, "--json")
	r = verify.Report{}
	if code != 0 || json.Unmarshal([]byte(js), &r) != nil || len(r.Sets) != 1 || r.Sets[0].Name != "feeds.npz" || len(r.Sets[0].Outputs) != 5 {
		t.Fatalf("--inputs .npz: exit %d %s\n%s", code, errOut, js)
	}
	code, js, errOut = runCLI(t, "verify", a, b, "--seq", "1,5", "--batch", "1,3", "--json")
	r = verify.Report{}
	if code != 0 || json.Unmarshal([]byte(js), &r) != nil {
		t.Fatalf("--seq/--batch: exit %d %s", code, errOut)
	}
	shapes := map[[3]int]bool{}
	for _, s := range r.Sets {
		shapes[[3]int{s.Spec.Batch, s.Spec.Seq, s.Spec.Past}] = true
	}
	for _, want := range [][3]int{{1, 1, 0}, {3, 1, 0}, {1, 5, 0}, {3, 5, 0}, {1, 1, 7}, {3, 5, 7}} {
		if !shapes[want] {
			t.Errorf("no set of batch %d, seq %d, past %d: %v", want[0], want[1], want[2], shapes)
		}
	}
}

func TestVerifyBisectNamesTheNode(t *testing.T) {
	a := corpusFile("rope_neox", "model.onnx")
	var perturbed string
	b := saveEdited(t, "rope_neox", func(m *graph.Model) {
		for _, n := range m.Graph.Nodes() {
			if n.OpType != "Constant" {
				continue
			}
			c, _ := graph.ConstantNodeValue(n)
			if d := c.Dims(); len(d) == 4 && d[2] == 64 && d[3] == 8 {
				v, _ := c.Data()
				w := append([]float32(nil), v.([]float32)...)
				if w[0] != 1 { // the sin cache
					continue
				}
				w[50*8+2] += 1e-3
				nt, _ := graph.NewTensor(c.Name(), graph.Float, d, w)
				n.SetAttr(graph.TensorAttr("value", nt))
				perturbed = n.Name
				return
			}
		}
	})
	code, js, errOut := runCLI(t, "verify", a, b, "--bisect", "--json")
	var r verify.Report
	if code != 1 || json.Unmarshal([]byte(js), &r) != nil || r.Bisect == nil {
		t.Fatalf("exit %d %s\n%s", code, errOut, js)
	}
	if r.Bisect.NodeA != perturbed || r.Bisect.Set != "long" {
		t.Errorf("bisect names %q (%s) on set %s, want the perturbed Constant %q: %s", r.Bisect.NodeA, r.Bisect.OpA, r.Bisect.Set, perturbed, r.Bisect.Summary)
	}
	if r.Bisect.Shared < 100 {
		t.Errorf("only %d shared values compared", r.Bisect.Shared)
	}
	code, out, _ := runCLI(t, "verify", a, b, "--bisect")
	if code != 1 || !strings.Contains(out, "bisect: first divergence on set long") {
		t.Errorf("table: exit %d\n%s", code, out)
	}
}

func TestVerifyPrecision(t *testing.T) {
	code, js, errOut := runCLI(t, "verify", "--precision", corpusFile("rope_llama_fp16", "model.onnx"), "--json")
	var r verify.PrecisionReport
	if code != 0 || json.Unmarshal([]byte(js), &r) != nil {
		t.Fatalf("exit %d %s\n%s", code, errOut, js)
	}
	if r.DType != "float16" || len(r.Encodings) != 1 || len(r.Encodings[0].Frequencies) != 8 || r.Positions != 4096 {
		t.Fatalf("report %+v", r)
	}
	// A bound below float16's rounding fails.
	code, out, errOut := runCLI(t, "verify", "--precision", corpusFile("rope_llama_fp16", "model.onnx"), "--bound", "1e-5")
	if code != 1 || !strings.Contains(out, "OVER BOUND FROM") || !strings.Contains(errOut, "exceed 1e-05") {
		t.Fatalf("--bound 1e-5: exit %d\n%s%s", code, out, errOut)
	}
	// A model without cos/sin values is an input error.
	code, _, errOut = runCLI(t, "verify", "--precision", corpusFile("nope_causal", "model.onnx"))
	if code != 2 || !strings.Contains(errOut, "no cos/sin") {
		t.Fatalf("NoPE model: exit %d %s", code, errOut)
	}
}

func TestVerifyHelpDocumentsPolicy(t *testing.T) {
	code, out, _ := runCLI(t, "verify", "--help")
	for _, want := range []string{"float16           rtol 4e-3", "bfloat16", "ULP", "Exit codes", "--junit", "--runtime", "--precision", "--bisect", "--against", "--inputs"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	// The defaults printed are verify's.
	for _, c := range []struct {
		row string
		tol verify.Tolerance
	}{
		{"float32, float64  ", verify.DefaultFloat32},
		{"float16           ", verify.DefaultFloat16},
		{"bfloat16          ", verify.DefaultBFloat16},
	} {
		_, rest, _ := strings.Cut(out, "\n  "+c.row)
		line, _, _ := strings.Cut(rest, "\n")
		if f := strings.Fields(line); len(f) != 4 || f[1] != sci(c.tol.Rtol) || f[3] != sci(c.tol.Atol) {
			t.Errorf("verify --help: %q, want rtol %s atol %s", c.row+line, sci(c.tol.Rtol), sci(c.tol.Atol))
		}
	}
}

// TestVerifyProgressOnATerminal draws the progress line on a terminal
// once a run takes more than a second, and clears it at the end; nothing
// is drawn when stderr is not a terminal.
func TestVerifyProgressOnATerminal(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&IOStreams{ErrOut: &buf, ErrIsTerminal: true})
	p.update(verify.Progress{Done: 0, Total: 4, Step: "A go: token"})
	if buf.Len() != 0 {
		t.Fatalf("drawn before a second: %q", buf.String())
	}
	p.start = p.start.Add(-2 * time.Second)
	p.update(verify.Progress{Done: 2, Total: 4, Step: "B go: long"})
	p.done()
	if got := buf.String(); got != "\r\033[Kverify 3/4: B go: long\r\033[K" {
		t.Fatalf("progress %q", got)
	}
	buf.Reset()
	p = newProgress(&IOStreams{ErrOut: &buf})
	p.start = p.start.Add(-2 * time.Second)
	p.update(verify.Progress{Done: 2, Total: 4, Step: "B go: long"})
	p.done()
	if buf.Len() != 0 {
		t.Fatalf("drawn on a pipe: %q", buf.String())
	}
}

// TestVerifyRunWithBuffers calls the run function directly.
func TestVerifyRunWithBuffers(t *testing.T) {
	var out, errOut bytes.Buffer
	opts := &verifyOptions{IO: &IOStreams{Out: &out, ErrOut: &errOut}, A: corpusFile("alibi_mpt", "model.onnx"), B: corpusFile("alibi_mpt", "ort_basic.onnx"), Seed: 1, Runtime: "go"}
	if err := verifyRun(opts); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "longest sequence: 32") {
		t.Errorf("MPT's 32-key bias table not found:\n%s", out.String())
	}
}

// TestProgressTickingPanicComesBack: a panic on the goroutine that redraws
// the progress line (extend's ticking) ends the ticking, not the process;
// the command's own calls go on (the line's lock is released) and done
// returns the panic as an error wrapping kernels.ErrInternal, which exits 3.
func TestProgressTickingPanicComesBack(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&IOStreams{ErrOut: &buf, ErrIsTerminal: true})
	p.delay, p.every = 0, time.Millisecond
	ticked := make(chan struct{})
	p.tickHook = func() {
		close(ticked)
		panic("injected in the ticking goroutine")
	}
	p.ticking()
	<-ticked
	p.setPhase("still drawn") // deadlocks if the panic kept the lock
	err := p.done()
	if !errors.Is(err, kernels.ErrInternal) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("done: %v, want one line wrapping kernels.ErrInternal", err)
	}
	if !strings.Contains(err.Error(), "panic: injected in the ticking goroutine") || exitCode(err) != ExitInternal {
		t.Errorf("done: %q, exit %d; want the panic and exit 3", err, exitCode(err))
	}
	if err2 := p.done(); err2 == nil {
		t.Errorf("a second done forgot the panic")
	}
	q := newProgress(&IOStreams{ErrOut: &buf, ErrIsTerminal: true})
	q.every = time.Millisecond
	q.ticking()
	if err := q.done(); err != nil {
		t.Errorf("done without a panic: %v", err)
	}
}
