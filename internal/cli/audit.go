package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/atomicfile"
	"github.com/onnxpe/onnxpe/internal/htmlreport"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/schemes"
	"github.com/onnxpe/onnxpe/passes/work"
	"github.com/onnxpe/onnxpe/verify"
	"github.com/spf13/cobra"
)

type auditOptions struct {
	IO     *IOStreams
	Models []string
	Name   string
	Format string
	JSON   bool
	// formatSet says --format was given (it does not go with --json
	// unless it says json).
	formatSet bool
	Output    string
	Trace     bool
	Require   []string
	Forbid    []string
	MinPos    int
	// AllowUnknown lets policies pass on a model with an unknown finding
	// (they fail closed on one otherwise).
	AllowUnknown bool
	Jobs         int
	// SummaryOnly prints only the summary over the models (table and
	// markdown).
	SummaryOnly bool
	// SARIF and JUnit are the files of --sarif and --junit ("": none).
	SARIF, JUnit string
	ctx          context.Context
	// workerHook (tests) runs on the worker goroutine before each model
	// is audited; loadedHook (tests) is given each model once loaded.
	workerHook func(path string)
	loadedHook func(path string, m *graph.Model)
	// quickProgress (tests) draws the progress line from the start.
	quickProgress bool
}

// auditExitCodes are audit's exit codes (the house's, said for many
// models).
const auditExitCodes = `Exit codes:
  0  every model was audited and every policy holds
  1  a policy failed (--require, --forbid, --max-positions-at-least, or
     an unknown finding under a policy without --allow-unknown) for a
     model that was audited
  2  a model could not be read (missing, truncated, corrupt or unsafe
     file; the others are still audited and reported, and the report
     says which one and why), or a usage error (a bad flag, an argument
     that names no file: nothing is audited or written)
  3  internal error on a model (a bug: please report it); the others are
     still reported
` + exitInterruptedHelp

// NewCmdAudit builds `onnxpe audit`.
func NewCmdAudit(ios *IOStreams) *cobra.Command {
	return newCmdAudit(&auditOptions{IO: ios})
}

