package audit

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/rewrite"
)

// RewriteModel runs the given rewrite passes (and what they require) on m
// and returns the rewritten copy; m is not changed.
func RewriteModel(m *graph.Model, opts passes.Options, ps ...*passes.Pass[*rewrite.Change]) (*rewrite.Rewrite, *passes.Context, error) {
	opts.AuditGraph = AuditModel
	ctx, err := passes.Run(m, opts, append([]passes.Analyzer{rewrite.Edit}, passes.Analyzers(ps...)...)...)
	if err != nil {
		return nil, ctx, err
	}
	r := passes.Result(ctx, rewrite.Edit)
	if err := r.Finish(); err != nil {
		return nil, ctx, err
	}
	return r, ctx, nil
}
