package audit

import (
	"fmt"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/scheme/nope"
	"github.com/onnxpe/onnxpe/passes/scheme/unknown"
	"github.com/onnxpe/onnxpe/passes/work"
)

// verdict is what the audit can say of a block no detector's finding
// reaches: nope, with the measurement that shows it receives no position
// information, or unknown, with the reason.
type verdict struct {
	params   passes.Params
	note     string
	measured *passes.Measured
}

// unclaimed gives every block no finding reaches a nope or an unknown
// finding, and the model an unknown one when it has no block and no
// finding: nope only where it is measured.
func unclaimed(c *passes.Context, blocks []*attn.Block, scheme map[int]string, all []*passes.Finding) []*passes.Finding {
	if len(blocks) == 0 && len(all) == 0 {
		return []*passes.Finding{{Scheme: unknown.Name, Params: &unknown.Params{Reason: unknown.NoAttention},
			Notes:    []string{"no attention block was found (no Softmax over the product of two values that depend on the tokens, no fused attention op) and no detector found an encoding: the audit cannot tell what the model does with positions"},
			Measured: &passes.Measured{Test: passes.TestNoAttention, Summary: "no attention block was found"}}}
	}
	w := work.Of(c)
	entries := unexplainedEntries(w, passes.Result(c, attn.Entries), all)
	temps := passes.Result(c, nope.Temperatures)
	var out []*passes.Finding
	for _, b := range blocks {
		if _, ok := scheme[b.Index]; ok {
			continue
		}
		v := judge(c, w, b, entries)
		if v.params.Scheme() == nope.Name {
			p := v.params.(*nope.Params)
			if p.Temperature = temps[b.Index]; p.Temperature != nil {
				v.measured = temperatureMeasured(v.measured)
			}
		}
		scheme[b.Index] = v.params.Scheme()
		f := findingFor(out, v)
		if f == nil {
			f = &passes.Finding{Scheme: v.params.Scheme(), Params: v.params, Measured: v.measured}
			if v.note != "" {
				f.Notes = []string{v.note}
			}
			out = append(out, f)
		} else {
			mergeMeasured(f.Measured, v.measured)
		}
		f.Layers = append(f.Layers, b.Index)
		if p, ok := v.params.(*nope.Params); ok && p.Temperature != nil {
			if bs := passes.Result(c, attn.Sides)[b]; bs != nil && bs.Q != nil {
				f.Nodes = w.SortOrig(append(f.Nodes, w.OrigNames(append(bs.Q.Nodes, w.Cone(bs.Q.Pos...)...))...))
			}
		}
	}
	return out
}

// findingFor is the finding of out the verdict joins: the same params and
// note.
func findingFor(out []*passes.Finding, v verdict) *passes.Finding {
	for _, f := range out {
		note := ""
		if len(f.Notes) > 0 {
			note = f.Notes[0]
		}
		if passes.SameParams(f.Params, v.params) && note == v.note && f.Measured.Test == v.measured.Test {
			return f
		}
	}
	return nil
}

// judge decides a block no finding reaches.
func judge(c *passes.Context, w *work.Work, b *attn.Block, entries []*attn.Entry) verdict {
	for _, e := range entries {
		if slices.Contains(e.Layers, b.Index) {
			return entryVerdict(w, e)
		}
	}
	if b.Fused != nil {
		return fusedVerdict(c, w, b)
	}
	st := passes.Result(c, attn.Scores)[b]
	switch {
	case st == nil:
		bs := passes.Result(c, attn.Sides)[b]
		why := "the block's q and k could not be traced to their projections"
		if bs != nil {
			why += ": " + strings.TrimSpace(bs.QWhy+" "+bs.KWhy)
		}
		return probeFailed(why)
	case st.Why != "":
		return probeFailed(st.Why)
	case st.Uniform():
		return verdict{params: &nope.Params{}, measured: &passes.Measured{Test: passes.TestUniformScores,
			Summary: fmt.Sprintf("with q and k held fixed over %d positions, every query's scores are equal over the keys it sees (within 16 rounding steps of the scores' type), and no value that changes with the position joins the activations before the block", st.Len),
			Change:  passes.Sig3(st.Change), Residual: passes.Sig3(st.Change)}}
	}
	what := "not as a function of key − query alone"
	if st.Relative() {
		what = "as a function of key − query"
	}
	return verdict{
		params: &unknown.Params{Reason: unknown.UnexplainedScores},
		note:   "with q and k held fixed, the block's scores change with the keys' positions (" + what + "), but no scheme onnxpe reads explains them",
		measured: &passes.Measured{Test: passes.TestRelativeScores,
			Summary: fmt.Sprintf("with q and k held fixed over %d positions, a query's scores differ over its keys (%s)", st.Len, what),
			Change:  passes.Sig3(st.Change), Residual: passes.Sig3(st.Residual)},
	}
}