func newCmdAudit(opts *auditOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit MODEL|FOLDER|PATTERN...",
		Short: "Find the positional encodings of models: schemes, layers, parameters",
		Long: `Audit reads a model and reports which positional-encoding schemes it uses,
in which attention layers, with which parameters — from the graph alone:
names, producer strings and metadata are never evidence. Candidate
subgraphs are evaluated with onnxpe's kernels on probe positions and the
parameters fitted from the values (RoPE base and scaling rule, ALiBi
slopes, T5 buckets, ...); each finding records the measurement that
confirms it (its evidence). A value the file does not hold (frequencies
given as an input, a cache in absent external data) is reported as null
with a note. The schemes (onnxpe --help says what each is):
` + wrapList(schemeNames, 72) + `

Many models: each argument is a model file (whatever its name), a folder
(every *.onnx file below it, recursively, in lexical order; other files
such as external data and test data, and hidden files and folders, are
not taken for models, nor is a file that a model audited names as its
external data), or a pattern, quoted so that the shell leaves it to
onnxpe ('models/**/*.onnx': * and ? within a name, ** any number of
folders). --jobs models are audited at once (default: the number of
CPUs); memory is that of the models being audited, not of all of them.
On a terminal a progress line on standard error shows how many are done,
the model being audited and the time taken. Each model stands on its
own: one that cannot be read is reported with its error (a row of the
table, an entry {"model", "error": {"kind", "message"}} of the JSON list)
and the others are audited. A summary follows the models: the schemes
with how many models use each, and the params that differ across the
models of a scheme (--summary prints only it).

--json prints one report, or a list of them when the arguments name more
than one file, a folder or a pattern, in the shape of the JSON Schema
passes/report.schema.json (an unreadable model's entry:
internal/cli/reports.schema.json#/$defs/audit_error); --format markdown
prints tables for documents; --format html writes one self-contained
page (no external requests) with plots of what was measured: the
encoding or the RoPE cos/sin as heat maps, RoPE frequencies against the
plain base (the scaling rule), ALiBi slopes, T5 bucket maps and bias
tables, Shaw clipping, relative sinusoid tables, DeBERTa's bucket map,
M-RoPE sections and 2-D RoPE axes, complex-order frequencies, FLOATER's
states, and the scheme of every layer.

Where the audit cannot tell a block's encoding it says unknown, with the
reason (no attention block found, a probe that could not run, position
information that fits no scheme), never a guess; nope is said only of
blocks shown to receive no position information.

Policies for CI: --require and --forbid a scheme, and
--max-positions-at-least N (a learned table or stored cache shorter than N
fails). A violated policy prints the reason and exits 1. Policies fail
closed: a model with an unknown finding fails them (policy "known")
unless --allow-unknown is given. Beside the
report, --sarif FILE writes a SARIF 2.1.0 log (what GitHub code scanning
and CI dashboards read): one result per policy violation and per finding
of scheme unknown (its notes the message), located at the model's file
(a path relative to the working folder, %SRCROOT%); a model that could
not be audited is a notification of the run. --junit FILE writes JUnit
XML: one test case per model and policy (one per model without a
policy), failed when the model breaks it, in error when the model could
not be audited.

` + auditExitCodes,
		Example: `  onnxpe audit model.onnx
  onnxpe audit model.onnx --json
  onnxpe audit models/ --jobs 2
  onnxpe audit 'models/**/*.onnx' --summary
  onnxpe audit models/*.onnx --format markdown -o audit.md
  onnxpe audit model.onnx --format html -o audit.html
  onnxpe audit models/ --require rope --max-positions-at-least 4096
  onnxpe audit models/ --forbid alibi --sarif audit.sarif --junit audit.xml
  onnxpe audit model.onnx --trace`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Models = args
			opts.ctx = cmd.Context()
			opts.formatSet = cmd.Flags().Changed("format")
			return auditRun(opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Format, "format", "table", "output format: table, json, markdown or html")
	f.BoolVar(&opts.JSON, "json", false, "print JSON (same as --format json)")
	f.StringVarP(&opts.Output, "output", "o", "", "write the report to `FILE` instead of standard output")
	f.StringVar(&opts.Name, "name", "", "the report's model field (one model file; default: the path given)")
	f.BoolVar(&opts.Trace, "trace", false, "print why candidates were not matched (near-misses), to standard error")
	f.StringSliceVar(&opts.Require, "require", nil, "fail (exit 1) unless every model uses `SCHEME` (repeatable)")
	f.StringSliceVar(&opts.Forbid, "forbid", nil, "fail (exit 1) if a model uses `SCHEME` (repeatable)")
	f.IntVar(&opts.MinPos, "max-positions-at-least", 0, "fail (exit 1) if a learned table or stored cache has fewer than `N` positions")
	f.BoolVar(&opts.AllowUnknown, "allow-unknown", false, "let policies pass on a model whose audit says unknown (they fail on one otherwise)")
	f.IntVarP(&opts.Jobs, "jobs", "j", 0, "models audited at once (default: the number of CPUs)")
	f.IntVar(&opts.Jobs, "parallel", 0, "models audited at once")
	_ = f.MarkDeprecated("parallel", "use --jobs")
	f.BoolVar(&opts.SummaryOnly, "summary", false, "print only the summary over the models (table and markdown)")
	f.StringVar(&opts.SARIF, "sarif", "", "also write a SARIF 2.1.0 log to `FILE`: a result per policy violation and per finding of scheme unknown")
	f.StringVar(&opts.JUnit, "junit", "", "also write JUnit XML to `FILE`: a test case per model and policy")
	return cmd
}

// wrapList joins words with commas into lines of at most width columns.
func wrapList(words []string, width int) string {
	var lines []string
	line := ""
	for i, w := range words {
		if i < len(words)-1 {
			w += ","
		}
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		line = strings.TrimSpace(line + " " + w)
	}
	return strings.Join(append(lines, line), "\n")
}

// schemeNames are the schemes --require and --forbid take.
var schemeNames = schemes.Names()

// auditResult is the audit of one model: its report, or why there is
// none.
type auditResult struct {
	path string
	// index is the model's place among the files found; given: the file
	// was named on the command line.
	index  int
	given  bool
	report *passes.Report
	// section is the model's part of the HTML page (--format html),
	// drawn on the worker so that the report keeps no evidence.
	section *htmlreport.Section
	trace   []passes.Miss
	warn    bytes.Buffer // load warnings, printed in the order of the models
	// sides are the external data files the model names (cleaned paths).
	sides []string
	err   error
}

// auditFailure is the JSON entry of a model that could not be audited
// (reports.schema.json#/$defs/audit_error).
type auditFailure struct {
	Model string           `json:"model"`
	Error auditFailureBody `json:"error"`
}

type auditFailureBody struct {
	Kind    string `json:"kind"`    // bad_input or internal
	Message string `json:"message"` // the line naming the file and the problem
}

