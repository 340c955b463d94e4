package cli

import (
	"bufio"
	"encoding/xml"
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

// TestREADMEWorkflowRuns runs the README's GitHub Actions workflow (its
// "In CI" section) as far as onnxpe goes: it installs this module's
// command, and every onnxpe command of its steps runs as written in a
// repository whose models/ folder holds bundled models and passes its
// policy (exit 0); the files the upload steps take exist, the SARIF log
// valid against the SARIF 2.1.0 schema and the JUnit files parsing.
func TestREADMEWorkflowRuns(t *testing.T) {
	schema := sarifSchema(t)
	root := filepath.Dir(testmodels.Dir())
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## In CI\n")
	_, yaml, ok2 := strings.Cut(section, "```yaml\n")
	yaml, _, ok3 := strings.Cut(yaml, "\n```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("the README has no In CI section with a yaml block")
	}
	gomod, _ := os.ReadFile(filepath.Join(root, "go.mod"))
	module := regexp.MustCompile(`(?m)^module (\S+)`).FindSubmatch(gomod)
	if module == nil || !strings.Contains(yaml, "run: go install "+string(module[1])+"/cmd/onnxpe@") {
		t.Error("the workflow does not install this module's command")
	}
	var cmds [][]string
	var uploads []string
	for _, l := range strings.Split(yaml, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "run: "))
		switch {
		case strings.HasPrefix(l, "onnxpe ") || strings.HasPrefix(l, "mkdir -p "):
			cmds = append(cmds, strings.Fields(l))
		case strings.HasPrefix(l, "sarif_file: ") || strings.HasPrefix(l, "path: "):
			_, v, _ := strings.Cut(l, ": ")
			uploads = append(uploads, v)
		}
	}
	if len(cmds) < 4 || len(uploads) != 2 {
		t.Fatalf("the workflow's commands %v, uploads %v", cmds, uploads)
	}
	t.Chdir(t.TempDir())
	for dst, src := range map[string]string{"models/llama.onnx": corpusModel("rope_llama"), "models/qwen2.onnx": corpusModel("rope_qwen2"),
		"models/scaled/linear.onnx": corpusModel("rope_linear")} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(dst), 0o755)
		os.WriteFile(dst, data, 0o644)
	}
	for _, c := range cmds {
		if c[0] == "mkdir" {
			os.MkdirAll(c[2], 0o755)
			continue
		}
		if code, _, errOut := runCLI(t, c[1:]...); code != 0 {
			t.Errorf("%s: exit %d: %s", strings.Join(c, " "), code, errOut)
		}
	}
	for _, u := range uploads {
		ms, _ := filepath.Glob(u)
		if len(ms) == 0 {
			t.Errorf("the workflow uploads %s, which its steps did not write", u)
		}
		for _, m := range ms {
			data, _ := os.ReadFile(m)
			switch {
			case strings.HasSuffix(m, ".sarif"):
				if got := sarifResults(validSARIF(t, schema, data)); len(got) != 0 {
					t.Errorf("%s: the policy fails: %v", m, got)
				}
			case strings.HasSuffix(m, ".xml"):
				var doc junitDoc
				if err := xml.Unmarshal(data, &doc); err != nil || doc.Tests == 0 || doc.Fails+doc.Errors != 0 {
					t.Errorf("%s: %v, %d cases, %d failed: %s", m, err, doc.Tests, doc.Fails+doc.Errors, data)
				}
			}
		}
	}
}
