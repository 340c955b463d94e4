package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/atomicfile"
	"github.com/onnxpe/onnxpe/internal/htmlreport"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
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
	Parallel  int
	ctx       context.Context
	// workerHook (tests) runs on the worker goroutine before each model
	// is audited.
	workerHook func(path string)
}

// NewCmdAudit builds `onnxpe audit`.
func NewCmdAudit(ios *IOStreams) *cobra.Command {
	return newCmdAudit(&auditOptions{IO: ios})
}

func newCmdAudit(opts *auditOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit MODEL...",
		Short: "Find the positional encodings of models: schemes, layers, parameters",
		Long: `Audit reads a model and reports which positional-encoding schemes it uses
(sinusoidal, learned_absolute, rope with its multimodal and 2-D forms,
alibi, t5_relative_bias, relative_clipped, relative_sinusoidal of
Transformer-XL and XLNet, disentangled of DeBERTa, complex_order,
floater, nope), in which attention layers, with which
parameters — from the graph alone: names, producer strings and metadata
are never evidence. Candidate subgraphs are evaluated with onnxpe's
kernels on probe positions and the parameters fitted from the values
(RoPE base and scaling rule, ALiBi slopes, T5 buckets, ...). A value the
file does not hold (frequencies given as an input, a cache in absent
external data) is reported as null with a note.

Several models are audited in parallel; on a terminal a progress bar is
shown. --json prints one report (or an array of reports) in the shape of
the JSON Schema passes/report.schema.json; --format markdown prints
tables for documents; --format html writes one self-contained page (no
external requests) with plots of what was measured: the encoding or the
RoPE cos/sin as heat maps, RoPE frequencies against the plain base (the
scaling rule), ALiBi slopes, T5 bucket maps and bias tables, Shaw
clipping, relative sinusoid tables, DeBERTa's bucket map, M-RoPE sections
and 2-D RoPE axes, complex-order frequencies, FLOATER's states, and the
scheme of every layer.

Policies for CI: --require and --forbid a scheme, and
--max-positions-at-least N (a learned table or stored cache shorter than N
fails). A violated policy prints the reason and exits 1.

` + exitCodesHelp,
		Example: `  onnxpe audit model.onnx
  onnxpe audit model.onnx --json
  onnxpe audit models/*.onnx --format markdown -o audit.md
  onnxpe audit model.onnx --format html -o audit.html
  onnxpe audit model.onnx --require rope --max-positions-at-least 4096
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
	f.StringVar(&opts.Name, "name", "", "the report's model field (one model; default: the path given)")
	f.BoolVar(&opts.Trace, "trace", false, "print why candidates were not matched (near-misses), to standard error")
	f.StringSliceVar(&opts.Require, "require", nil, "fail (exit 1) unless every model uses `SCHEME` (repeatable)")
	f.StringSliceVar(&opts.Forbid, "forbid", nil, "fail (exit 1) if a model uses `SCHEME` (repeatable)")
	f.IntVar(&opts.MinPos, "max-positions-at-least", 0, "fail (exit 1) if a learned table or stored cache has fewer than `N` positions")
	f.IntVar(&opts.Parallel, "parallel", 0, "models audited at once (default: the number of CPUs)")
	return cmd
}

var schemeNames = []string{passes.Sinusoidal, passes.LearnedAbsolute, passes.RoPEScheme, passes.ALiBi,
	passes.T5RelativeBias, passes.RelativeClipped, passes.NoPE,
	passes.RelativeSinusoidal, passes.Disentangled, passes.ComplexOrder, passes.Floater}

// auditResult is the audit of one model.
type auditResult struct {
	path   string
	report *passes.Report
	trace  []passes.Miss
	warn   bytes.Buffer // load warnings, printed in the order of the models
	err    error
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
	for _, s := range append(slices.Clone(opts.Require), opts.Forbid...) {
		if !slices.Contains(schemeNames, s) {
			return badInput("audit: unknown scheme %q (one of %s)", s, strings.Join(schemeNames, ", "))
		}
	}
	if opts.Name != "" && len(opts.Models) > 1 {
		return badInput("audit: --name applies to one model, not %d", len(opts.Models))
	}
	if opts.MinPos < 0 {
		return badInput("audit: --max-positions-at-least must not be negative")
	}
	if opts.Parallel < 0 {
		return badInput("audit: --parallel must not be negative (0: the number of CPUs)")
	}
	if opts.Output != "" {
		if err := checkOutputFile("-o", opts.Output, opts.Models...); err != nil {
			return err
		}
	}
	results, err := auditModels(opts)
	if err != nil {
		return err
	}
	for i := range results {
		_, _ = opts.IO.ErrOut.Write(results[i].warn.Bytes())
	}
	for _, r := range results {
		if r.err != nil {
			return r.err
		}
	}
	if opts.Trace {
		for _, r := range results {
			for _, m := range r.trace {
				fmt.Fprintf(opts.IO.ErrOut, "trace: %s: %s at %s: %s\n", r.path, m.Rule, m.At, m.Reason)
			}
		}
	}
	var buf bytes.Buffer
	reports := make([]*passes.Report, len(results))
	for i, r := range results {
		reports[i] = r.report
	}
	switch opts.Format {
	case "json":
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		var v any = reports
		if len(reports) == 1 {
			v = reports[0]
		}
		if err := enc.Encode(v); err != nil {
			return err
		}
	case "markdown":
		writeAuditMarkdown(&buf, reports)
	case "html":
		if err := htmlreport.Write(&buf, reports, htmlreport.Options{Generator: "onnxpe " + readVersion().Version}); err != nil {
			return err
		}
	default:
		writeAuditTable(&buf, reports)
	}
	if opts.Output != "" {
		if err := commit(opts.ctx, opts.Output, func() error { return atomicfile.WriteFile(opts.Output, buf.Bytes()) }); err != nil {
			return badInput("%s: %v", opts.Output, err)
		}
	} else if _, err := opts.IO.Out.Write(buf.Bytes()); err != nil {
		return err
	}
	if v := policyViolations(opts, reports); len(v) > 0 {
		return &checkFailed{msg: strings.Join(v, "; ")}
	}
	return nil
}

// auditModels audits every model, several at once, with a progress bar on
// a terminal. A model whose audit panics gets an error wrapping
// kernels.ErrInternal; a panic elsewhere on a worker goroutine comes back
// as the error (the process does not crash).
func auditModels(opts *auditOptions) ([]*auditResult, error) {
	results := make([]*auditResult, len(opts.Models))
	workers := opts.Parallel
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(opts.Models))
	var bar *progressbar.ProgressBar
	if opts.IO.IsTerminal && len(opts.Models) > 1 {
		bar = progressbar.NewOptions(len(opts.Models), progressbar.OptionSetWriter(opts.IO.ErrOut),
			progressbar.OptionSetDescription("auditing"), progressbar.OptionShowCount(),
			progressbar.OptionClearOnFinish())
	}
	// Every job is queued first: a worker that ends early leaves the
	// others to take the rest, and nothing waits on it.
	jobs := make(chan int, len(opts.Models))
	for i := range opts.Models {
		jobs <- i
	}
	close(jobs)
	var g kernels.Group
	for range workers {
		g.Go(func() error {
			for i := range jobs {
				if opts.workerHook != nil {
					opts.workerHook(opts.Models[i])
				}
				results[i] = auditOne(opts, opts.Models[i])
				if bar != nil {
					_ = bar.Add(1)
				}
			}
			return nil
		})
	}
	err := g.Wait()
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return results, nil
}

func auditOne(opts *auditOptions, path string) (res *auditResult) {
	res = &auditResult{path: path}
	defer func() {
		if r := recover(); r != nil {
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
	missing := map[string]bool{}
	for _, v := range m.Graph.Initializers {
		if e := v.Const.External(); e != nil && e.Missing() && !missing[e.Location] {
			missing[e.Location] = true
			fmt.Fprintf(&res.warn, "onnxpe: warning: %s: external data file %q is missing: values stored in it are reported as null\n", path, e.Location)
		}
	}
	name := path
	if opts.Name != "" {
		name = opts.Name
	}
	rep, ctx, err := passes.AuditModel(m, name, passes.Options{Trace: opts.Trace})
	if err != nil {
		if errors.Is(err, passes.ErrModel) {
			res.err = badInput("%s: %v", path, err)
		} else {
			res.err = fmt.Errorf("%s: %w", path, err)
		}
		return res
	}
	res.report = rep
	if ctx != nil {
		res.trace = ctx.Trace()
	}
	return res
}

// policyViolations lists the policies a set of reports breaks.
func policyViolations(opts *auditOptions, reports []*passes.Report) []string {
	var out []string
	for _, r := range reports {
		for _, s := range opts.Require {
			if !slices.Contains(r.Schemes, s) {
				out = append(out, fmt.Sprintf("%s: required scheme %s not found (found %s)", r.Model, s, strings.Join(r.Schemes, ", ")))
			}
		}
		for _, s := range opts.Forbid {
			if slices.Contains(r.Schemes, s) {
				out = append(out, fmt.Sprintf("%s: forbidden scheme %s found", r.Model, s))
			}
		}
		if opts.MinPos > 0 {
			for _, f := range r.Findings {
				if f.Params == nil {
					continue
				}
				mp, ok := f.Params.Map()["max_positions"].(int)
				if ok && mp < opts.MinPos {
					out = append(out, fmt.Sprintf("%s: %s in layers %v holds %d positions, fewer than %d", r.Model, f.Scheme, f.Layers, mp, opts.MinPos))
				}
			}
		}
	}
	return out
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

func writeAuditTable(out io.Writer, reports []*passes.Report) {
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(out)
		}
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
	if len(reports) > 1 {
		fmt.Fprintln(out)
		writeSummary(out, reports, false)
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

func writeSummary(out io.Writer, reports []*passes.Report, md bool) {
	if md {
		fmt.Fprintln(out, "| model | schemes | layers | findings |")
		fmt.Fprintln(out, "|---|---|---|---|")
		for _, r := range reports {
			fmt.Fprintf(out, "| `%s` | %s | %d | %d |\n", r.Model, strings.Join(r.Schemes, ", "), len(r.Layers), len(r.Findings))
		}
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tSCHEMES\tLAYERS\tFINDINGS")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", r.Model, strings.Join(r.Schemes, ","), len(r.Layers), len(r.Findings))
	}
	tw.Flush()
}

func writeAuditMarkdown(out io.Writer, reports []*passes.Report) {
	if len(reports) > 1 {
		fmt.Fprintln(out, "# Positional-encoding audit")
		fmt.Fprintln(out)
		writeSummary(out, reports, true)
		fmt.Fprintln(out)
	}
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(out)
		}
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
}