func probeFailed(why string) verdict {
	return verdict{params: &unknown.Params{Reason: unknown.ProbeFailed},
		note:     "the block's scores could not be probed, so the audit cannot show that it receives no position information: " + why,
		measured: &passes.Measured{Test: passes.TestProbeFailed, Summary: "the probe of the block's scores could not run: " + why}}
}

func entryVerdict(w *work.Work, e *attn.Entry) verdict {
	at := w.OrigName(e.Node)
	if e.Why != "" {
		return verdict{params: &unknown.Params{Reason: unknown.ProbeFailed, At: at},
			note:     fmt.Sprintf("a value that does not depend on the tokens (%s) joins the activations at %s and could not be evaluated: %s", w.OrigValue(e.Value), at, e.Why),
			measured: &passes.Measured{Test: passes.TestProbeFailed, Summary: "the probe of " + w.OrigValue(e.Value) + " could not run: " + e.Why}}
	}
	return verdict{params: &unknown.Params{Reason: unknown.UnexplainedInput, At: at},
		note: fmt.Sprintf("a value that changes with the position (%s, by up to %.3g between positions) joins the activations at %s, and no scheme onnxpe reads explains it", w.OrigValue(e.Value), e.Change, at),
		measured: &passes.Measured{Test: passes.TestPositionRows,
			Summary: fmt.Sprintf("the rows of %s differ between positions by up to %.3g", w.OrigValue(e.Value), e.Change),
			Change:  passes.Sig3(e.Change)}}
}

// fusedVerdict reads a fused attention op by its contract: nope when it
// takes no position input, no rotation and no bias of the scores, and no
// value that changes with the position enters its q and k.
func fusedVerdict(c *passes.Context, w *work.Work, b *attn.Block) verdict {
	n := b.Fused
	spec, known := work.FusedSpecs[work.OpKey(n)]
	at := w.OrigName(n)
	var carries []string
	if !known {
		carries = append(carries, "its contract is not one onnxpe holds")
	}
	if spec.Rotary && n.AttrInt("do_rotary", 0) != 0 {
		carries = append(carries, "do_rotary")
	}
	if spec.PosIDs >= 0 && spec.PosIDs < len(n.Inputs()) && n.Input(spec.PosIDs) != nil {
		carries = append(carries, "a position_ids input")
	}
	if len(b.Bias) > 0 {
		carries = append(carries, "an attention bias input")
	}
	if bs := passes.Result(c, attn.Sides)[b]; bs != nil {
		for _, s := range []*attn.Side{bs.Q, bs.K} {
			if s != nil && len(s.Pos) > 0 {
				carries = append(carries, "position-dependent values in its q or k ("+w.OrigValue(s.Pos[0])+")")
				break
			}
		}
	}
	if len(carries) > 0 {
		return verdict{params: &unknown.Params{Reason: unknown.UnexplainedScores},
			note: fmt.Sprintf("the fused attention op %s takes %s, which no finding explains", n.OpType, strings.Join(carries, ", ")),
			measured: &passes.Measured{Test: passes.TestFusedContract,
				Summary: fmt.Sprintf("%s (%s) takes %s", at, n.OpType, strings.Join(carries, ", "))}}
	}
	return verdict{params: &nope.Params{}, measured: &passes.Measured{Test: passes.TestFusedContract,
		Summary: fmt.Sprintf("the fused attention op %s takes no position input, rotation or attention bias, and no value that changes with the position joins the activations before it", n.OpType)}}
}

// unexplainedEntries are the entries no finding's nodes hold.
func unexplainedEntries(w *work.Work, entries []*attn.Entry, all []*passes.Finding) []*attn.Entry {
	held := map[string]bool{}
	for _, f := range all {
		if f.Subgraph == "" {
			for _, n := range f.Nodes {
				held[n] = true
			}
		}
	}
	var out []*attn.Entry
	for _, e := range entries {
		if !held[w.OrigName(e.Node)] {
			out = append(out, e)
		}
	}
	return out
}

// mergeMeasured widens a finding's measurement by another block's.
func mergeMeasured(m, o *passes.Measured) {
	if m == nil || o == nil {
		return
	}
	if o.Change != nil && (m.Change == nil || *o.Change > *m.Change) {
		m.Change = o.Change
	}
	if o.Residual != nil && (m.Residual == nil || *o.Residual > *m.Residual) {
		m.Residual = o.Residual
	}
}

// temperatureMeasured is the measurement of a nope block whose q is
// scaled by the position: each query's scores are still equal over its
// keys.
func temperatureMeasured(m *passes.Measured) *passes.Measured {
	out := *m
	out.Summary = strings.Replace(out.Summary, "every query's scores are equal over the keys it sees", "every query's scores are equal over the keys it sees (q scaled by its position: temperature tuning)", 1)
	return &out
}