func (r *auditResult) failure() *auditFailure {
	return &auditFailure{Model: r.path, Error: auditFailureBody{Kind: exitKinds[exitCode(r.err)], Message: oneLine(r.err.Error())}}
}

// failureText is why the model could not be audited, without its path in
// front (the table says it).
func (r *auditResult) failureText() string {
	msg := oneLine(r.err.Error())
	if exitCode(r.err) == ExitInternal {
		msg = "internal error (a bug in onnxpe): " + msg
	}
	return strings.TrimPrefix(msg, r.path+": ")
}

func auditRun(opts *auditOptions) error {
	if opts.JSON {
		if opts.formatSet && opts.Format != "json" {
			return badInput("audit: --json is --format json; it does not go with --format %s", opts.Format)
		}
		opts.Format = "json"
	}
	switch opts.Format {
	case "table", "json", "markdown", "html":
	default:
		return badInput("audit: --format must be table, json, markdown or html, not %q", opts.Format)
	}
	if opts.SummaryOnly && opts.Format != "table" && opts.Format != "markdown" {
		return badInput("audit: --summary is for the table and markdown, not --format %s", opts.Format)
	}
	for _, s := range append(slices.Clone(opts.Require), opts.Forbid...) {
		if !slices.Contains(schemeNames, s) {
			return badInput("audit: unknown scheme %q (one of %s)", s, strings.Join(schemeNames, ", "))
		}
	}
	if opts.MinPos < 0 {
		return badInput("audit: --max-positions-at-least must not be negative")
	}
	if opts.Jobs < 0 {
		return badInput("audit: --jobs must not be negative (0: the number of CPUs)")
	}
	files, many, err := expandModels(opts.Models)
	if err != nil {
		return err
	}
	if opts.Name != "" && many {
		return badInput("audit: --name applies to one model file, not %d arguments or a folder or pattern", len(opts.Models))
	}
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.path
	}
	outs := map[string]string{}
	for _, o := range []struct{ flag, path string }{{"-o", opts.Output}, {"--sarif", opts.SARIF}, {"--junit", opts.JUnit}} {
		if o.path == "" {
			continue
		}
		if err := checkOutputFile(o.flag, o.path, paths...); err != nil {
			return err
		}
		for flag, p := range outs {
			if p == o.path || sameFile(p, o.path) {
				return badInput("%s %s is also %s: give each output its own file", o.flag, o.path, flag)
			}
		}
		outs[o.flag] = o.path
	}
	results, err := auditModels(opts, files)
	if err != nil {
		return err
	}
	results = withoutSideFiles(results)
	for _, r := range results {
		_, _ = opts.IO.ErrOut.Write(r.warn.Bytes())
	}
	if !many && results[0].err != nil {
		return results[0].err
	}
	if opts.Trace {
		for _, r := range results {
			for _, m := range r.trace {
				fmt.Fprintf(opts.IO.ErrOut, "trace: %s: %s at %s: %s\n", r.path, m.Rule, m.At, m.Reason)
			}
		}
	}
	var buf bytes.Buffer
	switch opts.Format {
	case "json":
		if err := writeAuditJSON(&buf, results, many); err != nil {
			return err
		}
	case "markdown":
		writeAuditMarkdown(&buf, results, many, opts.SummaryOnly)
	case "html":
		if err := writeAuditHTML(&buf, results, many); err != nil {
			return err
		}
	default:
		writeAuditTable(&buf, results, many, opts.SummaryOnly)
	}
	if opts.Output != "" {
		if err := commit(opts.ctx, opts.Output, func() error { return atomicfile.WriteFile(opts.Output, buf.Bytes()) }); err != nil {
			return badInput("%s: %v", opts.Output, err)
		}
	} else if _, err := opts.IO.Out.Write(buf.Bytes()); err != nil {
		return err
	}
	violations := policyViolations(opts, results)
	outcome := auditOutcome(results, violations)
	if err := writeCIFiles(opts, results, violations, exitCode(outcome)); err != nil {
		return err
	}
	return outcome
}

