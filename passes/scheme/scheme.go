// Package scheme says what a positional-encoding scheme is to the
// commands: each package below passes/scheme/ declares one Scheme value
// (its name, what it is, how it is detected, rewritten, extended and
// lowered, how its code is generated), and passes/schemes lists them
// all, once. The audit's detectors, rewrite's passes and --passes,
// extend's dispatch, unfuse, codegen's emitters, the HTML report's plots
// and colours and the report schema's scheme names are all read from that
// list.
//
// It is not a registry: nothing registers itself; the list is written
// out in passes/schemes, as go vet's main lists its analyzers.
package scheme

import (
	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/rewrite"
)

// Scheme describes one scheme of the vocabulary (DESIGN.md).
type Scheme struct {
	// Name is the scheme's name in reports ("rope", "learned_absolute").
	Name string
	// Doc says what the scheme is, first line a summary.
	Doc string
	// Color is the scheme's in the HTML report's layer map and plots.
	Color string
	// Rank orders the schemes of two findings that reach one layer: the
	// layer gets the lower (relative schemes before absolute ones).
	Rank int
	// Params is a zero value of the scheme's params (the keys the report
	// prints for it).
	Params passes.Params
	// Tables says how the tables the scheme's rewrite and extension store
	// grow with the number of positions n (what the memory budget is
	// checked against before they are computed).
	Tables Growth
	// Detect finds the scheme's encodings: its findings, those of fused
	// ops after the others. Nil when ByAudit.
	Detect *passes.Pass[[]*passes.Finding]
	// Relative: the scheme's encodings change the scores of the blocks
	// they reach (a rotation of q and k, a bias or a term of the scores):
	// the audit confirms its findings by the blocks' score test
	// (attn.Scores: with q and k held fixed, the scores depend on key −
	// query alone), and drops a block whose scores do not change with the
	// positions.
	Relative bool
	// Measure is the scheme's own measurement of a finding, read from its
	// Evidence: the finding's evidence where the score test does not
	// confirm it (an absolute encoding, a fused op, a 2-D rotation).
	Measure func(f *passes.Finding) *passes.Measured
	// ByAudit: the audit makes the scheme's findings itself, for the blocks
	// no detector's finding reaches (nope, unknown): it has no detector,
	// code generator or plots.
	ByAudit bool
	// Rewrites are the scheme's rewrite passes, in the order they run,
	// with the names --passes gives them.
	Rewrites []Rewrite
	// Extend says how extend treats the scheme's findings (nil: computed
	// for any position, nothing to enlarge).
	Extend *rewrite.Extender
	// Lower lowers the scheme's fused ops to primitive ops (rewrite
	// --unfuse): false when n is none of them. Nil when the scheme has
	// no fused op onnxpe lowers.
	Lower func(r *rewrite.Rewrite, n *graph.Node) (bool, error)
	// Codegen generates the scheme's code (onnxpe codegen; nil: none).
	Codegen *emit.Generator
	// Plots draws a finding's evidence for the HTML report (nil: no
	// plots); a figure it cannot draw is nil.
	Plots func(ids *plot.IDs, f *passes.Finding) []*plot.Figure
}

// Growth is how a scheme's stored tables grow with the number of
// positions n.
type Growth int

const (
	// ByPosition: a row per position (n rows of the scheme's width).
	ByPosition Growth = iota
	// ByDistance: a row per relative distance (2n rows).
	ByDistance
	// ByPair: a bias per head and pair of positions when evaluated
	// pairwise (n x n per head), else a row of heads per position.
	ByPair
)

// Rewrite is a rewrite pass, the name --passes gives it and what rewrite's
// help says it does (wrapped at 62 columns).
type Rewrite struct {
	Name string
	Pass *passes.Pass[*rewrite.Change]
	Help string
}
