package sinusoidal

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
	"math"
	"slices"
)

// SinusoidalPass finds sinusoidal tables added to the embeddings.
var Detect = &passes.Pass[[]*passes.Finding]{
	Name: "sinusoidal",
	Doc: `Find sinusoidal position encodings added to the embeddings.

An absolute encoding (the absolute pass) whose rows lie on sin/cos circles
with angles growing linearly with the position is sinusoidal: the layout
(interleaved or [sin|cos]) from which columns pair up, the base and the
denominator (d/2 or d/2-1) from the frequencies, the offset from the
first row's phase. A stored table gives max_positions (its rows),
computed=false and a zeroed padding row; a computed one the exact
arithmetic of its angles. EmbedLayerNormalization's position table is
sinusoidal when its values are.`,
	Requires: []passes.Analyzer{work.Normalize, absolute.Absolute},
	Run: func(c *passes.Context) ([]*passes.Finding, error) {
		w := work.Of(c)
		return absolute.ClaimAbsolute(c, func(e *absolute.Encoding) *passes.Finding { return sinusoidalFinding(w, e) }), nil
	},
}

// sinusoidalFinding is the finding of e when its rows are a sinusoid.
func sinusoidalFinding(w *work.Work, e *absolute.Encoding) *passes.Finding {
	sp := e.Sin
	if sp == nil || e.Unread != "" || !e.Fused && !e.Varies {
		return nil
	}
	ev := e.Evidence
	f := &passes.Finding{Scheme: Name, Layers: e.Layers, Nodes: e.Nodes, Fused: e.Fused, Evidence: ev, Notes: slices.Clone(e.Notes)}
	p := &Params{Layout: sp.Layout, Dim: e.Dim, Computed: e.Table == nil, FreqDenominator: sp.Denom}
	if !math.IsNaN(sp.Base) {
		p.Base = passes.Ptr(sp.Base)
	}
	if sp.Note != "" {
		f.Notes = append(f.Notes, sp.Note)
	}
	if e.Fused {
		ev.Omega = sp.Omega
		p.MaxPositions, p.PositionOffset = passes.Ptr(e.TableRows), passes.Ptr(e.Offset)
		if pad, ok := paddingRow(w, e.Table, 0); ok {
			p.PaddingIdx = passes.Ptr(pad)
		}
		f.Params = p
		return f
	}
	ev.Omega, ev.Pairs = sp.Omega, sp.Pairs
	if e.Table == nil {
		ev.Angles, ev.ExactWhy = sinusoidalExact(w, e.X, *sp, ev.Sample)
		p.PositionOffset = passes.Ptr(sp.Offset)
	} else {
		p.MaxPositions = passes.Ptr(e.TableRows)
		if off, ok, note := absolute.Offset(w, e); ok {
			p.PositionOffset = passes.Ptr(off)
		} else if note != "" {
			f.Notes = append(f.Notes, note)
		}
		if pad, ok := paddingRow(w, e.Table, e.TableAxis); ok {
			p.PaddingIdx = passes.Ptr(pad)
		}
	}
	f.Params = p
	return f
}

// paddingRow finds the row of a stored sinusoidal table that is zero where
// the sinusoid is not (fairseq zeroes the row of padding_idx).
func paddingRow(w *work.Work, tv *graph.Value, axis int) (int, bool) {
	t, ok := absolute.ViewTable(w, tv, axis)
	if !ok {
		return 0, false
	}
	buf := make([]float64, t.Width())
	pad := -1
	for r := 0; r < t.N; r++ {
		row := t.Row(r, buf)
		zero := true
		for _, x := range row {
			if x != 0 {
				zero = false
			}
		}
		if zero && r > 0 {
			if pad >= 0 {
				return 0, false
			}
			pad = r
		}
	}
	return pad, pad >= 0
}

// sinusoidalExact reads the exact arithmetic of a computed sinusoidal
// encoding x, confirmed on its measured rows (positions sp.offset, ...).
func sinusoidalExact(w *work.Work, x *graph.Value, sp absolute.SinFit, rows [][]float64) (*probe.Angles, string) {
	a, why := probe.ExactAngles(w, []*graph.Value{x}, sp.Omega, w.ElemType(x))
	if a == nil {
		return nil, why
	}
	cos, sin := make([][]float64, len(rows)), make([][]float64, len(rows))
	for i, r := range rows {
		for _, p := range sp.Pairs {
			sin[i] = append(sin[i], r[p[0]])
			cos[i] = append(cos[i], r[p[1]])
		}
	}
	if why := a.Confirm(sp.Offset, cos, sin); why != "" {
		return nil, why
	}
	return a, ""
}