// auditOutcome is the audit's error, by the exit code it gives: an
// internal error on a model (3), a model that could not be read (2), a
// policy that failed (1). Its one line says what failed, model by model.
func auditOutcome(results []*auditResult, violated []violation) error {
	violations := make([]string, len(violated))
	for i, v := range violated {
		violations[i] = v.Message
	}
	var internal, unread []string
	var firstInternal error
	for _, r := range results {
		if r.err == nil {
			continue
		}
		if exitCode(r.err) == ExitInternal {
			internal = append(internal, oneLine(r.err.Error()))
			firstInternal = cmp.Or(firstInternal, r.err)
		} else {
			unread = append(unread, oneLine(r.err.Error()))
		}
	}
	var parts []string
	if len(internal) > 0 {
		parts = append(parts, fmt.Sprintf("%s of %d failed with an internal error: %s", count(len(internal), "model"), len(results), strings.Join(internal, "; ")))
	}
	if len(unread) > 0 {
		parts = append(parts, fmt.Sprintf("%s of %d could not be read: %s", count(len(unread), "model"), len(results), strings.Join(unread, "; ")))
	}
	if len(violations) > 0 {
		parts = append(parts, fmt.Sprintf("%s: %s", count(len(violations), "policy violation"), strings.Join(violations, "; ")))
	}
	msg := "audit: " + strings.Join(parts, "; and ")
	switch {
	case len(internal) > 0:
		return &wrappedError{msg: msg, err: firstInternal}
	case len(unread) > 0:
		return badInput("%s", msg)
	case len(violations) > 0:
		return &checkFailed{msg: strings.Join(violations, "; ")}
	}
	return nil
}

// wrappedError is an error with its own message that unwraps to another
// (the first model's internal error, whose stack ONNXPE_DEBUG prints).
type wrappedError struct {
	msg string
	err error
}

func (e *wrappedError) Error() string { return e.msg }
func (e *wrappedError) Unwrap() error { return e.err }

// count is "1 model", "2 models".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// withoutSideFiles leaves out the files found in folders or by patterns
// that an audited model names as its external data: they are its
// weights, not models.
func withoutSideFiles(results []*auditResult) []*auditResult {
	sides := map[string]bool{}
	for _, r := range results {
		for _, s := range r.sides {
			sides[s] = true
		}
	}
	if len(sides) == 0 {
		return results
	}
	var out []*auditResult
	for _, r := range results {
		if r.given || !sides[absClean(r.path)] {
			out = append(out, r)
		}
	}
	return out
}

func absClean(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// auditModels audits every model, --jobs at once, with a progress line on
// a terminal. A model whose audit panics gets an error wrapping
// kernels.ErrInternal; a panic elsewhere on a worker goroutine comes back
// as the error (the process does not crash). An interrupt stops the
// workers before their next model.
func auditModels(opts *auditOptions, files []auditFile) ([]*auditResult, error) {
	results := make([]*auditResult, len(files))
	workers := opts.Jobs
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, len(files)))
	prog := newProgress(opts.IO)
	prog.label, prog.sinceStart = "audit", true
	prog.on = prog.on && len(files) > 1
	if opts.quickProgress {
		prog.delay = 0
	}
	prog.ticking()
	var mu sync.Mutex
	started, done := 0, 0
	step := func(path string, finished bool) {
		mu.Lock()
		defer mu.Unlock()
		if finished {
			done++
		} else {
			started++
		}
		prog.update(verify.Progress{Done: done, Total: len(files), Step: path})
	}
	// Every job is queued first: a worker that ends early leaves the
	// others to take the rest, and nothing waits on it.
	jobs := make(chan int, len(files))
	for i := range files {
		jobs <- i
	}
	close(jobs)
	var g kernels.Group
	for range workers {
		g.Go(func() error {
			for i := range jobs {
				if opts.ctx != nil && opts.ctx.Err() != nil {
					return nil
				}
				f := files[i]
				step(f.path, false)
				if opts.workerHook != nil {
					opts.workerHook(f.path)
				}
				if f.err != nil {
					results[i] = &auditResult{path: f.path, index: i, given: f.given, err: f.err}
				} else {
					results[i] = auditOne(opts, f, i)
				}
				step(f.path, true)
			}
			return nil
		})
	}
	err := g.Wait()
	if perr := prog.done(); err == nil {
		err = perr
	}
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if opts.ctx != nil && opts.ctx.Err() != nil {
		return nil, opts.ctx.Err()
	}
	return results, nil
}

