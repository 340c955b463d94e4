package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onnxpe/onnxpe/graph"
)

// externalModel saves the corpus model name into dir/model.onnx with its
// weights in dir/weights.bin, and returns the model's path.
func externalModel(t *testing.T, name, dir string) string {
	t.Helper()
	m, err := graph.Load(corpusModel(name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "model.onnx")
	if err := m.Save(p, graph.SaveOptions{External: graph.ExternalizeLarge, Location: "weights.bin"}); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// oneLineExit2 fails unless a command exited 2 with one line on stderr
// holding every want.
func oneLineExit2(t *testing.T, args []string, code int, errOut string, want ...string) {
	t.Helper()
	if code != ExitBadInput || strings.Count(errOut, "\n") != 1 {
		t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line", args, code, errOut)
		return
	}
	for _, w := range want {
		if !strings.Contains(errOut, w) {
			t.Errorf("%v: stderr %q does not say %q", args, errOut, w)
		}
	}
}

// A side file (external data) never replaces a file that is not the
// output's own previous side file: two models whose weights are both
// called weights.bin, converted into one folder (B2), or an unrelated
// weights.bin there; --overwrite-side-files says to replace it, and the
// output's own side file is replaced without it.
func TestSideFileReplacesOnlyItsOwn(t *testing.T) {
	root := t.TempDir()
	a := externalModel(t, "rope_llama", filepath.Join(root, "A"))
	b := externalModel(t, "learned_gpt2", filepath.Join(root, "B"))
	dep := filepath.Join(root, "dep")
	os.Mkdir(dep, 0o755)
	weights := filepath.Join(dep, "weights.bin")
	args := []string{"convert", a, "-o", filepath.Join(dep, "a.onnx")}
	if code, _, e := runCLI(t, args...); code != 0 {
		t.Fatalf("%v: %d %s", args, code, e)
	}
	aWeights := mustRead(t, weights)
	// The same output again: its own side file, replaced.
	if code, _, e := runCLI(t, args...); code != 0 {
		t.Fatalf("%v again: %d %s", args, code, e)
	}
	bOut := filepath.Join(dep, "b.onnx")
	for _, args := range [][]string{
		{"convert", b, "-o", bOut},
		// rewrite with nothing to rewrite saves the model as it is,
		// copying its side file.
		{"rewrite", b, "-o", bOut, "--passes", "alibi"},
	} {
		code, _, e := runCLI(t, args...)
		oneLineExit2(t, args, code, e, weights, "--overwrite-side-files", "b.onnx")
		if !bytes.Equal(mustRead(t, weights), aWeights) {
			t.Fatalf("%v replaced a.onnx's weights", args)
		}
		if _, err := os.Stat(bOut); err == nil {
			t.Fatalf("%v wrote %s", args, bOut)
		}
	}
	// An unrelated file of that name.
	other := filepath.Join(root, "other")
	os.Mkdir(other, 0o755)
	notes := filepath.Join(other, "weights.bin")
	os.WriteFile(notes, []byte("my notes"), 0o644)
	args = []string{"convert", a, "-o", filepath.Join(other, "a.onnx")}
	code, _, e := runCLI(t, args...)
	oneLineExit2(t, args, code, e, notes)
	if string(mustRead(t, notes)) != "my notes" {
		t.Fatal("the unrelated weights.bin was replaced")
	}
	// --external-data's side file, likewise.
	args = []string{"convert", a, "-o", filepath.Join(other, "w.onnx"), "--external-data", "--location", "weights.bin"}
	code, _, e = runCLI(t, args...)
	oneLineExit2(t, args, code, e, notes)
	// Said explicitly: replaced, and the model reads its own weights.
	args = []string{"convert", b, "-o", bOut, "--" + overwriteSideFilesFlag}
	if code, _, e := runCLI(t, args...); code != 0 {
		t.Fatalf("%v: %d %s", args, code, e)
	}
	if bytes.Equal(mustRead(t, weights), aWeights) {
		t.Fatal("--overwrite-side-files did not replace weights.bin")
	}
}

// `run --outputs` never replaces the reference outputs of a test-data
// folder (B3), nor a file the command reads; its own outputs of an earlier
// run it replaces.
func TestRunOutputsNeverReplaceReferences(t *testing.T) {
	b := newBadInputs(t)
	ref := filepath.Join(b.data, "output_0.pb")
	before := mustRead(t, ref)
	args := []string{"run", b.good, "--inputs", b.data, "--outputs", b.data}
	code, _, e := runCLI(t, args...)
	oneLineExit2(t, args, code, e, "test-data folder", "reference outputs")
	if !bytes.Equal(mustRead(t, ref), before) {
		t.Fatal("run --outputs replaced the reference output_0.pb")
	}
	out := filepath.Join(b.out, "outs")
	for range 2 {
		if code, _, e := runCLI(t, "run", b.good, "--inputs", b.data, "--outputs", out); code != 0 {
			t.Fatalf("run --outputs %s: %d %s", out, code, e)
		}
	}
	if fi, err := os.Stat(filepath.Join(out, "output_0.pb")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("run wrote no output_0.pb: %v", err)
	}
}

// The temporary files a killed run left beside an output (a SIGKILL
// during a write) are removed when the same output is written next: a
// model, its side file, a report, run's outputs folder.
func TestStaleTempFilesAreRemoved(t *testing.T) {
	b := newBadInputs(t)
	old := time.Now().Add(-time.Hour)
	stale := func(name string, dir bool) string {
		p := filepath.Join(b.out, name)
		if dir {
			os.MkdirAll(filepath.Join(p, "x"), 0o755)
		} else {
			os.WriteFile(p, make([]byte, 1<<16), 0o600)
		}
		os.Chtimes(p, old, old)
		return p
	}
	leftovers := []string{
		stale(".m.onnx.tmp-1234", false),
		stale(".m.onnx.data.tmp-99", false),
		stale(".r.json.tmp-5", false),
		stale(".outputs.tmp-7", true),
	}
	for _, args := range [][]string{
		{"convert", b.good, "-o", filepath.Join(b.out, "m.onnx"), "--external-data"},
		{"audit", b.good, "--json", "-o", filepath.Join(b.out, "r.json")},
		{"run", b.good, "--inputs", b.data, "--outputs", b.out},
	} {
		if code, _, e := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: %d %s", args, code, e)
		}
	}
	for _, p := range leftovers {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there", filepath.Base(p))
		}
	}
}
