package rewrite

import (
	"errors"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/work"
)

// findingsPass runs the rewrite do on every finding of det that want accepts
// (nil: every one): a finding do refuses (ErrRewrite) is skipped with the
// reason, any other error stops the pass.
func (r *Rewrite) FindingsPass(c *passes.Context, pass, scheme string, det *passes.Pass[[]*passes.Finding], want func(*passes.Finding) bool, do func(*work.Work, *passes.Finding, *Change) error) (*Change, error) {
	w := work.Of(c)
	ch := r.Begin(pass, scheme)
	defer r.End(ch)
	for _, f := range passes.Result(c, det) {
		if want != nil && !want(f) {
			continue
		}
		if err := do(w, f, ch); err != nil {
			if errors.Is(err, ErrRewrite) {
				ch.Skip(f, "%s", Reason(err))
				continue
			}
			return ch, err
		}
		ch.Layers = append(ch.Layers, f.Layers...)
	}
	return ch, nil
}

func (r *Rewrite) MaxPositions() int {
	if r.Opts.MaxPositions > 0 {
		return r.Opts.MaxPositions
	}
	return passes.DefaultMaxPositions
}
