package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/atomicfile"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/verify"
)

type verifyOptions struct {
	IO           *IOStreams
	A, B         string
	Against      string
	Inputs       string
	Seqs         []int
	Batches      []int
	Seed         uint64
	Rtol, Atol   float64
	rtolSet      bool
	atolSet      bool
	JUnit        string
	JSON         bool
	Runtime      string
	Bisect       bool
	Precision    string
	As           string
	Positions    int
	Bound        float64
	MaxPositions int
	NoAudit      bool
	Threads      int
	ctx          context.Context
}

// verifyToleranceHelp is the tolerance policy, with verify's defaults.
var verifyToleranceHelp = fmt.Sprintf(`Tolerance: an element b of B passes when |a - b| <= atol + rtol*|a|, a
being A's (or the reference's) element; NaN only equals NaN, an infinity
only the same infinity; integer and bool outputs must be equal. Defaults
per element type:
  float32, float64  rtol %-5s atol %s
  float16           rtol %-5s atol %s
  bfloat16          rtol %-5s atol %s
One model in two runtimes (--runtime both: A go / A ort) is compared at
twice these. --rtol and --atol replace that part for every float type. The
report also gives the largest distance in units in the last place (ULP) of
the type.`, sci(verify.DefaultFloat32.Rtol), sci(verify.DefaultFloat32.Atol), sci(verify.DefaultFloat16.Rtol), sci(verify.DefaultFloat16.Atol),
	sci(verify.DefaultBFloat16.Rtol), sci(verify.DefaultBFloat16.Atol))

// sci prints a tolerance as 1e-5, 4e-3.
func sci(x float64) string {
	s := strconv.FormatFloat(x, 'e', -1, 64)
	return strings.Replace(strings.Replace(s, "e-0", "e-", 1), "e+00", "", 1)
}

