package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onnxpe/onnxpe/graph"
)

// TestMain runs the test binary as onnxpe itself when ONNXPE_TEST_MAIN is
// set, so that the interrupt tests can signal a real process.
func TestMain(m *testing.M) {
	if os.Getenv("ONNXPE_TEST_MAIN") == "1" {
		if ready := os.Getenv("ONNXPE_TEST_READY"); ready != "" {
			signalsReady = func() { _ = os.WriteFile(ready, nil, 0o600) }
		}
		os.Exit(Main())
	}
	os.Exit(m.Run())
}

// startOnnxpe starts onnxpe (this test binary as Main) with args; it
// returns once onnxpe handles SIGINT and SIGTERM.
func startOnnxpe(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("skipped: no SIGINT to send on windows")
	}
	cmd := exec.Command(os.Args[0], args...)
	ready := filepath.Join(t.TempDir(), "ready")
	cmd.Env = append(os.Environ(), "ONNXPE_TEST_MAIN=1", "ONNXPE_TEST_READY="+ready)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	waitHandled(t, ready)
	return cmd, &out, &errOut
}

// waitHandled waits until onnxpe, started by startOnnxpe, has installed
// its handler of SIGINT and SIGTERM (it writes the file ready names then):
// before that a signal ends it as Go's default does (exit -1), and a
// loaded machine (the race detector, other tests) can take longer than
// any fixed sleep to get there.
func waitHandled(t *testing.T, ready string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(ready); err == nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("onnxpe did not install its signal handler in 60 s")
}

// exitOf waits for cmd and returns its exit code (-1 when a signal ended
// it).
func exitOf(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatal(err)
	return 0
}

// TestInterruptDuringAWrite sends SIGINT to onnxpe convert while it writes
// a 64 MiB side file (as soon as its temporary file appears): onnxpe stops
// the write, removes the temporary files and exits 130 with one line;
// the output folder is left empty.
func TestInterruptDuringAWrite(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "big.onnx")
	m := graph.NewModel(8, "test", graph.Opset{Domain: "", Version: 17})
	g := m.Graph
	const n = 16 << 20 // float32 values: 64 MiB
	x := g.AddInput("x", graph.TensorType(graph.Float, graph.Dims(n)))
	ct, err := graph.NewTensor("c", graph.Float, []int64{n}, make([]float32, n))
	if err != nil {
		t.Fatal(err)
	}
	g.AddOutput(g.Op("Add", []*graph.Value{x, g.AddInitializer(ct)}, 1)[0])
	if err := m.Save(in, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd, stdout, stderr := startOnnxpe(t, "convert", in, "-o", filepath.Join(out, "x.onnx"), "--external-data")
	// Signal as soon as a file being written appears.
	deadline := time.Now().Add(30 * time.Second)
	seen := ""
	for seen == "" && time.Now().Before(deadline) {
		es, _ := os.ReadDir(out)
		for _, e := range es {
			if strings.Contains(e.Name(), ".tmp-") {
				seen = e.Name()
			}
		}
		if seen == "" {
			time.Sleep(200 * time.Microsecond)
		}
	}
	if seen == "" {
		t.Fatalf("no temporary file appeared in 30 s (stderr %q)", stderr)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatalf("signal after %s appeared: %v (the write was over: stderr %q)", seen, err, stderr)
	}
	code := exitOf(t, cmd)
	left := listDir(t, out)
	if code != ExitInterrupted || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "interrupted (SIGINT)") || stdout.Len() != 0 {
		t.Fatalf("signalled while %s was written: exit %d, stderr %q, stdout %q, want 130 and one line", seen, code, stderr, stdout)
	}
	switch {
	case strings.Contains(stderr.String(), "nothing written"):
		if len(left) != 0 {
			t.Fatalf("interrupted while %s was written: left %v", seen, left)
		}
	default:
		// The write was complete before the signal came: both files, no
		// temporary one.
		if len(left) != 2 {
			t.Fatalf("the write was complete (%q), but the folder holds %v", stderr, left)
		}
		t.Logf("the write was over before the signal (%q)", stderr)
	}
}

// TestInterruptDuringVerify sends SIGTERM to onnxpe verify --junit --json
// while it compares (a 4096-token sweep set): it exits 130 with one line,
// writes no report, and standard output holds the error object saying so.
func TestInterruptDuringVerify(t *testing.T) {
	model := corpusModel("rope_llama")
	out := t.TempDir()
	cmd, stdout, stderr := startOnnxpe(t, "verify", model, model, "--seq", "4096", "--junit", filepath.Join(out, "verify.xml"), "--json")
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal: %v (verify was over: stderr %q)", err, stderr)
	}
	code := exitOf(t, cmd)
	if code != ExitInterrupted || stderr.String() != "onnxpe: interrupted (SIGTERM); nothing written\n" {
		t.Fatalf("exit %d, stderr %q, stdout %q; want 130, one line and no report", code, stderr, stdout)
	}
	checkErrorJSON(t, compileSchema(t, "error.schema.json", ErrorSchema), []string{"verify"}, code, stdout.String(), stderr.String())
	if !strings.Contains(stdout.String(), `"kind": "interrupted"`) {
		t.Errorf("stdout %q: want the error object of an interrupt", stdout)
	}
	if left := listDir(t, out); len(left) != 0 {
		t.Fatalf("left %v", left)
	}
}