// auditOne audits the index-th model. What it returns holds no part of
// the model: the report's evidence is dropped (it is drawn first when the
// page is HTML), so that memory is that of the models being audited.
func auditOne(opts *auditOptions, f auditFile, index int) (res *auditResult) {
	path := f.path
	res = &auditResult{path: path, index: index, given: f.given}
	defer func() {
		if r := recover(); r != nil {
			res.report, res.section = nil, nil
			res.err = fmt.Errorf("%s: audit: %w", path, kernels.Recovered(r))
		}
	}()
	// A model published without its weights is still audited: what the
	// absent file holds is reported as null.
	m, err := loadModelWith(&res.warn, path, graph.LoadOptions{AllowMissingExternal: true})
	if err != nil {
		res.err = err
		return res
	}
	if opts.loadedHook != nil {
		opts.loadedHook(path, m)
	}
	for _, v := range m.Graph.Initializers {
		e := v.Const.External()
		if e == nil {
			continue
		}
		side := absClean(filepath.Join(filepath.Dir(path), e.Location))
		if !slices.Contains(res.sides, side) {
			res.sides = append(res.sides, side)
		}
	}
	warnMissingExternal(&res.warn, path, m, "values stored in it are reported as null")
	name := path
	if opts.Name != "" {
		name = opts.Name
	}
	rep, ctx, err := audit.AuditModel(m, name, passes.Options{Trace: opts.Trace})
	if err != nil {
		if errors.Is(err, work.ErrModel) {
			res.err = badInput("%s: %v", path, err)
		} else {
			res.err = fmt.Errorf("%s: %w", path, err)
		}
		return res
	}
	if ctx != nil {
		res.trace = ctx.Trace()
	}
	if opts.Format == "html" {
		res.section = htmlreport.NewSection(index, rep)
	}
	for _, fd := range rep.Findings {
		fd.Evidence = nil
	}
	res.report = rep
	return res
}

// policy is one of the policies the command line sets: require or forbid
// a scheme, or a least number of positions.
type policy struct {
	// Flag is the flag (require, forbid, max-positions-at-least) and Arg
	// its value (the scheme, the number).
	Flag, Arg string
	scheme    string
	minPos    int
}

func (p policy) String() string { return strings.TrimSpace(p.Flag + " " + p.Arg) }

// policies are the policies of the options, in the order of the flags.
func (opts *auditOptions) policies() []policy {
	var ps []policy
	for _, s := range opts.Require {
		ps = append(ps, policy{Flag: "require", Arg: s, scheme: s})
	}
	for _, s := range opts.Forbid {
		ps = append(ps, policy{Flag: "forbid", Arg: s, scheme: s})
	}
	if opts.MinPos > 0 {
		ps = append(ps, policy{Flag: "max-positions-at-least", Arg: fmt.Sprint(opts.MinPos), minPos: opts.MinPos})
	}
	if len(ps) > 0 && !opts.AllowUnknown {
		// A policy cannot hold on what the audit cannot read.
		ps = append(ps, policy{Flag: "known"})
	}
	return ps
}

// violation is a policy a model breaks; Finding is the finding that
// breaks it (nil for a required scheme the model lacks).
type violation struct {
	Policy  policy
	Model   string // the report's model field
	Path    string // the file
	Finding *passes.Finding
	Message string
}

// check lists how the report r of the file path breaks p.
func (p policy) check(path string, r *passes.Report) []violation {
	var out []violation
	switch p.Flag {
	case "require":
		if !slices.Contains(r.Schemes, p.scheme) {
			out = append(out, violation{p, r.Model, path, nil, fmt.Sprintf("%s: required scheme %s not found (found %s)", r.Model, p.scheme, strings.Join(r.Schemes, ", "))})
		}
	case "forbid":
		if slices.Contains(r.Schemes, p.scheme) {
			var found *passes.Finding
			for _, f := range r.Findings {
				if f.Scheme == p.scheme {
					found = f
					break
				}
			}
			out = append(out, violation{p, r.Model, path, found, fmt.Sprintf("%s: forbidden scheme %s found", r.Model, p.scheme)})
		}
	case "known":
		for _, f := range r.Findings {
			if f.Scheme == unknownScheme {
				where := ""
				if len(f.Layers) > 0 {
					where = fmt.Sprintf(" of layers %s", passes.LayerRanges(f.Layers, "-", ","))
				}
				out = append(out, violation{p, r.Model, path, f, fmt.Sprintf("%s: the audit cannot tell the encoding%s (unknown: %v); policies fail on it unless --allow-unknown", r.Model, where, f.Params.Map()["reason"])})
			}
		}
	case "max-positions-at-least":
		for _, f := range r.Findings {
			if f.Params == nil {
				continue
			}
			mp, ok := f.Params.Map()["max_positions"].(int)
			if ok && mp < p.minPos {
				out = append(out, violation{p, r.Model, path, f, fmt.Sprintf("%s: %s in layers %v holds %d positions, fewer than %d", r.Model, f.Scheme, f.Layers, mp, p.minPos)})
			}
		}
	}
	return out
}

