package rewrite

import (
	"errors"
	"fmt"
	"strings"

	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/work"
)

// ErrUnchanged is what a rewrite of one finding returns when the model
// holds the encoding as the rewrite would write it already (wrapped with
// what the model does): the pass notes it and goes on.
var ErrUnchanged = errors.New("nothing to rewrite")

// Unchanged is an ErrUnchanged saying what the model does.
func Unchanged(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnchanged, fmt.Sprintf(format, args...))
}

// Findings is one rewrite pass over a detector's findings: the skeleton
// every rewrite pass runs (Rewrite.Findings).
type Findings struct {
	// Pass and Scheme name the change in the report.
	Pass, Scheme string
	// Detect is the detector whose findings the pass rewrites; Want,
	// when set, the findings it takes (fused ones are never taken).
	Detect *passes.Pass[[]*passes.Finding]
	Want   func(*passes.Finding) bool
	// Do rewrites one finding: an ErrRewrite leaves it with the reason,
	// an ErrUnchanged with a note, any other error stops the pass.
	Do func(w *work.Work, f *passes.Finding, ch *Change) error
	// After, when set, runs once the findings are done (before the dead
	// code of the pass is removed).
	After func(ch *Change) error
}

// Findings runs the skeleton of a rewrite pass: every finding of
// spec.Detect it takes is rewritten, and the layers of those rewritten
// are the change's.
func (r *Rewrite) Findings(c *passes.Context, spec Findings) (*Change, error) {
	w := work.Of(c)
	ch := r.Begin(spec.Pass, spec.Scheme)
	defer r.End(ch)
	for _, f := range passes.Result(c, spec.Detect) {
		if f.Fused || spec.Want != nil && !spec.Want(f) {
			continue
		}
		err := spec.Do(w, f, ch)
		switch {
		case err == nil:
			ch.Layers = append(ch.Layers, f.Layers...)
		case errors.Is(err, ErrUnchanged):
			ch.Note("layers %v: %s", f.Layers, strings.TrimPrefix(err.Error(), ErrUnchanged.Error()+": "))
		case errors.Is(err, ErrRewrite):
			ch.Skip(f, "%s", Reason(err))
		default:
			return ch, err
		}
	}
	if spec.After != nil {
		if err := spec.After(ch); err != nil {
			return ch, err
		}
	}
	return ch, nil
}

// MaxPositions is the number of positions of the tables and caches the
// rewrites store (--max-positions, else DefaultMaxPositions).
func (r *Rewrite) MaxPositions() int {
	if r.Opts.MaxPositions > 0 {
		return r.Opts.MaxPositions
	}
	return passes.DefaultMaxPositions
}