// NewCmdVerify builds `onnxpe verify`.
func NewCmdVerify(ios *IOStreams) *cobra.Command {
	opts := &verifyOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "verify A B [flags] | verify A --against DIR | verify --precision MODEL",
		Short: "Check that two models compute the same outputs, on inputs that exercise positions",
		Long: `Verify runs models A and B on the same inputs and compares every output (by
name; by position, with a warning, when the names differ).

The inputs are synthesised from what each input means in the graph, found
from its type, shape and uses: token ids within the vocabulary (the rows of
the table they index), position ids (0..S-1, offset by the past length, and
up to the largest position the model supports; the rows of a batch at
different positions, so that a model reading one row's for all differs),
attention masks (all ones,
left and right padding; outputs at padding tokens are not compared), past
keys/values with consistent lengths, float features from a normal
distribution (--seed). The default sweep is: a single token, a short padded
batch, the longest sequence (the size of the largest stored position table,
cos/sin cache or bias table, checked by running A; 128 when none bounds
it), positions near the largest supported one (4095 for computed
encodings), and KV-cache steps when the model takes a cache. --seq and
--batch replace the lengths and batch sizes.

--inputs DIR|FILE.npz uses given inputs instead (an ONNX test-data folder,
a folder of test_data_set_N folders, or a .npz file named by input).
--against DIR compares A with the reference outputs stored there
(output_N.pb beside input_N.pb) instead of a second model.

The audit's findings about A (which inputs hold token ids, positions and
masks; max_positions of a stored table) are used when it finds them
(--no-audit uses verify's own analysis only); --max-positions N says how
many positions A supports when neither finds it.

--runtime go runs the models with onnxpe's kernels; ort with ONNX Runtime
(default optimisations) and both compares all four pairings (A and B in
each runtime, and each model across runtimes). ONNX Runtime needs a build
with the ort tag (the pure-Go build says how to get one).

--bisect, when outputs differ, runs both graphs again exposing every value
they compute under the same name and names the first node where they
diverge.

--precision MODEL audits how precisely the cos/sin (RoPE) or sinusoidal
values of a float16/bfloat16 model (or of a float32 model read --as float16
or bfloat16) hold positions: per frequency, the first position where a
value is further than --bound from float64 (default: the type's atol), and
the first where two consecutive positions get the same values. It exits 1
when a value exceeds the bound.

Reports: a table, --json (in the shape of the JSON Schema
verify/report.schema.json; with --precision verify/precision.schema.json),
and --junit FILE (JUnit XML, one test case per input set and runtime
pairing, skipped sets as skipped cases).

` + verifyToleranceHelp + `

Exit codes:
  0  the models are equal on every input set (precision: within the bound)
  1  an output differs: in values, shape or element type (a warning
     names random ops without a seed, whose values differ from run to
     run; precision: a value exceeds the bound)
  2  usage error, unreadable input, or a pair that cannot be compared:
     different input names or types, a model that cannot run
  3  internal error (a bug: please report it)
` + exitInterruptedHelp,
		Example: `  onnxpe verify model.onnx model_rewritten.onnx
  onnxpe verify model.onnx ort_optimized.onnx --json --junit verify.xml
  onnxpe verify model.onnx --against test_data_set_0
  onnxpe verify a.onnx b.onnx --seq 1,7,128 --batch 2 --bisect
  onnxpe verify a.onnx b.onnx --runtime both     (a build with -tags ort)
  onnxpe verify --precision model_fp16.onnx
  onnxpe verify --precision model.onnx --as bfloat16`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				opts.A = args[0]
			}
			if len(args) > 1 {
				opts.B = args[1]
			}
			opts.rtolSet = cmd.Flags().Changed("rtol")
			opts.atolSet = cmd.Flags().Changed("atol")
			opts.ctx = cmd.Context()
			return verifyRun(opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Against, "against", "", "compare A with the reference outputs in `DIR` instead of a model B")
	f.StringVar(&opts.Inputs, "inputs", "", "use the input sets in `DIR|FILE.npz` instead of the sweep")
	f.IntSliceVar(&opts.Seqs, "seq", nil, "sequence lengths of the sweep, e.g. 1,7,128")
	f.IntSliceVar(&opts.Batches, "batch", nil, "batch sizes of the sweep, e.g. 1,2")
	f.Uint64Var(&opts.Seed, "seed", 1, "seed of the synthesised values")
	f.Float64Var(&opts.Rtol, "rtol", 0, "relative tolerance for every float type (default: per type, see above)")
	f.Float64Var(&opts.Atol, "atol", 0, "absolute tolerance for every float type (default: per type, see above)")
	f.StringVar(&opts.JUnit, "junit", "", "also write the report as JUnit XML to `FILE`")
	f.BoolVar(&opts.JSON, "json", false, "print JSON")
	f.StringVar(&opts.Runtime, "runtime", "go", "executors: go, ort or both")
	f.BoolVar(&opts.Bisect, "bisect", false, "when outputs differ, name the first node where the graphs diverge")
	f.StringVar(&opts.Precision, "precision", "", "audit the precision of the cos/sin or sinusoidal values of `MODEL`")
	f.StringVar(&opts.As, "as", "", "with --precision: audit the values as float16 or bfloat16")
	f.IntVar(&opts.Positions, "positions", 0, "with --precision: positions to check (default: the sweep's largest position + 1, or the table's rows)")
	f.Float64Var(&opts.Bound, "bound", 0, "with --precision: largest accepted difference from float64 (default: the type's atol)")
	f.IntVar(&opts.MaxPositions, "max-positions", 0, "the number of positions A supports, when its graph does not say (a stored table's rows)")
	f.BoolVar(&opts.NoAudit, "no-audit", false, "do not use the audit's findings about A (input roles, max_positions): only verify's own analysis")
	f.IntVar(&opts.Threads, "threads", 0, "goroutines of onnxpe's kernels and ONNX Runtime threads (0: all cores)")
	return cmd
}

