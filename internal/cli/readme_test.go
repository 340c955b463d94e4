package cli

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/testmodels"
)

// readmeCommand is a command the README shows, with the output it shows.
type readmeCommand struct {
	line int
	args []string
	want []string
}

// readmeCommands reads the onnxpe commands of the README's indented
// blocks: "$ onnxpe ..." followed by its output, or a bare "onnxpe ..."
// (continued by a trailing backslash).
func readmeCommands(t *testing.T, path string) (cmds []readmeCommand, lines []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "    $ onnxpe ") && !strings.HasPrefix(l, "    onnxpe ") {
			continue
		}
		c := readmeCommand{line: i + 1}
		text := strings.TrimPrefix(strings.TrimSpace(l), "$ ")
		for strings.HasSuffix(text, `\`) && i+1 < len(lines) {
			i++
			text = strings.TrimSuffix(text, `\`) + " " + strings.TrimSpace(lines[i])
		}
		c.args = strings.Fields(text)[1:]
		for i, a := range c.args {
			// A quoted pattern: the shell gives it to onnxpe as it is.
			if len(a) > 2 && strings.HasPrefix(a, "'") && strings.HasSuffix(a, "'") {
				c.args[i] = strings.Trim(a, "'")
			}
		}
		if strings.HasPrefix(l, "    $ ") {
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "    ") && !strings.HasPrefix(lines[i+1], "    $ ") {
				i++
				c.want = append(c.want, lines[i][4:])
			}
		}
		cmds = append(cmds, c)
	}
	return cmds, lines
}

// TestREADMECommandsRun walks the README as a new user in a clone would:
// the set-up commands are there (make demo, make test; go install of this
// module), and every onnxpe command it shows runs from the repository's
// root as shown and prints the output shown (lines the README shortens
// with "..." or "…" are not compared).
func TestREADMECommandsRun(t *testing.T) {
	root := filepath.Dir(testmodels.Dir())
	readme := filepath.Join(root, "README.md")
	cmds, lines := readmeCommands(t, readme)
	text := strings.Join(lines, "\n")
	for _, want := range []string{"\n    make demo ", "\n    make test "} {
		if !strings.Contains(text, want) {
			t.Errorf("the README's set-up lacks %q", strings.TrimSpace(want))
		}
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	module := regexp.MustCompile(`(?m)^module (\S+)`).FindSubmatch(gomod)
	if module == nil || !strings.Contains(text, "go install "+string(module[1])+"/cmd/onnxpe@") {
		t.Errorf("the README does not install this module's command (%s/cmd/onnxpe)", module[1])
	}
	if len(cmds) < 4 {
		t.Fatalf("found %d onnxpe commands in the README", len(cmds))
	}
	// A clone's root: the bundled files, and a go.mod (generated Go code
	// is tested inside the module).
	w := t.TempDir()
	for _, d := range []string{"testmodels", "testdata"} {
		if err := os.Symlink(filepath.Join(root, d), filepath.Join(w, d)); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(w, "go.mod"), []byte("module example.com/clone\n"), 0o644)
	t.Chdir(w)
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for _, c := range cmds {
		code, out, errOut := runCLI(t, c.args...)
		// diff's exit 1 is its answer: the audits differ, as shown.
		if code != 0 && !(code == ExitCheckFailed && c.args[0] == "diff") {
			t.Errorf("README.md:%d: onnxpe %s: exit %d: %s", c.line, strings.Join(c.args, " "), code, errOut)
			continue
		}
		got := map[string]bool{}
		for _, l := range strings.Split(out, "\n") {
			got[norm(l)] = true
		}
		for _, w := range c.want {
			if strings.Contains(w, "...") || strings.Contains(w, "…") {
				continue
			}
			if !got[norm(w)] {
				t.Errorf("README.md:%d: onnxpe %s does not print\n%s\nbut\n%s", c.line, strings.Join(c.args, " "), w, out)
			}
		}
	}
	t.Logf("%d README commands ran", len(cmds))
}
