package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/scheme"
	"github.com/onnxpe/onnxpe/passes/schemes"
	"github.com/spf13/cobra"
)

// The memory budget (README "Memory"): one per process, kernels'
// ProcessBudget, whose limit --memory-limit or ONNXPE_MEMORY_LIMIT sets
// (default: half the memory the process may use). The executor checks
// every tensor and the live total against it; the commands check the
// sizes their flags imply against it before any work.

const memoryLimitEnv = "ONNXPE_MEMORY_LIMIT"

const memoryLimitFlag = "memory-limit"

const memoryLimitUsage = "memory budget of tensors: bytes (8GiB, 500MB, 1e9), a percentage of the machine's memory (25%), or off (default: half the machine's memory; also " + memoryLimitEnv + ")"

// memoryHint is what budget errors say to change the limit.
const memoryHint = "--" + memoryLimitFlag + " or " + memoryLimitEnv

// addMemoryFlag adds --memory-limit to root (every command has it).
func addMemoryFlag(root *cobra.Command) {
	root.PersistentFlags().String(memoryLimitFlag, "", memoryLimitUsage)
}

// applyMemoryLimit sets the process budget's limit from --memory-limit,
// else ONNXPE_MEMORY_LIMIT, else the default (each run of the command
// line sets it anew: tests run many in one process).
func applyMemoryLimit(cmd *cobra.Command) error {
	b := kernels.ProcessBudget()
	b.SetHint(memoryHint)
	src, s := "--"+memoryLimitFlag, ""
	if f := cmd.Flags().Lookup(memoryLimitFlag); f != nil {
		s = f.Value.String()
	}
	if s == "" {
		src, s = memoryLimitEnv, os.Getenv(memoryLimitEnv)
	}
	n := kernels.DefaultBudgetLimit()
	if s != "" {
		var err error
		if n, err = parseMemoryLimit(s); err != nil {
			return badInput("%s %q: %v", src, s, err)
		}
	}
	b.SetLimit(n)
	setGoMemoryLimit(n)
	return nil
}

// setGoMemoryLimit makes Go's garbage collector keep the heap near the
// budget (freed tensors are garbage until it runs): its soft limit is set
// to twice the budget and 256 MiB (tensors, and what else the command
// holds), at most 3/4 of the memory the process may use. GOMEMLIMIT, when
// set, is left as it is.
//
// The collector's goal is also lowered from twice the live heap to 1.5x
// (GOGC 50, unless GOGC is set): the memory the heap keeps beyond what is
// live, freed and not yet returned, follows that goal. A run's tensors are
// pointer-free, so the collections this adds are short: extend --to 8192
// of a 0.32B Llama peaked at 2.48-2.52 GB with the default and at
// 2.33-2.44 GB with 50, in no more time.
// gcPercent is the collector's goal the commands set (see setGoMemoryLimit).
const gcPercent = 50

func setGoMemoryLimit(budget int64) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	lim := int64(math.MaxInt64)
	if budget > 0 {
		lim = 2*budget + 256<<20
	}
	if m := 2 * kernels.DefaultBudgetLimit(); m > 0 {
		lim = min(lim, m/4*3)
	}
	debug.SetMemoryLimit(lim)
}

// parseMemoryLimit reads a limit: "off" (none, 0), a byte count with an
// optional unit (B, KiB, MiB, GiB, TiB; K, M, G, T are the same; KB, MB,
// GB, TB are powers of 1000), or a percentage of the machine's memory.
func parseMemoryLimit(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "off") {
		return 0, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !(f > 0 && f <= 100) {
			return 0, fmt.Errorf("a percentage must be a number above 0 and at most 100")
		}
		return int64(f / 100 * float64(2*kernels.DefaultBudgetLimit())), nil
	}
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}}
	mult := 1.0
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("not a size (bytes with an optional unit: 8GiB, 500MB, 1e9; a percentage; or off)")
	}
	n := f * mult
	if !(n >= 1<<20) || n > 1<<62 {
		return 0, fmt.Errorf("a limit must be at least 1 MiB (and below 4 EiB); off means none")
	}
	return int64(n), nil
}

// checkFlagMemory refuses, before any work, a flag value whose implied
// memory (bytes, what needs it) is over the process budget: one line
// naming the flag and the bytes.
func checkFlagMemory(flag string, value any, bytes float64, what string) error {
	lim := kernels.ProcessBudget().Limit()
	if lim > 0 && bytes > float64(lim) {
		return badInput("%s %v: %s would take %s, over the memory budget of %s (%s sets it)", flag, value, what, approxBytes(bytes), kernels.Bytes(lim), memoryHint)
	}
	return nil
}

// approxBytes prints a byte count that may be beyond int64.
func approxBytes(b float64) string {
	if b < 1<<62 {
		return kernels.Bytes(int64(b))
	}
	return fmt.Sprintf("%.3g bytes", b)
}

// attentionBytes is what running a model at n positions holds at least
// when it has attention: one score matrix of one head, n x n float32, per
// row of the batch.
func attentionBytes(batch, n int64) float64 { return float64(batch) * float64(n) * float64(n) * 4 }

