package atomicfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary play a writer that is killed while it
// writes (ATOMICFILE_HOLD=path: create path's temporary file, write to it,
// print its name and wait to be killed).
func TestMain(m *testing.M) {
	if p := os.Getenv("ATOMICFILE_HOLD"); p != "" {
		f, err := Create(p)
		if err != nil {
			os.Exit(2)
		}
		f.Write(make([]byte, 1<<16))
		os.Stdout.WriteString(f.Name() + "\n")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holder starts a process that holds a temporary file of path; it
// returns the process and the temporary file's name.
func holder(t *testing.T, path string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ATOMICFILE_HOLD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, _ := out.Read(buf)
	name := strings.TrimSpace(string(buf[:n]))
	if name == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the writer printed no file name")
	}
	return cmd, name
}

// A killed writer's temporary file is removed by the next writer of the
// same path; a living writer's is not.
func TestStaleTempOfKilledWriterIsRemoved(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "model.onnx")
	live, liveTmp := holder(t, out)
	defer func() { live.Process.Kill(); live.Wait() }()
	killed, killedTmp := holder(t, out)
	killed.Process.Kill()
	killed.Wait()
	if err := WriteFile(out, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(killedTmp); !os.IsNotExist(err) {
		t.Errorf("the killed writer's %s is still there (%v)", filepath.Base(killedTmp), err)
	}
	if _, err := os.Stat(liveTmp); err != nil {
		t.Errorf("the living writer's %s was removed: %v", filepath.Base(liveTmp), err)
	}
	if b, _ := os.ReadFile(out); string(b) != "new" {
		t.Errorf("out holds %q", b)
	}
	// Temporary files of other outputs are left alone.
	other := filepath.Join(dir, ".other.onnx.tmp-123")
	os.WriteFile(other, []byte("x"), 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(other, old, old)
	RemoveStale(out)
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another output's temporary file was removed: %v", err)
	}
}

// Stale temporary folders (a killed run's outputs) go too; names with
// glob characters are matched literally.
func TestStaleTempDirAndGlobNames(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "a[1]?.onnx")
	stale := filepath.Join(dir, ".a[1]?.onnx.tmp-42")
	if err := os.MkdirAll(filepath.Join(stale, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(stale, old, old)
	near := filepath.Join(dir, ".a1x.onnx.tmp-42") // what an unescaped [1]? would match
	os.WriteFile(near, []byte("x"), 0o644)
	if n := RemoveStale(out); n != 1 {
		t.Errorf("removed %d, want 1", n)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale folder still there: %v", err)
	}
	if _, err := os.Stat(near); err != nil {
		t.Errorf("%s was removed: %v", near, err)
	}
	d, err := TempDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if n := RemoveStale(out); n != 0 {
		t.Errorf("a held folder was removed")
	}
	d.Release()
	if _, err := os.Stat(d.Path); !os.IsNotExist(err) {
		t.Errorf("Release left %s", d.Path)
	}
}

// Abort leaves nothing; Commit leaves the file readable by others.
func TestCommitAndAbort(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	f, err := Create(out)
	if err != nil {
		t.Fatal(err)
	}
	f.Abort()
	if err := WriteFile(out, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(out)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("%v %v", fi, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left %v", entries)
	}
}