// policyViolations lists the policies the audited models break, model by
// model.
func policyViolations(opts *auditOptions, results []*auditResult) []violation {
	var out []violation
	for _, res := range results {
		if res.report == nil {
			continue
		}
		for _, p := range opts.policies() {
			out = append(out, p.check(res.path, res.report)...)
		}
	}
	return out
}

// writeAuditJSON prints the report of one model, or the list of entries
// (reports, and the errors of the models that could not be audited).
func writeAuditJSON(w io.Writer, results []*auditResult, many bool) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if !many {
		return enc.Encode(results[0].report)
	}
	entries := make([]any, len(results))
	for i, r := range results {
		if r.err != nil {
			entries[i] = r.failure()
		} else {
			entries[i] = r.report
		}
	}
	return enc.Encode(entries)
}

func writeAuditHTML(w io.Writer, results []*auditResult, many bool) error {
	var js bytes.Buffer
	if err := writeAuditJSON(&js, results, many); err != nil {
		return err
	}
	sections := make([]*htmlreport.Section, len(results))
	for i, r := range results {
		if r.err != nil {
			sections[i] = htmlreport.FailedSection(r.index, r.path, r.failureText())
		} else {
			sections[i] = r.section
		}
	}
	opts := htmlreport.Options{Generator: "onnxpe " + readVersion().Version}
	if many {
		opts.Summary = summarize(results)
	}
	return htmlreport.WriteSections(w, sections, bytes.TrimSpace(js.Bytes()), opts)
}

// paramParts are the key=value pairs of the params, sorted by key.
func paramParts(f *passes.Finding) []string {
	if f.Params == nil {
		return nil
	}
	m := f.Params.Map()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		b, _ := json.Marshal(m[k])
		parts = append(parts, k+"="+string(b))
	}
	return parts
}

// paramLines wraps the params to lines of about width characters, between
// pairs or after a comma of a long list.
func paramLines(f *passes.Finding, width int) []string {
	var lines []string
	cur := ""
	for _, p := range paramParts(f) {
		// A pair longer than a line (a list) continues the line and is
		// broken after commas.
		if cur != "" && len(cur)+1+len(p) > width && len(p) <= width {
			lines = append(lines, cur)
			cur = ""
		}
		if cur != "" {
			cur += " "
		}
		cur += p
		for len(cur) > width {
			cut := strings.LastIndex(cur[:width], ",")
			if cut < 0 {
				break
			}
			lines = append(lines, cur[:cut+1])
			cur = cur[cut+1:]
		}
	}
	if cur != "" || len(lines) == 0 {
		lines = append(lines, cur)
	}
	return lines
}

// writeAuditTable prints each model's findings (or why it could not be
// audited) and, for many models, the summary over them.
func writeAuditTable(out io.Writer, results []*auditResult, many, summaryOnly bool) {
	if !summaryOnly {
		for i, res := range results {
			if i > 0 {
				fmt.Fprintln(out)
			}
			if res.err != nil {
				fmt.Fprintf(out, "%s: could not be audited: %s\n", res.path, res.failureText())
				continue
			}
			writeReportTable(out, res.report)
		}
	}
	if many {
		if !summaryOnly {
			fmt.Fprintln(out)
		}
		writeSummaryTable(out, results)
	}
}

func writeReportTable(out io.Writer, r *passes.Report) {
	fmt.Fprintf(out, "%s: %s (%d attention layers)\n", r.Model, strings.Join(r.Schemes, ", "), len(r.Layers))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEME\tLAYERS\tFUSED\tNODES\tPARAMS")
	for _, f := range r.Findings {
		lines := paramLines(f, 72)
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%s\n", f.Scheme, layersWhere(f), f.Fused, len(f.Nodes), lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(tw, "\t\t\t\t  %s\n", l)
		}
	}
	tw.Flush()
	for _, f := range r.Findings {
		for _, n := range f.Notes {
			fmt.Fprintf(out, "note (%s): %s\n", f.Scheme, n)
		}
	}
}

// layersWhere is a finding's layers, with the graph it lives in when a
// generation op runs it ("2-3 in BeamSearch_0/decoder").
func layersWhere(f *passes.Finding) string {
	if f.Subgraph == "" {
		return layerRange(f.Layers)
	}
	return layerRange(f.Layers) + " in " + f.Subgraph
}

