package extend

import (
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme/nope"
	"github.com/onnxpe/onnxpe/passes/schemes"
)

// ExtendModel gives m a longer context: it audits m, checks the request
// against what the audit found, and rewrites the encodings of a copy so
// that it supports opts.To positions (RoPE frequencies and caches under a
// scaling rule, learned tables by hierarchical decomposition, sinusoidal
// tables and ALiBi constants continued with their own formula, masks and
// position buffers fixed at export widened). Requests the model does not
// allow return ErrExtend; the checks (equal where it must be, the
// reference, the runs at N) are the caller's (the command uses verify).
func ExtendModel(m *graph.Model, opts rewrite.ExtendOptions) (*rewrite.Extended, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	rep, ctx, err := audit.AuditModel(m, "", passes.Options{})
	if err != nil {
		return nil, err
	}
	return Extend(rep, ctx, opts)
}

// Extend is ExtendModel of a model audited already: rep and ctx are its
// audit's (audit.AuditModel), which is not run again.
func Extend(rep *passes.Report, ctx *passes.Context, opts rewrite.ExtendOptions) (*rewrite.Extended, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Run(rewrite.Edit); err != nil {
		return nil, err
	}
	r := rewrite.Of(ctx)
	x := &rewrite.Extended{M: r.M, Audit: rep, Opts: opts, Ctx: ctx, R: r, Report: &rewrite.ExtendReport{NewMax: opts.To}}
	if err := extend(x); err != nil {
		return nil, err
	}
	if err := r.Finish(); err != nil {
		return nil, err
	}
	return x, nil
}

// extend plans and applies the extension of every finding.
func extend(x *rewrite.Extended) error {
	rep, o := x.Report, x.Opts
	var fs []*passes.Finding
	for _, f := range x.Audit.Findings {
		if f.Subgraph != "" {
			return rewrite.ExtendErr("the %s encoding of layers %v is inside %s (a generation op's graph): extend the decoder model it runs", f.Scheme, f.Layers, f.Subgraph)
		}
		if f.Scheme != nope.Name {
			fs = append(fs, f)
		}
	}
	for _, f := range fs {
		if e := extenderOf(f.Scheme); e != nil && e.Check != nil {
			if err := e.Check(o); err != nil {
				return err
			}
		}
	}
	// A method of a scheme the model does not have.
	for _, sc := range schemes.All {
		e, scheme := sc.Extend, sc.Name
		if e == nil {
			continue
		}
		if slices.Contains(e.Methods, o.Method) && !slices.ContainsFunc(fs, func(f *passes.Finding) bool { return f.Scheme == scheme }) {
			return rewrite.ExtendErr("--method %s %s (schemes: %s)", o.Method, e.Absent, strings.Join(x.Audit.Schemes, ", "))
		}
	}
	slices.SortStableFunc(fs, func(a, b *passes.Finding) int {
		return slices.Index(schemes.Names(), a.Scheme) - slices.Index(schemes.Names(), b.Scheme)
	})
	// The largest length the model supports now: the smallest bound of
	// its encodings.
	bound := func(n int, from string) {
		if n > 0 && (rep.OldMax == nil || n < *rep.OldMax) {
			rep.OldMax, rep.OldMaxFrom = passes.Ptr(n), from
		}
	}
	var items []*rewrite.ExtendItem
	rules := false
	for _, f := range fs {
		plan := rewrite.PlanComputed
		if e := extenderOf(f.Scheme); e != nil {
			plan = e.Plan
		}
		it, err := plan(x, f)
		if err != nil {
			return err
		}
		if it == nil {
			continue
		}
		it.Finding = f
		items = append(items, it)
		rules = rules || it.Rule != nil
		if it.OldMax != nil {
			bound(*it.OldMax, it.OldMaxFrom)
		}
	}
	if o.OriginalMax > 0 && !rules {
		bound(o.OriginalMax, "--original-max-positions")
	}
	if rep.OldMax != nil && o.To <= *rep.OldMax {
		return rewrite.ExtendErr("--to %d is not longer than what the model supports already (%d positions: %s)", o.To, *rep.OldMax, rep.OldMaxFrom)
	}
	if rep.OldMax == nil {
		rep.OldMaxFrom = "no table or constant of the graph bounds the positions"
	}
	rep.Items = items
	for _, it := range items {
		if e := extenderOf(it.Scheme); e != nil && e.Apply != nil {
			if err := e.Apply(x, it); err != nil {
				return err
			}
		}
	}
	if rep.OldMax != nil {
		if err := widenBounded(x, *rep.OldMax); err != nil {
			return err
		}
	}
	x.ForgetShapes()
	return nil
}

// extenderOf is the extension of the scheme named name (nil: computed for
// any position).
func extenderOf(name string) *rewrite.Extender {
	if sc := schemes.Lookup(name); sc != nil {
		return sc.Extend
	}
	return nil
}
