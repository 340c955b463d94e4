package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/internal/conformance"
	"github.com/onnxpe/onnxpe/testmodels"
)

func gatherModel(t *testing.T) string {
	return filepath.Join(conformance.Case(t, "onnx-node", "test_gather_0"), "model.onnx")
}

// runCLI runs the command line with buffers and returns exit code, stdout
// and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(&IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, args)
	return code, out.String(), errOut.String()
}

func TestInspectJSON(t *testing.T) {
	code, out, errOut := runCLI(t, "inspect", gatherModel(t), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r InspectReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, out)
	}
	if r.Nodes != 1 || r.NodesByOp[0].OpType != "Gather" || len(r.Inputs) != 2 || r.Opsets[0].Version != 13 {
		t.Fatalf("unexpected report: %+v", r)
	}
	if r.Inputs[0].Shape[0] != float64(5) {
		t.Fatalf("shape %v", r.Inputs[0].Shape)
	}
}

func TestInspectHuman(t *testing.T) {
	code, out, _ := runCLI(t, "inspect", gatherModel(t))
	if code != 0 || !strings.Contains(out, "Gather") || !strings.Contains(out, "[5, 4, 3, 2]") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

// badInputs are the files of TestBadInputExits2WithOneLine: models that
// cannot be read, a good model with its test data, and folders to write to.
type badInputs struct {
	dir                                    string // the inputs' folder
	trunc, random, escape, folder, missing string // bad models
	good, data, npz                        string // a good model, its test data
	out, noDir, unwritable                 string // folders to write into
}

func newBadInputs(t *testing.T) *badInputs {
	dir := t.TempDir()
	b := &badInputs{dir: dir, out: t.TempDir()}
	good, err := os.ReadFile(gatherModel(t))
	if err != nil {
		t.Fatal(err)
	}
	b.trunc = filepath.Join(dir, "truncated.onnx")
	os.WriteFile(b.trunc, good[:len(good)/2], 0o644)
	b.random = filepath.Join(dir, "random.onnx")
	noise := make([]byte, 4096)
	for i := range noise {
		noise[i] = byte(i*7919 + i*i*31)
	}
	os.WriteFile(b.random, noise, 0o644)
	// testdata/escape.onnx: one tensor whose external data location is
	// ../../etc/passwd.
	b.escape = filepath.Join(dir, "escape.onnx")
	esc, err := os.ReadFile(filepath.Join("testdata", "escape.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(b.escape, esc, 0o644)
	b.folder = filepath.Join(dir, "folder.onnx")
	os.Mkdir(b.folder, 0o755)
	b.missing = filepath.Join(dir, "missing.onnx")
	// A corpus model with its test data.
	b.good = filepath.Join(dir, "llama.onnx")
	llama, err := os.ReadFile(corpusModel("rope_llama"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(b.good, llama, 0o644)
	b.data = filepath.Join(dir, "test_data_set_0")
	os.Mkdir(b.data, 0o755)
	src := corpusFile("rope_llama", "test_data_set_0")
	es, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		d, _ := os.ReadFile(filepath.Join(src, e.Name()))
		os.WriteFile(filepath.Join(b.data, e.Name()), d, 0o644)
	}
	b.npz = filepath.Join(dir, "feeds.npz")
	os.WriteFile(b.npz, []byte("PK not a zip"), 0o644)
	b.noDir = filepath.Join(b.out, "no", "such")
	// A folder nobody can write in: permissions for others, /proc for root
	// (permissions do not stop root).
	switch {
	case os.Geteuid() != 0:
		b.unwritable = filepath.Join(t.TempDir(), "ro")
		os.Mkdir(b.unwritable, 0o555)
	case runtime.GOOS == "linux":
		b.unwritable = "/proc"
	}
	return b
}

// snapshot lists every file below dir with its size and modification
// time (and every folder, but not its time: a folder's changes when a
// file is made and removed in it).
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			files[p] = "folder"
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files[p] = fmt.Sprint(fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	return files
}

// TestBadInputExits2WithOneLine runs every command on inputs it cannot
// read, outputs it cannot or must not write and bad flag values: each
// exits 2 with one line on stderr naming the problem, prints nothing on
// stdout (the error object when it asked for JSON), writes nothing (no
// output, no temporary file) and leaves its inputs as they were.
func TestBadInputExits2WithOneLine(t *testing.T) {
	b := newBadInputs(t)
	cases := badInputCases(t, b)
	errSchema := compileSchema(t, "error.schema.json", ErrorSchema)
	for _, c := range cases {
		before := snapshot(t, b.dir)
		code, out, errOut := runCLI(t, c.args...)
		if code != ExitBadInput {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", c.args, code, errOut)
		}
		if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) || !strings.HasPrefix(errOut, "onnxpe: ") {
			t.Errorf("%v: stderr %q, want one line mentioning %q", c.args, errOut, c.want)
		}
		switch {
		case jsonInArgs(c.args):
			// Asked for JSON: the error object (TestBadInputWithJSON).
			checkErrorJSON(t, errSchema, c.args, code, out, errOut)
		case out != "":
			t.Errorf("%v: wrote to stdout: %q", c.args, out)
		}
		if got := listDir(t, b.out); len(got) != 0 {
			t.Errorf("%v: left %v in the output folder", c.args, got)
			for _, n := range got {
				os.RemoveAll(filepath.Join(b.out, n))
			}
		}
		if after := snapshot(t, b.dir); !maps.Equal(before, after) {
			t.Errorf("%v: changed the inputs' folder:\n%v\n%v", c.args, before, after)
		}
	}
	t.Logf("%d bad inputs", len(cases))
}

// badCase is a command line that must exit 2 with one line on stderr
// mentioning want.
type badCase struct {
	args []string
	want string
}

// badInputCases are the command lines of TestBadInputExits2WithOneLine:
// every command on inputs it cannot read, outputs it cannot or must not
// write, and bad flag values.
func badInputCases(t *testing.T, b *badInputs) []badCase {
	var cases []badCase
	add := func(want string, args ...string) { cases = append(cases, badCase{args, want}) }
	o := func(name string) string { return filepath.Join(b.out, name) }

	// Models that cannot be read, given to every command that reads one.
	for _, m := range []struct{ path, want string }{
		{b.missing, "no such file"},
		{b.folder, "is a directory"},
		{b.trunc, "truncated.onnx"},
		{b.random, "random.onnx"},
		{b.escape, "leaves the model's folder"},
	} {
		if m.path == b.folder {
			// audit takes folders: this one holds no model.
			add("holds no .onnx file", "audit", m.path)
		} else {
			add(m.want, "audit", m.path)
		}
		add(m.want, "inspect", m.path)
		add(m.want, "convert", m.path, "-o", o("x.onnx"))
		add(m.want, "rewrite", m.path, "-o", o("x.onnx"))
		add(m.want, "extend", m.path, "-o", o("x.onnx"), "--to", "128", "--method", "linear", "--original-max-positions", "32")
		add(m.want, "codegen", m.path, "--lang", "go", "--package", "pe", "-o", o("pe"))
		add(m.want, "run", m.path, "--inputs", b.data, "--outputs", o("outs"))
		add(m.want, "verify", m.path, b.good)
		add(m.want, "verify", b.good, m.path)
		add(m.want, "verify", "--precision", m.path)
		add(m.want, "diff", m.path, b.good)
		add(m.want, "diff", b.good, m.path)
	}
	// Outputs that cannot be written: no folder, a folder instead of a
	// file (and a file instead of a folder), a folder that takes no files,
	// and the input itself.
	writers := []struct {
		folder bool
		args   func(out string) []string
	}{
		{false, func(out string) []string { return []string{"audit", b.good, "-o", out} }},
		{false, func(out string) []string { return []string{"audit", b.good, "--sarif", out} }},
		{false, func(out string) []string { return []string{"audit", b.good, "--junit", out} }},
		{false, func(out string) []string { return []string{"convert", b.good, "-o", out} }},
		{false, func(out string) []string { return []string{"rewrite", b.good, "-o", out} }},
		{false, func(out string) []string {
			return []string{"extend", b.good, "-o", out, "--to", "128", "--method", "linear", "--original-max-positions", "32"}
		}},
		{false, func(out string) []string { return []string{"verify", b.good, b.good, "--junit", out} }},
		{true, func(out string) []string {
			return []string{"codegen", b.good, "--lang", "go", "--package", "pe", "-o", out}
		}},
		{true, func(out string) []string { return []string{"run", b.good, "--inputs", b.data, "--outputs", out} }},
	}
	for _, w := range writers {
		add("does not exist", w.args(filepath.Join(b.noDir, "x"))...)
		if w.folder {
			add("is a file, not a folder", w.args(b.good)...)
		} else {
			add("is a folder, not a file", w.args(b.out)...)
			add("llama.onnx", w.args(b.good)...)
		}
		if b.unwritable != "" {
			add("cannot write in the folder", w.args(filepath.Join(b.unwritable, "x"))...)
		} else {
			t.Logf("skipped: %v into a folder that takes no files (root on %s: no such folder)", w.args("x")[0], runtime.GOOS)
		}
	}
	// Files written beside the output that would replace an input.
	add("the model file itself", "convert", b.good, "-o", o("x.onnx"), "--external-data", "--location", "x.onnx")
	add("llama.onnx", "convert", b.good, "-o", filepath.Join(b.dir, "copy.onnx"), "--external-data", "--location", "llama.onnx")
	add("--in-place", "convert", b.good, "-o", b.good)
	add("input_0.pb", "verify", b.good, "--against", b.data, "--junit", filepath.Join(b.data, "input_0.pb"))
	add("output_0.pb", "verify", b.good, b.good, "--inputs", b.data, "--junit", filepath.Join(b.data, "output_0.pb"))

	// Bad flag values.
	g, d := b.good, b.data
	ext := []string{"extend", g, "-o", o("x.onnx"), "--to", "128", "--method", "linear", "--original-max-positions", "32"}
	cg := []string{"codegen", g, "--lang", "go", "--package", "pe", "-o", o("pe")}
	cases = append(cases, []badCase{
		{[]string{"audit", g, "--format", "pdf"}, "--format"},
		{[]string{"audit", g, "--format", "markdown", "--json"}, "--json"},
		{[]string{"audit", g, "--require", "rotary"}, "rotary"},
		{[]string{"audit", g, "--forbid", "alibi,magic"}, "magic"},
		{[]string{"audit", g, "--max-positions-at-least", "-1"}, "--max-positions-at-least"},
		{[]string{"audit", g, "--jobs", "-2"}, "--jobs"},
		{[]string{"audit", g, "-o", o("a.out"), "--sarif", o("a.out")}, "give each output its own file"},
		{[]string{"audit", g, "--format", "json", "--summary"}, "--summary"},
		{[]string{"audit", filepath.Join(b.dir, "*.nomatch")}, "matches no file"},
		{[]string{"audit", g, filepath.Join(b.dir, "[")}, "syntax error in pattern"},
		{[]string{"audit", g, g, "--name", "x"}, "--name"},
		{[]string{"convert", g, "-o", o("x.onnx"), "--threshold", "-1"}, "--threshold"},
		{[]string{"convert", g, "-o", o("x.onnx"), "--external-data", "--inline"}, "--inline"},
		{[]string{"convert", g, "-o", o("x.onnx"), "--external-data", "--location", "../x.data"}, "../x.data"},
		{[]string{"convert", g}, "-o OUT"},
		{[]string{"rewrite", g}, "-o OUT"},
		{[]string{"rewrite", g, "-o", o("x.onnx"), "--max-positions", "-4"}, "--max-positions"},
		{[]string{"rewrite", g, "-o", o("x.onnx"), "--max-positions", "many"}, "--max-positions"},
		{[]string{"rewrite", g, "-o", o("x.onnx"), "--rope-op", "cuda"}, "cuda"},
		{[]string{"rewrite", g, "-o", o("x.onnx"), "--passes", "rope,magic"}, "magic"},
		{[]string{"rewrite", g, "-o", o("x.onnx"), "--alibi", "bake"}, "bake"},
		{[]string{"rewrite", g, "-o", o("x.onnx"), "--t5-op", "onnx"}, "--t5-op"},
		{[]string{"rewrite", g, "-o", o("x.onnx"), "--threads", "-1"}, "--threads"},
		{[]string{"rewrite", g, "-o", o("x.onnx"), "--unfuse", "--passes", "rope"}, "--unfuse"},
		{[]string{"extend", g, "-o", o("x.onnx")}, "--to N"},
		{[]string{"extend", g, "-o", o("x.onnx"), "--to", "-128"}, "--to N"},
		{append(ext[:len(ext):len(ext)], "--method", "magic"), "magic"},
		{append(ext[:len(ext):len(ext)], "--original-max-positions", "-32"), "--original-max-positions"},
		{append(ext[:len(ext):len(ext)], "--factor", "-2"), "--factor"},
		{append(ext[:len(ext):len(ext)], "--replace-scaling", "merge"), "--replace-scaling"},
		{append(ext[:len(ext):len(ext)], "--threads", "-1"), "--threads"},
		{[]string{"extend", g, "-o", o("x.onnx"), "--to", "128", "--method", "yarn", "--original-max-positions", "32", "--beta-fast", "-1"}, "positive"},
		{[]string{"codegen", g, "--package", "pe", "-o", o("pe")}, "--lang"},
		{[]string{"codegen", g, "--lang", "rust", "--package", "pe", "-o", o("pe")}, "rust"},
		{[]string{"codegen", g, "--lang", "go", "-o", o("pe")}, "--package"},
		{[]string{"codegen", g, "--lang", "go", "--package", "my-pe", "-o", o("pe")}, "my-pe"},
		{[]string{"codegen", g, "--lang", "go", "--package", "Pe", "-o", o("pe")}, "Pe"},
		{[]string{"codegen", g, "--lang", "go", "--package", "func", "-o", o("pe")}, "func"},
		{[]string{"codegen", g, "--lang", "go", "--package", "main", "-o", o("pe")}, "main"},
		{[]string{"codegen", g, "--lang", "c", "--package", "9pe", "-o", o("pe")}, "9pe"},
		{[]string{"codegen", g, "--lang", "go", "--package", "pe"}, "-o DIR"},
		{append(cg[:len(cg):len(cg)], "--module", "example.com/my pe"), "example.com/my pe"},
		{append(cg[:len(cg):len(cg)], "--module", "example.com//pe"), "example.com//pe"},
		{append(cg[:len(cg):len(cg)], "--module", "../pe"), "../pe"},
		{[]string{"codegen", g, "--lang", "c", "--package", "pe", "-o", o("pe"), "--module", "x"}, "--module"},
		{append(cg[:len(cg):len(cg)], "--max-positions", "-1"), "--max-positions"},
		{[]string{"run", g}, "--inputs"},
		{[]string{"run", g, "--inputs", filepath.Join(b.dir, "none")}, "none"},
		{[]string{"run", g, "--inputs", b.npz}, "feeds.npz"},
		{[]string{"run", g, "--inputs", d, "--accumulate", "float16"}, "--accumulate"},
		{[]string{"verify", g}, "give a model B"},
		{[]string{"verify"}, "give two models"},
		{[]string{"verify", g, g, g}, "accepts at most 2 arg"},
		{[]string{"verify", g, g, "--seq", "0"}, "--seq"},
		{[]string{"verify", g, g, "--seq", "-7"}, "--seq"},
		{[]string{"verify", g, g, "--seq", "1,,7"}, "--seq"},
		{[]string{"verify", g, g, "--seq", "1,seven"}, "--seq"},
		{[]string{"verify", g, g, "--batch", "0"}, "--batch"},
		{[]string{"verify", g, g, "--rtol", "-1e-5"}, "--rtol"},
		{[]string{"verify", g, g, "--rtol", "inf"}, "--rtol"},
		{[]string{"verify", g, g, "--atol", "nan"}, "--atol"},
		{[]string{"verify", g, g, "--runtime", "cuda"}, "--runtime"},
		{[]string{"verify", g, g, "--max-positions", "-4"}, "--max-positions"},
		{[]string{"verify", g, g, "--threads", "-4"}, "--threads"},
		{[]string{"verify", g, g, "--against", d}, "not both"},
		{[]string{"verify", g, "--against", d, "--seq", "7"}, "--seq"},
		{[]string{"verify", g, g, "--inputs", d, "--batch", "2"}, "--batch"},
		{[]string{"verify", g, g, "--as", "float16"}, "--precision"},
		{[]string{"verify", "--precision", g, "--as", "int8"}, "--as"},
		{[]string{"verify", "--precision", g, "--positions", "-3"}, "--positions"},
		{[]string{"verify", "--precision", g, "--bound", "nan"}, "--bound"},
		{[]string{"verify", "--precision", g, "--bound", "inf"}, "--bound"},
		{[]string{"verify", "--precision", g, g}, "takes no other model"},
		{[]string{"inspect", g, "--json=maybe"}, "--json"},
		{[]string{"version", "1.0"}, "unknown command"},
		{[]string{"completion", "cmd.exe"}, "cmd.exe"},
		// Usage.
		{[]string{"inspect"}, "accepts 1 arg"},
		{[]string{"inspect", "--nope", gatherModel(t)}, "unknown flag"},
		{[]string{"frobnicate"}, "unknown command"},
	}...)
	return cases
}

func TestConvertRoundTripAndStorage(t *testing.T) {
	dir := t.TempDir()
	// A corpus model: it has weights to move out and back.
	src, err := os.ReadFile(filepath.Join(testmodels.Dir(), "models", "rope_llama", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "in.onnx")
	os.WriteFile(in, src, 0o644)
	out := filepath.Join(dir, "out.onnx")
	if code, _, e := runCLI(t, "convert", in, "-o", out); code != 0 {
		t.Fatalf("convert: %d %s", code, e)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, src) {
		t.Fatal("convert without options changed the bytes")
	}
	if code, _, e := runCLI(t, "convert", in, "-o", in); code != 2 || !strings.Contains(e, "--in-place") {
		t.Fatalf("overwriting the input without --in-place: exit %d %q", code, e)
	}
	if code, _, e := runCLI(t, "convert", in, "--in-place"); code != 0 {
		t.Fatalf("--in-place: %d %s", code, e)
	}
	if code, _, e := runCLI(t, "convert", in, "-o", out, "--external-data", "--inline"); code != 2 {
		t.Fatalf("--external-data with --inline: exit %d %s", code, e)
	}
	ext := filepath.Join(dir, "ext.onnx")
	code, js, e := runCLI(t, "convert", in, "-o", ext, "--external-data", "--threshold", "0", "--json")
	var cr ConvertReport
	if code != 0 || json.Unmarshal([]byte(js), &cr) != nil || len(cr.ExternalFiles) != 1 || cr.ExternalFiles[0] != "ext.onnx.data" || cr.ExternalBytes < 100_000 {
		t.Fatalf("--external-data --json: %d %q %s", code, js, e)
	}
	code, js, _ = runCLI(t, "inspect", ext, "--json")
	var r InspectReport
	json.Unmarshal([]byte(js), &r)
	if code != 0 {
		t.Fatalf("inspect external: %d", code)
	}
	back := filepath.Join(dir, "back.onnx")
	if code, _, e := runCLI(t, "convert", ext, "-o", back, "--inline"); code != 0 {
		t.Fatalf("--inline: %d %s", code, e)
	}
	if got, _ := os.ReadFile(back); !bytes.Equal(got, src) {
		t.Fatal("external then inline did not restore the original bytes")
	}
}

func TestVersionAndHelp(t *testing.T) {
	code, out, _ := runCLI(t, "version", "--json")
	var v map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v["go"] == "" {
		t.Fatalf("version --json: %d %q", code, out)
	}
	for _, cmd := range NewRootCmd(&IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}).Commands() {
		if cmd.Name() == "help" || cmd.Name() == "completion" {
			continue
		}
		if cmd.Example == "" {
			t.Errorf("command %s has no example", cmd.Name())
		}
		for _, want := range []string{"Exit codes:", "\n  0  ", "\n  1  ", "\n  2  ", "\n  3  ", "\n  130  "} {
			if !strings.Contains(cmd.Long, want) {
				t.Errorf("onnxpe %s --help does not state the exit code %q", cmd.Name(), strings.TrimSpace(want))
			}
		}
	}
	code, out, _ = runCLI(t, "--help")
	if code != 0 || !strings.Contains(out, "Exit codes") {
		t.Fatalf("--help: %d, no exit codes:\n%s", code, out)
	}
}
