package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/extend"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
	"github.com/onnxpe/onnxpe/passes/work"
	"github.com/onnxpe/onnxpe/verify"
	"github.com/spf13/cobra"
)

type extendOptions struct {
	IO      *IOStreams
	In, Out string
	Ext     rewrite.ExtendOptions
	DryRun  bool
	JSON    bool
	// Overwrite is --overwrite-side-files.
	Overwrite bool
	Seed      uint64
	Threads   int
	ctx       context.Context

	// tamper, set by tests, changes the extended model before it is
	// checked (to check that an extension that breaks a check is not
	// written).
	tamper func(*graph.Model)
	// noORT, set by tests, runs the checks as a build without ONNX
	// Runtime would.
	noORT bool
	// quickProgress, set by tests, draws the progress line from the
	// start instead of after a second.
	quickProgress bool
}

// NewCmdExtend builds `onnxpe extend`.
func NewCmdExtend(ios *IOStreams) *cobra.Command {
	opts := &extendOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "extend IN -o OUT --to N [flags]",
		Short: "Give a model a longer context by rewriting its positional encoding, checked before writing",
		Long: `Extend rewrites the positional encoding the audit finds so that the model
accepts N positions (--to), checks the result, and writes it to OUT.

RoPE (--method, required):
  linear       frequencies divided by the factor (position interpolation)
  ntk          NTK-aware: base · factor^(d/(d-2)), d the rotary dim
  dynamic-ntk  the NTK base follows the largest position L + 1 of every
               call: max(1, factor·L/orig - (factor-1))^(d/(d-2)); stored
               tables and RotaryEmbedding caches become their computation
               for every call (GroupQueryAttention's are refused)
  yarn         YaRN: the frequencies ramped between kept and divided by
               factor from floor(c(--beta-fast 32)) to ceil(c(--beta-slow 1)),
               c(b) = d·ln(orig/(2π·b))/(2·ln base); cos and sin times
               --attention-factor (default 0.1·ln(factor) + 1)
  llama3       Llama 3.1's bands: wavelengths below orig/--high-freq-factor
               (4) kept, above orig/--low-freq-factor (1) divided by the
               factor, smoothed between
  The formulas and defaults are Hugging Face transformers'
  (modeling_rope_utils). --factor defaults to N / orig; orig is
  --original-max-positions, else the rows of the model's cos/sin tables,
  else (with --replace-scaling replace) the original length of the rule the
  model has; a model whose RoPE is computed in the graph must be told.
  The frequencies the graph multiplies positions by are rewritten (a
  constant of the same shape, or their computation for dynamic-ntk), and
  the stored cos/sin tables and the caches of fused RotaryEmbedding and
  GroupQueryAttention are recomputed in float64 for positions 0..N-1. A
  model that already has a scaling rule is refused unless
  --replace-scaling says how: replace (drop it: the rule applies to the
  plain frequencies of the fitted base) or compose (apply it on top).
Learned absolute tables: --method hierarchical (the default) with
  --alpha A (0.4): position i·n + j (0-based) gets A·u_i + (1-A)·u_j with
  u_i = (p_i - A·p_0)/(1 - A) (Su, 2020: kexue.fm/archives/7947), for N up
  to n²; the first n rows stay the trained table bit for bit (a table
  stored transposed, [dim, positions], is extended along its positions and
  written back transposed).
Sinusoidal tables, ALiBi bias constants: continued to N with the
  model's own formula (measured from it). Encodings computed for any
  position (sinusoids in the graph, T5 buckets, ALiBi from the mask) need
  nothing. Other constants read at positions that hold n entries (causal
  masks, 0, 1, 2, ... buffers) are continued too, and the bounds fixed at
  export (a Slice start computed from n) widened.

Checks, always run before writing (nothing is written when one fails):
  unchanged   learned and stored tables, masks: the extended model gives
              exactly the original's outputs on every input the original
              accepts (verify's sweep up to the original maximum)
  reference   RoPE rules: the extended model equals a reference built from
              the original (the same weights) whose rotations read cos/sin
              computed from the rule's published formula (its scaling of
              each frequency applied to the model's own, the angles rounded
              as the model computes them; verify's sweep up to N; for
              dynamic-ntk at lengths orig and N, their last 8 positions when
              the model takes position ids or a KV cache)
  audit       RoPE rules: onnxpe audit of the output reports the new
              scaling and its parameters
  runs at N   the extended model runs at N positions in onnxpe's executor
              and in ONNX Runtime (builds with the ort tag; other builds
              say the check was not run)
--dry-run prints the plan and writes nothing; --json prints the report.
On a terminal, a line on stderr says what runs (planning, each check, the
runs at N, the write) and for how long; a run at N = 16384 positions takes
minutes and memory for the model's attention over N x N scores.

` + sideFilesHelp + `

Exit codes:
  0  extended, checked and written (or nothing needed to change)
  1  a check failed: nothing was written
  2  usage error, unreadable input, a request the model does not allow
     (N not above its maximum, a method that does not fit its encoding, a
     factor of 1 or less or not finite, a scaling rule already there, an
     input whose sequence axis is fixed at the old maximum, N over the
     memory budget)
  3  internal error (a bug: please report it)
` + exitInterruptedHelp,
		Example: `  onnxpe extend llama.onnx -o llama_8k.onnx --to 8192 --method yarn --original-max-positions 2048
  onnxpe extend llama.onnx -o llama_8k.onnx --to 8192 --method llama3 --original-max-positions 2048 --high-freq-factor 4
  onnxpe extend llama31.onnx -o out.onnx --to 262144 --method yarn --replace-scaling replace --original-max-positions 8192
  onnxpe extend gpt2.onnx -o gpt2_4k.onnx --to 4096 --method hierarchical --alpha 0.4
  onnxpe extend marian.onnx -o marian_2k.onnx --to 2048 --dry-run --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.In = args[0]
			opts.ctx = cmd.Context()
			return extendRun(opts)
		},
	}
	f := cmd.Flags()
	e := &opts.Ext
	f.StringVarP(&opts.Out, "output", "o", "", "write the extended model to `OUT`")
	f.IntVar(&e.To, "to", 0, "the new maximum number of positions `N`")
	f.StringVar(&e.Method, "method", "", "linear, ntk, dynamic-ntk, yarn, llama3 (RoPE) or hierarchical (learned tables)")
	f.Float64Var(&e.Factor, "factor", 0, "the RoPE rule's factor (default: N / the original maximum)")
	f.IntVar(&e.OriginalMax, "original-max-positions", 0, "the positions the model was trained for (default: its tables, or its rule's)")
	f.Float64Var(&e.LowFreqFactor, "low-freq-factor", 0, "llama3: low_freq_factor (default 1)")
	f.Float64Var(&e.HighFreqFactor, "high-freq-factor", 0, "llama3: high_freq_factor (default 4)")
	f.Float64Var(&e.BetaFast, "beta-fast", 0, "yarn: beta_fast (default 32)")
	f.Float64Var(&e.BetaSlow, "beta-slow", 0, "yarn: beta_slow (default 1)")
	f.Float64Var(&e.AttentionFactor, "attention-factor", 0, "yarn: attention_factor (default 0.1·ln(factor) + 1)")
	f.StringVar(&e.ReplaceScaling, "replace-scaling", "", "a model that has a scaling rule: replace (drop it) or compose (apply the new rule on top)")
	f.Float64Var(&e.Alpha, "alpha", 0, "hierarchical: alpha (default 0.4)")
	f.BoolVar(&opts.DryRun, "dry-run", false, "print the plan; check and write nothing")
	f.BoolVar(&opts.Overwrite, overwriteSideFilesFlag, false, overwriteSideFilesUsage)
	f.BoolVar(&opts.JSON, "json", false, "print JSON")
	f.Uint64Var(&opts.Seed, "seed", 1, "seed of the values the checks synthesise")
	f.IntVar(&opts.Threads, "threads", 0, "goroutines of onnxpe's kernels and ONNX Runtime threads in the checks (0: all cores)")
	return cmd
}

// Check statuses.
const (
	checkPass   = "pass"
	checkFail   = "fail"
	checkNotRun = "not_run"
)

// extendCheck is one check of an extension.
type extendCheck struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Summary string `json:"summary"`
	// Verify holds verify's reports of the comparisons the check ran.
	Verify []*verify.Report `json:"verify,omitempty"`
}

// extendReport is what `onnxpe extend --json` prints.
type extendReport struct {
	Model     string                `json:"model"`
	Output    string                `json:"output,omitempty"`
	DryRun    bool                  `json:"dry_run"`
	Changed   bool                  `json:"changed"`
	Written   bool                  `json:"written"`
	Extension *rewrite.ExtendReport `json:"extension"`
	Checks    []*extendCheck        `json:"checks"`
	Summary   string                `json:"summary"`
}

func extendRun(opts *extendOptions) (err error) {
	ctx := opts.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.Out == "" && !opts.DryRun {
		return badInput("extend: give -o OUT (or --dry-run)")
	}
	if opts.Ext.To <= 0 {
		return badInput("extend: give --to N, the new maximum number of positions")
	}
	if opts.Threads < 0 {
		return badInput("extend: --threads must not be negative (0: all cores)")
	}
	if err := opts.Ext.Validate(); err != nil {
		return badInput("extend %s: %s", opts.In, strings.TrimPrefix(err.Error(), rewrite.ErrExtend.Error()+": "))
	}
	// Long extensions (a model run at 16384 positions takes minutes) say
	// on a terminal what runs and for how long.
	prog := newProgress(opts.IO)
	prog.label = "extend"
	if opts.quickProgress {
		prog.delay = 0
	}
	prog.ticking()
	defer func() {
		// A panic of the ticking goroutine comes back here.
		if perr := prog.done(); err == nil {
			err = perr
		}
	}()
	prog.setPhase("loading " + opts.In)
	m, err := loadModelInto(opts.IO, opts.In, opts.Out, opts.Overwrite)
	if err != nil {
		return err
	}
	prog.setPhase("auditing and planning")
	// The model is audited once: the extension plans from the audit,
	// the unchanged check's hints come from it.
	arep, actx, err := audit.AuditModel(m, opts.In, passes.Options{})
	if err != nil {
		if errors.Is(err, work.ErrModel) {
			return badInput("extend %s: %v", opts.In, err)
		}
		return err
	}
	// What --to N implies, against the memory budget, before planning
	// computes N rows of tables and the checks run N positions.
	if err := checkExtendMemory(m, arep, int64(opts.Ext.To)); err != nil {
		return err
	}
	x, err := extend.Extend(arep, actx, opts.Ext)
	if err != nil {
		if errors.Is(err, rewrite.ErrExtend) || errors.Is(err, rewrite.ErrRewrite) || errors.Is(err, work.ErrModel) {
			return badInput("extend %s: %s", opts.In, strings.TrimPrefix(err.Error(), rewrite.ErrExtend.Error()+": "))
		}
		return err
	}
	if err := checkFixedSequenceInputs(x.M, x.Report.OldMax, opts.Ext.To); err != nil {
		return badInput("extend %s: %v", opts.In, err)
	}
	rep := &extendReport{Model: opts.In, Output: opts.Out, DryRun: opts.DryRun, Changed: x.Report.Changed(), Extension: x.Report, Checks: []*extendCheck{}}
	if opts.DryRun {
		prog.done()
		rep.Summary = "plan only (--dry-run): nothing checked, nothing written"
		return printExtend(opts, rep)
	}
	if err := checkRunAtMemory(m, int64(opts.Ext.To)); err != nil {
		return err
	}
	if opts.tamper != nil {
		opts.tamper(x.M)
	}
	c := &extendChecker{opts: opts, ctx: ctx, orig: m, x: x, prog: prog, hints: verify.HintsFromAudit(arep, actx)}
	failed, err := c.run(rep)
	if err != nil {
		return err
	}
	if failed != nil {
		prog.done()
		rep.Summary = fmt.Sprintf("the %s check failed: %s; nothing written", failed.Name, failed.Summary)
		if err := printExtend(opts, rep); err != nil {
			return err
		}
		return &checkFailed{msg: rep.Summary}
	}
	prog.setPhase("writing " + opts.Out)
	err = commit(ctx, opts.Out, func() error {
		if rep.Changed {
			return saveRewritten(ctx, m, x.M, opts.Out)
		}
		return m.Save(opts.Out, graph.SaveOptions{Context: ctx})
	})
	if err != nil {
		return badInput("%s: %v", opts.Out, err)
	}
	prog.done()
	rep.Written = true
	old := "unbounded"
	if x.Report.OldMax != nil {
		old = fmt.Sprint(*x.Report.OldMax)
	}
	if rep.Changed {
		rep.Summary = fmt.Sprintf("extended %s from %s to %d positions; checks passed; wrote %s", opts.In, old, x.Report.NewMax, opts.Out)
	} else {
		rep.Summary = fmt.Sprintf("nothing to enlarge: %s runs at %d positions as it is (checked); wrote %s unchanged", opts.In, x.Report.NewMax, opts.Out)
	}
	return printExtend(opts, rep)
}

// extendChecker runs the checks of an extension.
type extendChecker struct {
	opts *extendOptions
	ctx  context.Context
	orig *graph.Model
	x    *rewrite.Extended
	prog *progress
	// hints are verify's hints from the audit of the original.
	hints verify.Hints
	// px is the extended model prepared for verify (analysed once, its
	// session kept) for the checks that run it; nil until the first asks.
	px *verify.Prepared
}

// prepared is the extended model analysed for N positions, once per
// command.
func (c *extendChecker) prepared() (*verify.Prepared, error) {
	if c.px == nil {
		px, err := verify.Prepare(c.x.M, verify.Hints{MaxPositions: c.x.Report.NewMax}, c.opts.Seed, c.opts.Threads)
		if err != nil {
			return nil, err
		}
		c.px = px
	}
	return c.px, nil
}

// release closes the extended model's session (its buffers of a run at N
// go back before ONNX Runtime allocates its own).
func (c *extendChecker) release() {
	if c.px != nil {
		c.px.Close()
		c.px = nil
	}
}

func (c *extendChecker) verifyOptions(pathB string) verify.Options {
	return verify.Options{Seed: c.opts.Seed, Threads: c.opts.Threads, PathA: c.opts.In, PathB: pathB, Progress: c.prog.update}
}

// run runs every check; the first that failed is returned (the others
// still run and are reported). err is for errors that are not check
// results (an internal error, a model verify cannot compare).
func (c *extendChecker) run(rep *extendReport) (*extendCheck, error) {
	var steps []func() (*extendCheck, error)
	var names []string
	if len(rope.Rules(c.x)) == 0 {
		steps, names = append(steps, c.unchanged), append(names, "unchanged")
	} else {
		steps, names = append(steps, c.reference, c.audit), append(names, "reference", "audit")
	}
	steps, names = append(steps, c.runsAtN), append(names, "runs_at_n")
	defer c.release()
	var failed *extendCheck
	for i, step := range steps {
		c.prog.setPhase(fmt.Sprintf("check %s (%d/%d)", names[i], i+1, len(steps)))
		ch, err := step()
		if err != nil {
			return nil, err
		}
		rep.Checks = append(rep.Checks, ch)
		if ch.Status == checkFail && failed == nil {
			failed = ch
		}
	}
	return failed, nil
}

// compareErr turns an error of verify.Compare into a check result (the
// extended model does not run) or an error.
func compareErr(ch *extendCheck, err error) (*extendCheck, error) {
	if errors.Is(err, kernels.ErrInternal) {
		return nil, err
	}
	ch.Status, ch.Summary = checkFail, oneLine(err.Error())
	return ch, nil
}

// unchanged: on every input the original accepts (the sweep up to its
// maximum), the extended model gives exactly its outputs.
func (c *extendChecker) unchanged() (*extendCheck, error) {
	ch := &extendCheck{Name: "unchanged"}
	vo := c.verifyOptions("extended " + c.opts.In)
	vo.Hints = c.hints
	if om := c.x.Report.OldMax; om != nil {
		vo.Hints.MaxPositions = *om
	}
	zero := 0.0
	vo.Policy = verify.Policy{Rtol: &zero, Atol: &zero}
	vr, err := verify.Compare(c.ctx, c.orig, c.x.M, vo)
	if err != nil {
		return compareErr(ch, err)
	}
	ch.Verify = []*verify.Report{vr}
	upTo := "the default sweep"
	if om := c.x.Report.OldMax; om != nil {
		upTo = fmt.Sprintf("up to %d positions", *om)
	}
	if !vr.Equal {
		ch.Status, ch.Summary = checkFail, fmt.Sprintf("the extended model differs from %s on inputs it accepts (%s): %s", c.opts.In, upTo, vr.Summary)
		return ch, nil
	}
	ch.Status, ch.Summary = checkPass, fmt.Sprintf("outputs exactly equal to %s's on every input set of the sweep %s (%s)", c.opts.In, upTo, vr.Summary)
	return ch, nil
}

// reference: the extended RoPE model equals the original with cos/sin
// from the rule's published formula.
func (c *extendChecker) reference() (*extendCheck, error) {
	ch := &extendCheck{Name: "reference"}
	n := c.x.Report.NewMax
	dynamic := false
	orig := 0
	for _, it := range rope.Rules(c.x) {
		if it.Rule.Dynamic() {
			dynamic, orig = true, it.Rule.OriginalLength()
		}
	}
	var parts []string
	if !dynamic {
		ref, err := rope.Reference(c.x, 0)
		if err != nil {
			return c.noReference(ch, err)
		}
		px, err := c.prepared()
		if err != nil {
			return compareErr(ch, err)
		}
		vo := c.verifyOptions("reference (" + c.ruleNames() + ")")
		vo.PathA = "extended " + c.opts.In
		vo.Hints.MaxPositions = n
		vo.Prepared = px
		vr, err := verify.Compare(c.ctx, c.x.M, ref, vo)
		if err != nil {
			return compareErr(ch, err)
		}
		ch.Verify = append(ch.Verify, vr)
		if !vr.Equal {
			ch.Status, ch.Summary = checkFail, "the extended model differs from the reference built with the rule: "+vr.Summary
			return ch, nil
		}
		parts = append(parts, vr.Summary)
	} else {
		// A model that takes position ids, or a KV cache, reaches length
		// L with its last few positions (as verify's far set does for
		// static rules): the frequencies at L turn them most, and the
		// quadratic cost of attention over L positions is left to the
		// runs_at_n check. Others run positions 0..L-1.
		px, err := c.prepared()
		if err != nil {
			return compareErr(ch, err)
		}
		a := px.Analysis()
		cache, takesIDs := a.HasCache, false
		for _, in := range a.Inputs {
			takesIDs = takesIDs || in.Role == verify.RolePositionIDs
		}
		for _, L := range slices.Compact([]int{orig, n}) {
			whole := verify.SetSpec{Name: fmt.Sprintf("seq%d", L), Batch: 1, Seq: L, Purpose: "positions 0..L-1"}
			spec := whole
			switch k := 8; {
			case L <= k:
			case takesIDs:
				spec = verify.SetSpec{Name: fmt.Sprintf("last%d", L), Batch: 1, Seq: k, Offset: L - k, Purpose: fmt.Sprintf("positions %d..%d", L-k, L-1)}
			case cache:
				spec = verify.SetSpec{Name: fmt.Sprintf("last%d", L), Batch: 1, Seq: k, Past: L - k, Purpose: fmt.Sprintf("positions %d..%d after a KV cache", L-k, L-1)}
			}
			synth := func(first verify.SetSpec) ([]verify.NamedInputs, error) {
				return px.Synthesize([]verify.SetSpec{
					first,
					{Name: fmt.Sprintf("decode%d", L), Batch: 1, Seq: 1, Past: L - 1, Purpose: "position L-1 after a KV cache"},
				}, c.opts.Seed)
			}
			sets, err := synth(spec)
			if err != nil {
				return compareErr(ch, err)
			}
			if spec.Offset > 0 {
				if _, err := px.Run(sets[0].Inputs); err != nil {
					// A model that reads its table up to its sequence's
					// length refuses positions past it (as the original
					// did): all L.
					if sets, err = synth(whole); err != nil {
						return compareErr(ch, err)
					}
				}
			}
			// Each set against the reference at the length it calls for:
			// its largest position + 1 (position ids need not reach the
			// sequence's end: M-RoPE's image tokens share positions).
			for _, set := range sets {
				Ls := L
				if m := maxPosition(a, set); m >= 0 {
					Ls = m + 1
				}
				ref, err := rope.Reference(c.x, Ls)
				if err != nil {
					return c.noReference(ch, err)
				}
				vo := c.verifyOptions(fmt.Sprintf("reference (%s at length %d)", c.ruleNames(), Ls))
				vo.PathA = "extended " + c.opts.In
				vo.Inputs = []verify.NamedInputs{set}
				vo.Prepared = px
				vr, err := verify.Compare(c.ctx, c.x.M, ref, vo)
				if err != nil {
					return compareErr(ch, err)
				}
				ch.Verify = append(ch.Verify, vr)
				if !vr.Equal {
					ch.Status, ch.Summary = checkFail, fmt.Sprintf("at length %d the extended model differs from the reference built with the rule: %s", Ls, vr.Summary)
					return ch, nil
				}
				parts = append(parts, fmt.Sprintf("%s at length %d: %s", set.Name, Ls, vr.Summary))
			}
		}
	}
	ch.Status = checkPass
	ch.Summary = "equal to the original with cos/sin from the published formula of " + c.ruleNames() + " (" + strings.Join(parts, "; ") + ")"
	return ch, nil
}

// maxPosition is the largest position id a set gives (-1 when the model
// takes none: its positions are counted from the sequence and the cache).
func maxPosition(a *verify.Analysis, set verify.NamedInputs) int {
	m := -1
	if a == nil {
		return m
	}
	for _, in := range a.Inputs {
		if in.Role != verify.RolePositionIDs {
			continue
		}
		if t := set.Inputs[in.Name]; t != nil {
			for _, v := range t.Float64s() {
				m = max(m, int(v))
			}
		}
	}
	return m
}

func (c *extendChecker) noReference(ch *extendCheck, err error) (*extendCheck, error) {
	if errors.Is(err, rope.ErrNoReference) {
		ch.Status, ch.Summary = checkNotRun, strings.TrimPrefix(err.Error(), rope.ErrNoReference.Error()+": ")
		return ch, nil
	}
	return nil, err
}

func (c *extendChecker) ruleNames() string {
	var s []string
	for _, it := range rope.Rules(c.x) {
		if n := it.Rule.String(); !slices.Contains(s, n) {
			s = append(s, n)
		}
	}
	return strings.Join(s, "; ")
}

// audit: onnxpe audit of the extended model reports the rule and its
// parameters.
func (c *extendChecker) audit() (*extendCheck, error) {
	ch := &extendCheck{Name: "audit"}
	rep, _, err := audit.AuditModel(c.x.M, "extended "+c.opts.In, passes.Options{})
	if err != nil {
		if errors.Is(err, work.ErrModel) {
			ch.Status, ch.Summary = checkFail, "the extended model cannot be audited: "+oneLine(err.Error())
			return ch, nil
		}
		return nil, err
	}
	var got []string
	for _, it := range rope.Rules(c.x) {
		var f *passes.Finding
		for _, g := range rep.Findings {
			if g.Scheme == rope.Name && slices.Equal(g.Layers, it.Layers) {
				f = g
			}
		}
		if f == nil {
			ch.Status, ch.Summary = checkFail, fmt.Sprintf("the audit of the extended model finds no RoPE on layers %s", layerRange(it.Layers))
			return ch, nil
		}
		gm := f.Params.Map()
		if it.Expect == nil {
			got = append(got, "layers "+layerRange(it.Layers)+": "+ropeParamString(gm)+" (composed rules: not compared)")
			continue
		}
		want := it.Expect.Map()
		if diff := paramDiff(want, gm); diff != "" {
			if !it.Rule.Equivalent(f.Params) {
				ch.Status, ch.Summary = checkFail, fmt.Sprintf("the audit of the extended model reports, for layers %s, %s", layerRange(it.Layers), diff)
				return ch, nil
			}
			got = append(got, fmt.Sprintf("layers %s: %s (the audit reads %s: a setting that gives the same frequencies, which the graph cannot tell apart)", layerRange(it.Layers), ropeParamString(gm), diff))
			continue
		}
		got = append(got, "layers "+layerRange(it.Layers)+": "+ropeParamString(gm))
	}
	ch.Status, ch.Summary = checkPass, "onnxpe audit reads back the rule: "+strings.Join(got, "; ")
	return ch, nil
}

// paramDiff compares the params the audit reports with those expected
// ("" when they agree; floats to 1e-6 relative).
func paramDiff(want, got map[string]any) string {
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var d []string
	for _, k := range keys {
		if !sameParam(want[k], got[k]) {
			d = append(d, fmt.Sprintf("%s %s (expected %s)", k, jsonish(got[k]), jsonish(want[k])))
		}
	}
	return strings.Join(d, ", ")
}

func sameParam(a, b any) bool {
	fa, oka := toFloat(a)
	fb, okb := toFloat(b)
	if oka && okb {
		return fa == fb || math.Abs(fa-fb) <= 1e-6*math.Max(math.Abs(fa), math.Abs(fb))
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Kind() == reflect.Slice && vb.Kind() == reflect.Slice {
		if va.Len() != vb.Len() {
			return false
		}
		for i := 0; i < va.Len(); i++ {
			if !sameParam(va.Index(i).Interface(), vb.Index(i).Interface()) {
				return false
			}
		}
		return true
	}
	return jsonish(a) == jsonish(b)
}

// toFloat reads a number of any numeric kind.
func toFloat(v any) (float64, bool) {
	if v == nil {
		return 0, false
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	case reflect.Int, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	}
	return 0, false
}

func jsonish(v any) string {
	if v == nil {
		return "null"
	}
	if f, ok := toFloat(v); ok {
		return fmt.Sprint(f)
	}
	return fmt.Sprint(v)
}

// ropeParamString prints the rule's params of a RoPE finding in one line.
func ropeParamString(m map[string]any) string {
	var s []string
	for _, k := range []string{"scaling", "base", "factor", "original_max_positions", "dynamic", "low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow", "attention_factor", "max_positions"} {
		if v, ok := m[k]; ok && v != nil {
			s = append(s, fmt.Sprintf("%s %s", k, jsonish(v)))
		}
	}
	return strings.Join(s, ", ")
}

// runsAtN: the extended model runs N positions in onnxpe's executor and
// in ONNX Runtime, and the two agree.
func (c *extendChecker) runsAtN() (*extendCheck, error) {
	ch := &extendCheck{Name: "runs_at_n"}
	n := c.x.Report.NewMax
	specs := []verify.SetSpec{
		{Name: fmt.Sprintf("seq%d", n), Batch: 1, Seq: n, Purpose: "the new maximum"},
		{Name: fmt.Sprintf("decode%d", n), Batch: 1, Seq: 1, Past: n - 1, Purpose: "the last position after a KV cache"},
	}
	c.prog.update(verify.Progress{Step: fmt.Sprintf("inputs of %d positions", n)})
	px, err := c.prepared()
	var sets []verify.NamedInputs
	var a *verify.Analysis
	if err == nil {
		a = px.Analysis()
		sets, err = px.Synthesize(specs, c.opts.Seed)
	}
	if err != nil {
		if errors.Is(err, kernels.ErrInternal) {
			return nil, err
		}
		ch.Status, ch.Summary = checkFail, fmt.Sprintf("onnxpe's executor cannot run the extended model at %d positions: %s", n, oneLine(err.Error()))
		return ch, nil
	}
	if a != nil && a.FixedSeq > 0 && a.FixedSeq != n {
		ch.Status, ch.Summary = checkFail, fmt.Sprintf("the extended model's inputs fix the sequence at %d", a.FixedSeq)
		return ch, nil
	}
	// ONNX Runtime's run compares with onnxpe's outputs: without it they
	// are not kept (the logits of N positions alone are N x vocabulary).
	withORT := !c.opts.noORT && verify.ORTAvailable() && os.Getenv("ONNXPE_ORT_LIB") != ""
	// Kept for ONNX Runtime's run, they wait in a file; the logits are
	// written there as they are made (a run at N holds them whole
	// otherwise: 1 GB for 8192 positions of 32000 tokens).
	spill := kernels.NewSpill()
	defer spill.Close()
	var names []string
	for i := range sets {
		c.prog.update(verify.Progress{Done: i, Total: len(sets), Step: "onnxpe's executor: " + sets[i].Name})
		out, err := px.RunInto(sets[i].Inputs, spill)
		if err != nil {
			if errors.Is(err, kernels.ErrInternal) {
				return nil, err
			}
			ch.Status, ch.Summary = checkFail, fmt.Sprintf("onnxpe's executor cannot run the extended model on %s: %s", sets[i].Name, oneLine(err.Error()))
			return ch, nil
		}
		if withORT {
			sets[i].Outputs = spill.Outputs(out)
		}
		names = append(names, sets[i].Name)
	}
	goPart := fmt.Sprintf("onnxpe's executor ran %s (%d positions)", strings.Join(names, ", "), n)
	switch {
	case c.opts.noORT || !verify.ORTAvailable():
		ch.Status = checkPass
		ch.Summary = goPart + "; ONNX Runtime check not run: this onnxpe was built without ONNX Runtime (build with CGO_ENABLED=1 go build -tags ort ./cmd/onnxpe, set ONNXPE_ORT_LIB to libonnxruntime.so; make ort installs one)"
		return ch, nil
	case os.Getenv("ONNXPE_ORT_LIB") == "":
		ch.Status = checkPass
		ch.Summary = goPart + "; ONNX Runtime check not run: set ONNXPE_ORT_LIB to libonnxruntime.so (make ort installs one)"
		return ch, nil
	}
	// The session's pool holds the buffers of a run at N (gigabytes of
	// attention scores at 16384 positions): they go back to the system
	// before ONNX Runtime allocates its own (rope_llama at 8192: a peak of
	// 6.1 GB before, 3.4 GB).
	c.release()
	debug.FreeOSMemory()
	vo := c.verifyOptions("")
	vo.PathA = "" // ONNX Runtime opens a file: verify saves the model to a temporary one
	vo.Inputs = sets
	vo.Runtime = verify.RuntimeORT
	vr, err := verify.CompareReference(c.ctx, c.x.M, "onnxpe's executor", vo)
	if err != nil {
		return compareErr(ch, err)
	}
	ch.Verify = []*verify.Report{vr}
	if !vr.Equal {
		ch.Status, ch.Summary = checkFail, goPart+"; ONNX Runtime differs: "+vr.Summary
		return ch, nil
	}
	ch.Status, ch.Summary = checkPass, goPart+"; ONNX Runtime ran them too and agrees ("+vr.Summary+")"
	return ch, nil
}

func printExtend(opts *extendOptions, rep *extendReport) error {
	if opts.JSON {
		return writeJSON(opts.IO, rep)
	}
	w := opts.IO.Out
	x := rep.Extension
	old := "unbounded"
	if x.OldMax != nil {
		old = fmt.Sprint(*x.OldMax)
	}
	fmt.Fprintf(w, "%s: %s -> %d positions (now: %s)\n", rep.Model, old, x.NewMax, x.OldMaxFrom)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEME\tLAYERS\tFORM\tMETHOD\tPARAMS")
	for _, it := range x.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", it.Scheme, layerRange(it.Layers), it.Form, it.Method, ruleParams(it.Params))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, it := range x.Items {
		for _, e := range it.Edits {
			fmt.Fprintf(w, "  %s: %s\n", e.Where, e.What)
		}
		for _, n := range it.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
	if len(x.Bounded) > 0 {
		fmt.Fprintln(w, "other constants read at positions:")
		for _, e := range x.Bounded {
			fmt.Fprintf(w, "  %s: %s\n", e.Where, e.What)
		}
	}
	for _, ch := range rep.Checks {
		fmt.Fprintf(w, "check %-10s %-7s %s\n", ch.Name, ch.Status, ch.Summary)
		if ch.Status == checkFail {
			for _, vr := range ch.Verify {
				if !vr.Equal {
					if err := vr.WriteTable(w); err != nil {
						return err
					}
				}
			}
		}
	}
	_, err := fmt.Fprintln(w, rep.Summary)
	return err
}

// ruleParams prints a rule's parameters compactly.
func ruleParams(m map[string]any) string {
	var keys []string
	for k := range m {
		if k != "method" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var s []string
	for _, k := range keys {
		s = append(s, fmt.Sprintf("%s=%v", k, m[k]))
	}
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, " ")
}

// checkFixedSequenceInputs refuses, while planning, an extension the
// model's inputs cannot take: an integer or bool input (token ids, a
// mask, positions) whose size along an axis is fixed at the old maximum
// (an attention_mask of length 64 for a model of 64 positions) cannot hold
// n positions, and the run at n would fail at the end of the checks.
func checkFixedSequenceInputs(m *graph.Model, oldMax *int, n int) error {
	if oldMax == nil || *oldMax >= n {
		return nil
	}
	for _, v := range kernels.FeedInputs(m) {
		dt := v.Type.ElemType()
		if dt.IsFloat() {
			continue
		}
		dims, ok := v.Type.Shape()
		if !ok {
			continue
		}
		for ax, d := range dims {
			if d.Known && d.Value == int64(*oldMax) {
				return fmt.Errorf("input %q is %v: its axis %d is fixed at %d, the model's maximum, so it cannot take %d positions (export the model with a dynamic sequence axis)", graph.ShortName(v.Name), v.Type, ax, d.Value, n)
			}
		}
	}
	return nil
}
