package cli

import (
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
)

// Sizes given by flags are checked against the memory budget before any
// work (B4: they reached the allocator and ended in Go's "out of memory"
// with a goroutine dump): exit 2, one line naming the flag and the bytes,
// at once. A small budget makes each case small.
func TestFlagSizesOverTheMemoryBudget(t *testing.T) {
	llama, alibi := corpusModel("rope_llama"), corpusModel("alibi_bloom")
	o := t.TempDir()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"extend", llama, "-o", o + "/x.onnx", "--to", "100000", "--method", "linear", "--original-max-positions", "32"}, []string{"--to 100000", "check runs_at_n", "100000 x 100000"}},
		{[]string{"extend", llama, "-o", o + "/x.onnx", "--to", "1000000000", "--method", "linear", "--original-max-positions", "32"}, []string{"--to 1000000000"}},
		{[]string{"extend", corpusModel("learned_gpt2"), "--dry-run", "--to", "1000000"}, []string{"--to 1000000", "position tables of 1000000 positions"}},
		{[]string{"extend", corpusModel("learned_gpt2"), "--dry-run", "--to", "4096", "--memory-limit", "8MiB"}, []string{"--to 4096", "square masks to 4096 x 4096", "16.0 MiB (16777216 bytes)", "budget of 8.0 MiB"}},
		{[]string{"rewrite", llama, "-o", o + "/y.onnx", "--max-positions", "1000000000"}, []string{"--max-positions 1000000000", "position tables of 1000000000 positions", "238.4 GiB (256000000000 bytes)"}},
		{[]string{"codegen", llama, "--lang", "go", "--package", "pe", "-o", o + "/pe", "--max-positions", "10000000"}, []string{"--max-positions 10000000", "2.4 GiB (2560000000 bytes)"}},
		{[]string{"codegen", alibi, "--lang", "go", "--package", "pe", "-o", o + "/pe", "--max-positions", "100000"}, []string{"alibi bias over 100000 x 100000 positions"}},
		{[]string{"verify", llama, llama, "--seq", "40000"}, []string{"--seq 40000", "40000 x 40000 float32", "6.0 GiB (6400000000 bytes)"}},
		{[]string{"verify", llama, llama, "--batch", "100000", "--seq", "200"}, []string{"--batch 100000"}},
	} {
		args, budget := c.args, "over the memory budget of 8.0 MiB"
		if !slices.Contains(args, "--memory-limit") {
			args, budget = append(args, "--memory-limit", "64MiB"), "over the memory budget of 64.0 MiB"
		}
		start := time.Now()
		code, out, e := runCLI(t, args...)
		oneLineExit2(t, args, code, e, append(c.want, budget, "--memory-limit or ONNXPE_MEMORY_LIMIT")...)
		if out != "" {
			t.Errorf("%v: stdout %q", args, out)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%v took %v: the check is not up front", args, d)
		}
	}
	// The environment variable sets the budget too; the flag wins.
	t.Setenv(memoryLimitEnv, "64MiB")
	args := []string{"verify", llama, llama, "--seq", "40000"}
	code, _, e := runCLI(t, args...)
	oneLineExit2(t, args, code, e, "over the memory budget of 64.0 MiB")
	if code, _, e := runCLI(t, append(args, "--memory-limit", "off", "--dry-run")...); strings.Contains(e, "memory budget") {
		t.Errorf("--memory-limit off: exit %d, %q", code, e)
	}
}

// Within the budget's check of flags, the executor checks each tensor and
// the live total: a run that would go over it fails naming the node and
// the bytes, exit 2 (B5).
func TestRunOverTheMemoryBudgetNamesTheNode(t *testing.T) {
	llama := corpusModel("rope_llama")
	// 1000 tokens pass the check of --seq (a 4 MB score matrix), but the
	// model's four heads and its mask do not fit in 8 MiB.
	args := []string{"verify", llama, llama, "--seq", "1000", "--memory-limit", "8MiB", "--no-audit"}
	code, _, e := runCLI(t, args...)
	oneLineExit2(t, args, code, e, "node \"", "over the memory budget of 8.0 MiB", "held already")
	// The default budget runs it.
	if code, _, e := runCLI(t, "verify", llama, llama, "--seq", "1000", "--no-audit"); code != 0 {
		t.Fatalf("verify with the default budget: %d %s", code, e)
	}
}

// --memory-limit and ONNXPE_MEMORY_LIMIT take sizes, percentages and off;
// anything else exits 2.
func TestMemoryLimitValues(t *testing.T) {
	for s, want := range map[string]int64{"8GiB": 8 << 30, "500MB": 500e6, "1e9": 1e9, "2G": 2 << 30, "64 MiB": 64 << 20, "off": 0, "3145728": 3 << 20} {
		if n, err := parseMemoryLimit(s); err != nil || n != want {
			t.Errorf("%q: %d %v, want %d", s, n, err, want)
		}
	}
	if n, err := parseMemoryLimit("50%"); err != nil || n <= 0 {
		t.Errorf("50%%: %d %v", n, err)
	}
	g := gatherModel(t)
	for _, s := range []string{"5x", "-1GiB", "NaN", "Inf", "0.5", "150%", "0%", ""} {
		if s == "" {
			continue
		}
		args := []string{"inspect", g, "--memory-limit", s}
		code, _, e := runCLI(t, args...)
		oneLineExit2(t, args, code, e, "--memory-limit")
	}
	t.Setenv(memoryLimitEnv, "lots")
	code, _, e := runCLI(t, "inspect", g)
	oneLineExit2(t, []string{"inspect", g}, code, e, memoryLimitEnv, "lots")
}

// TestCommandsLowerTheGCGoal: a command sets the collector's goal to
// gcPercent, unless GOGC is set.
func TestCommandsLowerTheGCGoal(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	if code, _, stderr := runCLI(t, "audit", corpusFile("rope_llama", "model.onnx")); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GOGC unset: the goal is %d after a command, want %d", got, gcPercent)
	}
	t.Setenv("GOGC", "100")
	if code, _, stderr := runCLI(t, "audit", corpusFile("rope_llama", "model.onnx")); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=100: the goal is %d after a command, want it left at 100", got)
	}
}