// writeSummaryTable prints a row per model, the schemes with how many
// models use each, and the params that differ across the models of a
// scheme.
func writeSummaryTable(out io.Writer, results []*auditResult) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tSCHEMES\tLAYERS\tFINDINGS")
	for _, res := range results {
		if r := res.report; r != nil {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", r.Model, cmp.Or(strings.Join(r.Schemes, ","), "-"), len(r.Layers), len(r.Findings))
		} else {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\n", res.path, "(could not be audited)")
		}
	}
	tw.Flush()
	s := summarize(results)
	fmt.Fprintln(out)
	fmt.Fprintln(out, summaryCounts(s))
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEME\tMODELS\tFINDINGS")
	for _, c := range s.Schemes {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", c.Scheme, c.Models, c.Findings)
	}
	tw.Flush()
	if len(s.Differ) == 0 {
		for _, c := range s.Schemes {
			if c.Models > 1 {
				fmt.Fprintln(out, "\nno param differs across the models of a scheme")
				break
			}
		}
		return
	}
	fmt.Fprintln(out, "\nparams that differ across the models of a scheme (models with each value):")
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEME\tPARAM\tVALUES")
	for _, d := range s.Differ {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", d.Scheme, d.Param, valuesText(d.Values, false))
	}
	tw.Flush()
}

// summaryCounts is the summary's first line: "7 models: 6 audited, 1
// could not be audited".
func summaryCounts(s *htmlreport.Summary) string {
	if s.Failed == 0 {
		return fmt.Sprintf("%s audited", count(s.Models, "model"))
	}
	return fmt.Sprintf("%s: %d audited, %d could not be audited", count(s.Models, "model"), s.Models-s.Failed, s.Failed)
}

// maxValues is how many values of a param the summary lists; maxValueLen
// how long a value may be printed.
const (
	maxValues   = 4
	maxValueLen = 24
)

