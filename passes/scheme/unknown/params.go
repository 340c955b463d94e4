package unknown

import "github.com/onnxpe/onnxpe/passes"

// Name is the scheme's name in reports.
const Name = "unknown"

// The reasons of an unknown finding (the report's params.reason).
const (
	// NoAttention: no attention block was found, and no detector found an
	// encoding.
	NoAttention = "no_attention"
	// ProbeFailed: a probe the audit needed to tell the encoding could not
	// run (a size over the probe limit, an op the kernels cannot run).
	ProbeFailed = "probe_failed"
	// UnexplainedScores: the block's scores change with the positions in a
	// way no scheme onnxpe reads fits.
	UnexplainedScores = "unexplained_scores"
	// UnexplainedInput: a value that changes with the position joins the
	// activations before the block where no scheme onnxpe reads explains
	// it.
	UnexplainedInput = "unexplained_input"
)

// Params are unknown's params: why the audit could not tell, and where.
type Params struct {
	Reason string
	// At names the original node where unexplained position information
	// joins the activations, or whose value could not be probed ("" when
	// the reason is the blocks' own: their layers say which).
	At string
}

func (*Params) Scheme() string { return Name }

func (p *Params) Map() map[string]any {
	return map[string]any{"reason": p.Reason, "at": passes.OptString(optional(p.At))}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
