package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBuildInACheckoutPrintsTheCommit builds onnxpe as a user does, with
// go build in a git checkout (a fresh clone of this repository's HEAD:
// Go records no VCS information in a git worktree, whose .git is a file,
// nor under this machine's GOFLAGS=-buildvcs=false, which the build
// overrides with Go's default -buildvcs=auto), and checks that onnxpe
// --version and onnxpe version --json name the commit, modified only
// once a file has changed.
func TestBuildInACheckoutPrintsTheCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds onnxpe twice (-short)")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git on PATH: cannot make a checkout")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	run := func(dir, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	head, err := exec.Command(git, "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("%s is not a git checkout (%v): no commit to record", root, err)
	}
	clone := filepath.Join(t.TempDir(), "onnxpe")
	run(root, git, "clone", "--quiet", "--shared", "--no-checkout", root, clone)
	run(clone, git, "-c", "advice.detachedHead=false", "checkout", "--quiet", strings.TrimSpace(string(head)))
	// The code under test is the working tree's: its changes (and new
	// files) are committed in the clone, whose HEAD is then the commit to
	// print.
	changed := strings.Fields(run(root, git, "diff", "--name-only", "HEAD") + "\n" + run(root, git, "ls-files", "--others", "--exclude-standard"))
	for _, f := range changed {
		b, err := os.ReadFile(filepath.Join(root, f))
		dst := filepath.Join(clone, f)
		switch {
		case os.IsNotExist(err):
			os.Remove(dst)
		case err != nil:
			t.Fatal(err)
		default:
			os.MkdirAll(filepath.Dir(dst), 0o755)
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(changed) > 0 {
		run(clone, git, "add", "--all")
		run(clone, git, "-c", "user.name=onnxpe test", "-c", "user.email=test@onnxpe.invalid", "commit", "--quiet", "--no-verify", "-m", "the working tree under test")
	}
	rev := run(clone, git, "rev-parse", "HEAD")
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "onnxpe")
	build := func() (flag string, v map[string]any) {
		t.Helper()
		run(clone, goBin, "build", "-buildvcs=auto", "-o", bin, "./cmd/onnxpe")
		flag = run(clone, bin, "--version")
		if err := json.Unmarshal([]byte(run(clone, bin, "version", "--json")), &v); err != nil {
			t.Fatal(err)
		}
		return flag, v
	}
	flag, v := build()
	if !strings.Contains(flag, "commit "+rev+" ") || strings.Contains(flag, "modified") {
		t.Errorf("onnxpe --version in a clean checkout of %s: %q", rev, flag)
	}
	if v["commit"] != rev || v["modified"] != false || !strings.Contains(v["version"].(string), rev[:12]) {
		t.Errorf("onnxpe version --json in a clean checkout of %s: %v", rev, v)
	}
	readme := filepath.Join(clone, "README.md")
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(readme, append(b, "\nchanged\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	flag, v = build()
	if !strings.Contains(flag, "commit "+rev+" (modified") {
		t.Errorf("onnxpe --version in a modified checkout: %q", flag)
	}
	if v["commit"] != rev || v["modified"] != true || !strings.HasSuffix(v["version"].(string), "+dirty") {
		t.Errorf("onnxpe version --json in a modified checkout: %v", v)
	}
}