// hasAttention reports whether m computes attention scores (a Softmax, or
// a fused attention op): what makes its memory grow with the square of
// the sequence.
func hasAttention(m *graph.Model) bool {
	found := false
	m.Walk(func(n *graph.Node) {
		switch n.OpType {
		case "Softmax", "Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention", "QAttention", "SparseAttention", "FlexAttention", "DecoderMaskedMultiHeadAttention":
			found = true
		}
	})
	return found
}

// tablesBytes is what computing a model's position tables for n positions
// holds: for each finding, n rows (2n for relative schemes) of its width
// (rotary_dim, head_dim or dim; num_heads for a bias), in float64 twice
// (cos and sin, or the values and their rounding); for pairwise biases
// (ALiBi, T5) evaluated at n positions, n x n per head in float32 when
// pairwise is set.
func tablesBytes(rep *passes.Report, n int64, pairwise bool) (float64, string) {
	var total float64
	what := fmt.Sprintf("the position tables of %d positions", n)
	for _, f := range rep.Findings {
		// The report's params, by their stable JSON names.
		var fj struct {
			Params map[string]any `json:"params"`
		}
		if b, err := json.Marshal(f); err == nil {
			json.Unmarshal(b, &fj)
		}
		p := fj.Params
		num := func(k string) float64 {
			v, _ := p[k].(float64)
			return v
		}
		width := max(num("rotary_dim"), num("head_dim"), num("dim"))
		heads := max(num("num_heads"), 1)
		rows := float64(n)
		growth := scheme.ByPosition
		if sc := schemes.Lookup(f.Scheme); sc != nil {
			growth = sc.Tables
		}
		switch growth {
		case scheme.ByPair:
			if pairwise {
				total += float64(n) * float64(n) * heads * 4
				what = fmt.Sprintf("the %s bias over %d x %d positions", f.Scheme, n, n)
				continue
			}
			width = heads
		case scheme.ByDistance:
			rows = 2 * float64(n)
		}
		total += rows * max(width, 1) * 16
	}
	return total, what
}

// checkSweepMemory checks verify's --seq and --batch against the budget:
// a model with attention holds a score matrix of seq x seq per row of the
// batch (the longest --seq at batch 1; the largest --batch at the
// shortest --seq, 1 when none is given).
func checkSweepMemory(m *graph.Model, seqs, batches []int) error {
	if !hasAttention(m) {
		return nil
	}
	shortest := 1
	if len(seqs) > 0 {
		shortest = slices.Min(seqs)
		s := slices.Max(seqs)
		if err := checkFlagMemory("--seq", s, attentionBytes(1, int64(s)), fmt.Sprintf("running the model on %d tokens (one attention score matrix of %d x %d float32)", s, s, s)); err != nil {
			return err
		}
	}
	if len(batches) > 0 {
		b := slices.Max(batches)
		if err := checkFlagMemory("--batch", b, attentionBytes(int64(b), int64(shortest)), fmt.Sprintf("running the model on %d rows of %d tokens (their attention scores, %d x %d float32 each)", b, shortest, shortest, shortest)); err != nil {
			return err
		}
	}
	return nil
}

// checkPositionsMemory checks a number of positions a flag asks for (n)
// against the budget: the position tables of the audit's findings
// (pairwise biases at n x n when pairwise).
func checkPositionsMemory(flag string, rep *passes.Report, n int64, pairwise bool) error {
	b, what := tablesBytes(rep, n, pairwise)
	return checkFlagMemory(flag, n, b, what)
}

// checkExtendMemory checks extend's --to n before planning: the tables
// and the square constants (causal masks) planning continues to n x n.
func checkExtendMemory(m *graph.Model, rep *passes.Report, n int64) error {
	if err := checkPositionsMemory("--to", rep, n, false); err != nil {
		return err
	}
	if sq := squareConstBytes(m); sq > 0 {
		return checkFlagMemory("--to", n, sq*float64(n)*float64(n), fmt.Sprintf("continuing the model's square masks to %d x %d", n, n))
	}
	return nil
}

// checkRunAtMemory checks, before extend's checks run, their run of the
// model at n positions: one attention score matrix of n x n float32.
func checkRunAtMemory(m *graph.Model, n int64) error {
	if !hasAttention(m) {
		return nil
	}
	return checkFlagMemory("--to", n, attentionBytes(1, n), fmt.Sprintf("running the model at %d positions (check runs_at_n: one attention score matrix of %d x %d float32)", n, n, n))
}

// squareConstBytes is the bytes per element of the widest mask-like
// constant (initializer or Constant node): its last two dimensions equal (and at least 16), and it is
// a bool or of rank 3 or more (a [1, 1, n, n] buffer, not a weight
// matrix); 0 when there is none.
func squareConstBytes(m *graph.Model) float64 {
	var b float64
	see := func(t *graph.Tensor) {
		if t == nil {
			return
		}
		d := t.Dims()
		k := len(d)
		if k >= 2 && d[k-1] == d[k-2] && d[k-1] >= 16 && (k >= 3 || t.DataType() == graph.Bool) {
			b = max(b, float64(max(t.DataType().Bits(), 8)/8))
		}
	}
	for _, v := range m.Graph.Initializers {
		see(v.Const)
	}
	m.Walk(func(n *graph.Node) {
		if a := n.Attr("value"); n.OpType == "Constant" && a != nil {
			see(a.Tensor)
		}
	})
	return b
}