func verifyRun(opts *verifyOptions) error {
	ctx := opts.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	switch {
	case opts.Threads < 0:
		return badInput("verify: --threads must not be negative (0: all cores)")
	case opts.MaxPositions < 0:
		return badInput("verify: --max-positions must not be negative")
	}
	if opts.Precision != "" {
		return precisionRun(ctx, opts)
	}
	switch {
	case opts.A == "":
		return badInput("verify: give two models, a model and --against DIR, or --precision MODEL (see 'onnxpe verify --help')")
	case opts.As != "" || opts.Positions != 0 || opts.Bound != 0:
		return badInput("verify: --as, --positions and --bound go with --precision")
	case opts.Against != "" && opts.B != "":
		return badInput("verify: give a model B or --against DIR, not both")
	case opts.Against == "" && opts.B == "":
		return badInput("verify: give a model B to compare %s with, or --against DIR", opts.A)
	case opts.Against != "" && (len(opts.Seqs) > 0 || len(opts.Batches) > 0 || opts.Inputs != ""):
		return badInput("verify: --against uses the inputs stored beside the reference outputs; --seq, --batch and --inputs do not apply")
	case opts.Inputs != "" && (len(opts.Seqs) > 0 || len(opts.Batches) > 0):
		return badInput("verify: --seq and --batch shape the sweep; they do not apply to --inputs")
	}
	for _, n := range opts.Seqs {
		if n < 1 {
			return badInput("verify: --seq lengths must be at least 1, not %d", n)
		}
	}
	for _, n := range opts.Batches {
		if n < 1 {
			return badInput("verify: --batch sizes must be at least 1, not %d", n)
		}
	}
	vo := verify.Options{Seed: opts.Seed, Seqs: opts.Seqs, Batches: opts.Batches, PathA: opts.A, PathB: opts.B,
		Bisect: opts.Bisect, Threads: opts.Threads}
	switch opts.Runtime {
	case "go", "ort", "both":
		vo.Runtime = verify.Runtime(opts.Runtime)
	default:
		return badInput("verify: --runtime must be go, ort or both, not %q", opts.Runtime)
	}
	if vo.Runtime != verify.RuntimeGo && !verify.ORTAvailable() {
		return badInput("verify: --runtime %s: %v", opts.Runtime, verify.ErrNoORT)
	}
	if opts.rtolSet {
		if !(opts.Rtol >= 0) || math.IsInf(opts.Rtol, 1) {
			return badInput("verify: --rtol must be a number of at least 0, not %v", opts.Rtol)
		}
		vo.Policy.Rtol = &opts.Rtol
	}
	if opts.atolSet {
		if !(opts.Atol >= 0) || math.IsInf(opts.Atol, 1) {
			return badInput("verify: --atol must be a number of at least 0, not %v", opts.Atol)
		}
		vo.Policy.Atol = &opts.Atol
	}
	if opts.JUnit != "" {
		reads := append([]string{opts.A, opts.B}, filesUnder(opts.Against)...)
		if err := checkOutputFile("--junit", opts.JUnit, append(reads, filesUnder(opts.Inputs)...)...); err != nil {
			return err
		}
	}
	a, err := loadModel(opts.IO.ErrOut, opts.A)
	if err != nil {
		return err
	}
	if err := checkSweepMemory(a, opts.Seqs, opts.Batches); err != nil {
		return err
	}
	vo.Hints = hintsFor(opts, a)
	prog := newProgress(opts.IO)
	vo.Progress = prog.update
	var rep *verify.Report
	if opts.Against != "" {
		sets, err := verify.ReadSets(opts.Against, a, true)
		if err != nil {
			return badInput("%v", err)
		}
		vo.Inputs = sets
		rep, err = verify.CompareReference(ctx, a, opts.Against, vo)
		prog.done()
		if err != nil {
			return verifyError(err)
		}
	} else {
		b, err := loadModel(opts.IO.ErrOut, opts.B)
		if err != nil {
			return err
		}
		if opts.Inputs != "" {
			sets, err := verify.ReadSets(opts.Inputs, a, false)
			if err != nil {
				return badInput("%v", err)
			}
			vo.Inputs = sets
		}
		rep, err = verify.Compare(ctx, a, b, vo)
		prog.done()
		if err != nil {
			return verifyError(err)
		}
	}
	if opts.JUnit != "" {
		var buf bytes.Buffer
		if err := rep.WriteJUnit(&buf); err != nil {
			return err
		}
		if err := commit(ctx, opts.JUnit, func() error { return atomicfile.WriteFile(opts.JUnit, buf.Bytes()) }); err != nil {
			return badInput("%s: %v", opts.JUnit, err)
		}
	}
	if opts.JSON {
		if err := writeJSON(opts.IO, rep); err != nil {
			return err
		}
	} else if err := rep.WriteTable(opts.IO.Out); err != nil {
		return err
	}
	if !rep.Equal {
		return &checkFailed{msg: rep.Summary}
	}
	return nil
}