// valuesText lists a param's values with their model counts: "10000 (3),
// 500000 (1)", long values cut, more than maxValues said as "+N more".
func valuesText(vs []htmlreport.ValueCount, md bool) string {
	var parts []string
	for i, v := range vs {
		if i == maxValues {
			parts = append(parts, fmt.Sprintf("+%d more", len(vs)-maxValues))
			break
		}
		s := v.Value
		if md {
			s = "`" + strings.ReplaceAll(s, "|", "\\|") + "`"
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", s, v.Models))
	}
	return strings.Join(parts, ", ")
}

// summarize counts the schemes of the audited models and lists the params
// that take more than one value across the models of a scheme (a model
// with two findings of a scheme counts for both values; a finding
// without the param counts as "(absent)"). Values are JSON, cut to
// maxValueLen characters.
func summarize(results []*auditResult) *htmlreport.Summary {
	s := &htmlreport.Summary{Models: len(results)}
	type key struct{ scheme, param string }
	models := map[string]int{}
	findings := map[string]int{}
	keys := map[string]map[string]bool{}        // scheme -> params
	values := map[key]map[string]map[int]bool{} // value -> models having it
	for _, res := range results {
		r := res.report
		if r == nil {
			s.Failed++
			continue
		}
		seen := map[string]bool{}
		for _, f := range r.Findings {
			findings[f.Scheme]++
			if !seen[f.Scheme] {
				seen[f.Scheme] = true
				models[f.Scheme]++
			}
			if keys[f.Scheme] == nil {
				keys[f.Scheme] = map[string]bool{}
			}
			keys[f.Scheme]["fused"] = true
			if f.Params != nil {
				for k := range f.Params.Map() {
					keys[f.Scheme][k] = true
				}
			}
		}
	}
	for i, res := range results {
		r := res.report
		if r == nil {
			continue
		}
		for _, f := range r.Findings {
			m := map[string]any{}
			if f.Params != nil {
				m = f.Params.Map()
			}
			m["fused"] = f.Fused
			for k := range keys[f.Scheme] {
				v := "(absent)"
				if x, ok := m[k]; ok {
					b, _ := json.Marshal(x)
					v = string(b)
				}
				if r := []rune(v); len(r) > maxValueLen {
					v = string(r[:maxValueLen-1]) + "…"
				}
				kk := key{f.Scheme, k}
				if values[kk] == nil {
					values[kk] = map[string]map[int]bool{}
				}
				if values[kk][v] == nil {
					values[kk][v] = map[int]bool{}
				}
				values[kk][v][i] = true
			}
		}
	}
	for sc, n := range models {
		s.Schemes = append(s.Schemes, htmlreport.SchemeCount{Scheme: sc, Models: n, Findings: findings[sc]})
	}
	sort.Slice(s.Schemes, func(i, j int) bool {
		a, b := s.Schemes[i], s.Schemes[j]
		return a.Models > b.Models || a.Models == b.Models && a.Scheme < b.Scheme
	})
	for _, c := range s.Schemes {
		if c.Models < 2 {
			continue
		}
		params := make([]string, 0, len(keys[c.Scheme]))
		for k := range keys[c.Scheme] {
			params = append(params, k)
		}
		sort.Strings(params)
		for _, k := range params {
			vs := values[key{c.Scheme, k}]
			if len(vs) < 2 {
				continue
			}
			d := htmlreport.ParamValues{Scheme: c.Scheme, Param: k}
			for v, ms := range vs {
				d.Values = append(d.Values, htmlreport.ValueCount{Value: v, Models: len(ms)})
			}
			sort.Slice(d.Values, func(i, j int) bool {
				a, b := d.Values[i], d.Values[j]
				return a.Models > b.Models || a.Models == b.Models && a.Value < b.Value
			})
			s.Differ = append(s.Differ, d)
		}
	}
	return s
}

// writeAuditMarkdown prints each model's findings as a table and, for
// many models, the summary first.
func writeAuditMarkdown(out io.Writer, results []*auditResult, many, summaryOnly bool) {
	if many {
		fmt.Fprintln(out, "# Positional-encoding audit")
		fmt.Fprintln(out)
		writeSummaryMarkdown(out, results)
	}
	if summaryOnly {
		return
	}
	for i, res := range results {
		if i > 0 || many {
			fmt.Fprintln(out)
		}
		if res.err != nil {
			fmt.Fprintf(out, "## `%s`\n\nCould not be audited: %s\n", res.path, res.failureText())
			continue
		}
		writeReportMarkdown(out, res.report)
	}
}

func writeSummaryMarkdown(out io.Writer, results []*auditResult) {
	fmt.Fprintln(out, "| model | schemes | layers | findings |")
	fmt.Fprintln(out, "|---|---|---|---|")
	for _, res := range results {
		if r := res.report; r != nil {
			fmt.Fprintf(out, "| `%s` | %s | %d | %d |\n", r.Model, strings.Join(r.Schemes, ", "), len(r.Layers), len(r.Findings))
		} else {
			fmt.Fprintf(out, "| `%s` | could not be audited | - | - |\n", res.path)
		}
	}
	s := summarize(results)
	fmt.Fprintf(out, "\n%s.\n\n", summaryCounts(s))
	fmt.Fprintln(out, "| scheme | models | findings |")
	fmt.Fprintln(out, "|---|---|---|")
	for _, c := range s.Schemes {
		fmt.Fprintf(out, "| %s | %d | %d |\n", c.Scheme, c.Models, c.Findings)
	}
	if len(s.Differ) > 0 {
		fmt.Fprintln(out, "\nParams that differ across the models of a scheme (models with each value):")
		fmt.Fprintln(out)
		fmt.Fprintln(out, "| scheme | param | values |")
		fmt.Fprintln(out, "|---|---|---|")
		for _, d := range s.Differ {
			fmt.Fprintf(out, "| %s | `%s` | %s |\n", d.Scheme, d.Param, valuesText(d.Values, true))
		}
	}
}

func writeReportMarkdown(out io.Writer, r *passes.Report) {
	fmt.Fprintf(out, "## `%s`\n\n", r.Model)
	fmt.Fprintf(out, "Schemes: %s; %d attention layers", strings.Join(r.Schemes, ", "), len(r.Layers))
	if runs := passes.SchemeRuns(r.Layers, "-"); runs != "" {
		fmt.Fprintf(out, " (%s)", runs)
	}
	fmt.Fprintln(out, ".")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| scheme | layers | fused | nodes | params |")
	fmt.Fprintln(out, "|---|---|---|---|---|")
	for _, f := range r.Findings {
		// Each pair in code, so that markdown leaves its _ and * alone.
		var ps []string
		for _, p := range paramParts(f) {
			ps = append(ps, "`"+strings.ReplaceAll(p, "|", "\\|")+"`")
		}
		fmt.Fprintf(out, "| %s | %s | %v | %d | %s |\n", f.Scheme, layersWhere(f), f.Fused, len(f.Nodes), strings.Join(ps, " "))
	}
	first := true
	for _, f := range r.Findings {
		for _, n := range f.Notes {
			if first {
				fmt.Fprint(out, "\nNotes:\n\n")
				first = false
			}
			fmt.Fprintf(out, "- %s: %s\n", f.Scheme, n)
		}
	}
}
