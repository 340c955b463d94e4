package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
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

func TestBadInputExits2WithOneLine(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(gatherModel(t))
	if err != nil {
		t.Fatal(err)
	}
	trunc := filepath.Join(dir, "truncated.onnx")
	os.WriteFile(trunc, good[:len(good)/2], 0o644)
	random := filepath.Join(dir, "random.onnx")
	noise := make([]byte, 4096)
	for i := range noise {
		noise[i] = byte(i*7919 + i*i*31)
	}
	os.WriteFile(random, noise, 0o644)
	// testdata/escape.onnx: one tensor whose external data location is
	// ../../etc/passwd.
	passwd := filepath.Join(dir, "escape.onnx")
	esc, err := os.ReadFile(filepath.Join("testdata", "escape.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(passwd, esc, 0o644)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", trunc}, "truncated.onnx"},
		{[]string{"inspect", random}, "random.onnx"},
		{[]string{"inspect", passwd}, "leaves the model's folder"},
		{[]string{"inspect", filepath.Join(dir, "missing.onnx")}, "no such file"},
		{[]string{"convert", passwd, "-o", filepath.Join(dir, "out.onnx")}, "leaves the model's folder"},
		{[]string{"inspect"}, "accepts 1 arg"},
		{[]string{"inspect", "--nope", gatherModel(t)}, "unknown flag"},
		{[]string{"frobnicate"}, "unknown command"},
	} {
		code, out, errOut := runCLI(t, c.args...)
		if code != ExitBadInput {
			t.Errorf("%v: exit %d, want 2", c.args, code)
		}
		if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) || !strings.HasPrefix(errOut, "onnxpe: ") {
			t.Errorf("%v: stderr %q, want one line mentioning %q", c.args, errOut, c.want)
		}
		if out != "" {
			t.Errorf("%v: wrote to stdout: %q", c.args, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out.onnx")); err == nil {
		t.Error("a failed convert left an output file")
	}
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
	var v map[string]string
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
	}
	code, out, _ = runCLI(t, "--help")
	if code != 0 || !strings.Contains(out, "Exit codes") {
		t.Fatalf("--help: %d, no exit codes:\n%s", code, out)
	}
}