// hintsFor gathers what is known about model m beforehand: the audit's
// findings (unless --no-audit) and --max-positions, which wins.
func hintsFor(opts *verifyOptions, m *graph.Model) verify.Hints {
	var h verify.Hints
	if !opts.NoAudit {
		var err error
		h, err = verify.AuditHints(m)
		if err != nil {
			fmt.Fprintf(opts.IO.ErrOut, "onnxpe: warning: the audit of %s failed (%s); verify uses its own analysis only\n", opts.A+opts.Precision, oneLine(err.Error()))
			h = verify.Hints{}
		}
	}
	if opts.MaxPositions > 0 {
		h.MaxPositions, h.From = opts.MaxPositions, fmt.Sprintf("--max-positions %d", opts.MaxPositions)
	}
	return h
}

// verifyError classifies the errors of Compare: a pair that cannot be
// compared or a model that cannot run is exit 2; a kernel's internal
// failure is exit 3.
func verifyError(err error) error {
	if errors.Is(err, kernels.ErrInternal) {
		return err
	}
	var me *verify.ModelError
	if errors.As(err, &me) || errors.Is(err, verify.ErrIncompatible) || errors.Is(err, verify.ErrNoORT) ||
		errors.Is(err, context.Canceled) {
		return badInput("verify: %v", err)
	}
	return err
}

func precisionRun(ctx context.Context, opts *verifyOptions) error {
	if opts.A != "" || opts.Against != "" || opts.Inputs != "" || len(opts.Seqs) > 0 || opts.JUnit != "" || opts.Bisect {
		return badInput("verify: --precision MODEL takes no other model and only --as, --positions, --bound, --max-positions, --json")
	}
	po := verify.PrecisionOptions{Positions: opts.Positions, Bound: opts.Bound, Threads: opts.Threads}
	switch opts.As {
	case "":
	case "float16", "bfloat16":
		po.As, _ = graph.ParseDataType(opts.As)
	default:
		return badInput("verify: --as must be float16 or bfloat16, not %q", opts.As)
	}
	if opts.Positions < 0 || !(opts.Bound >= 0) || math.IsInf(opts.Bound, 1) {
		return badInput("verify: --positions and --bound must be numbers of at least 0")
	}
	m, err := loadModel(opts.IO.ErrOut, opts.Precision)
	if err != nil {
		return err
	}
	po.Hints = hintsFor(opts, m)
	rep, err := verify.Precision(ctx, m, po)
	if err != nil {
		if errors.Is(err, kernels.ErrInternal) {
			return err
		}
		return badInput("%s: %v", opts.Precision, err)
	}
	rep.Model = opts.Precision
	if opts.JSON {
		if err := writeJSON(opts.IO, rep); err != nil {
			return err
		}
	} else if err := rep.WriteTable(opts.IO.Out); err != nil {
		return err
	}
	if !rep.OK {
		return &checkFailed{msg: rep.Summary}
	}
	return nil
}

