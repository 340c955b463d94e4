package audit

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/rewrite"
)

// RewriteModel runs the given rewrite passes (and what they require) on m
// and returns the rewritten copy; m is not changed. A command that has
// audited m already rewrites in the audit's context (rewrite.Run).
func RewriteModel(m *graph.Model, opts passes.Options, ps ...*passes.Pass[*rewrite.Change]) (*rewrite.Rewrite, *passes.Context, error) {
	opts.AuditGraph = AuditModel
	ctx, err := passes.Run(m, opts)
	if err != nil {
		return nil, ctx, err
	}
	r, err := rewrite.Run(ctx, ps...)
	return r, ctx, err
}