// progress draws one line on a terminal for runs longer than a second.
// A ticking progress (extend's) also redraws the line every second with
// the time its step has taken, so that a step of minutes (a model run at
// 16384 positions) shows it is still running.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	on    bool
	start time.Time
	shown bool
	// delay is how long a run goes before the line is drawn (a second).
	delay time.Duration
	// label starts the line ("verify"); phase, when set, follows it.
	label, phase string
	// step is the last step drawn and stepAt when it began; stop ends
	// the ticking.
	last   verify.Progress
	stepAt time.Time
	stop   chan struct{}
	// ticks runs the ticking goroutine; done returns its panic.
	ticks *kernels.Group
	// tickHook (tests) runs at every tick, before the line is drawn.
	tickHook func()
	// every is the time between ticks (a second).
	every time.Duration
	// sinceStart shows the time since the start (audit's line), not the
	// time of the step.
	sinceStart bool
}

func newProgress(ios *IOStreams) *progress {
	return &progress{w: ios.ErrOut, on: ios.ErrIsTerminal, start: time.Now(), delay: time.Second, every: time.Second, label: "verify"}
}

// ticking makes the progress redraw its line every second with the time
// its step has taken (until done). The ticking goroutine runs under a
// kernels.Group: a panic there ends the ticking and done returns it.
func (p *progress) ticking() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on || p.stop != nil {
		return
	}
	stop := make(chan struct{})
	p.stop, p.ticks = stop, &kernels.Group{}
	p.ticks.Go(func() error {
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return nil
			case <-t.C:
				p.tick(stop)
			}
		}
	})
}

// tick redraws the line (unlocking also when it panics: the command's
// own calls go on).
func (p *progress) tick(stop chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tickHook != nil {
		p.tickHook()
	}
	if p.stop == stop {
		p.draw()
	}
}

// setPhase names what runs (extend's check) and clears the step.
func (p *progress) setPhase(phase string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phase, p.last, p.stepAt = phase, verify.Progress{}, time.Now()
	p.draw()
}

func (p *progress) update(pr verify.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last, p.stepAt = pr, time.Now()
	p.draw()
}

func (p *progress) draw() {
	if !p.on || time.Since(p.start) < p.delay || p.phase == "" && p.last.Step == "" {
		return
	}
	count := ""
	if p.last.Total > 0 {
		count = fmt.Sprintf("%d/%d", min(p.last.Done+1, p.last.Total), p.last.Total)
	}
	var head string
	switch {
	case p.phase == "":
		head = strings.TrimSpace(p.label+" "+count) + ": "
	case p.last.Step == "":
		head = p.label + ": " + p.phase
	default:
		head = p.label + ": " + p.phase + ": "
		if count != "" {
			head += count + " "
		}
	}
	took := ""
	switch {
	case p.sinceStart:
		took = " (" + time.Since(p.start).Round(time.Second).String() + ")"
	case p.stop != nil:
		took = " (" + time.Since(p.stepAt).Round(time.Second).String() + ")"
	}
	line := head + fitLeft(p.last.Step, progressWidth-len([]rune(head))-len(took))
	fmt.Fprint(p.w, "\r\033[K"+strings.TrimSpace(line)+took)
	p.shown = true
}

// progressWidth is the widest progress line drawn (an 80-column
// terminal, less the cursor's column and one to spare).
const progressWidth = 78

// fitLeft shortens s to at most n runes by cutting its start, so that a
// path keeps its end (the folder and file that tell models apart):
// "…/rope_llama/model.onnx".
func fitLeft(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 1 {
		return ""
	}
	return "…" + string(r[len(r)-(n-1):])
}

// done stops the ticking, clears the line and returns the ticking
// goroutine's panic as an error wrapping kernels.ErrInternal (nil when it
// did not panic or never ran).
func (p *progress) done() error {
	p.mu.Lock()
	if p.stop != nil {
		close(p.stop)
		p.stop = nil
	}
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
	ticks := p.ticks
	p.mu.Unlock()
	if ticks == nil {
		return nil
	}
	if err := ticks.Wait(); err != nil {
		return fmt.Errorf("progress line: %w", err)
	}
	return nil
}
