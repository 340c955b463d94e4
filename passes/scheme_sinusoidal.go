package passes

import (
	"math"
	"slices"
)

// SinusoidalPass finds sinusoidal tables added to the embeddings.
var SinusoidalPass = &Pass{
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
	Requires: []*Pass{Normalize, Absolute},
	Run: func(c *Context) (any, error) {
		w := c.Work()
		return claimAbsolute(c, func(e *Encoding) *Finding { return w.sinusoidalFinding(e) }), nil
	},
}

// sinusoidalFinding is the finding of e when its rows are a sinusoid.
func (w *Work) sinusoidalFinding(e *Encoding) *Finding {
	sp := e.Sin
	if sp == nil || e.Unread != "" || !e.Fused && !e.Varies {
		return nil
	}
	ev := e.Evidence
	f := &Finding{Scheme: Sinusoidal, Layers: e.Layers, Nodes: e.Nodes, Fused: e.Fused, Evidence: ev, Notes: slices.Clone(e.Notes)}
	p := &SinusoidalParams{Layout: sp.layout, Dim: e.Dim, Computed: e.Table == nil, FreqDenominator: sp.denom}
	if !math.IsNaN(sp.base) {
		p.Base = ptr(sp.base)
	}
	if sp.note != "" {
		f.Notes = append(f.Notes, sp.note)
	}
	if e.Fused {
		ev.Omega = sp.omega
		p.MaxPositions, p.PositionOffset = ptr(e.TableRows), ptr(e.Offset)
		if pad, ok := w.paddingRow(e.Table, 0); ok {
			p.PaddingIdx = ptr(pad)
		}
		f.Params = p
		return f
	}
	ev.Omega, ev.Pairs = sp.omega, sp.pairs
	if e.Table == nil {
		ev.Angles, ev.ExactWhy = w.sinusoidalExact(e.X, *sp, ev.Sample)
		p.PositionOffset = ptr(sp.offset)
	} else {
		p.MaxPositions = ptr(e.TableRows)
		if off, ok := w.offset(e); ok {
			p.PositionOffset = ptr(off)
		}
		if pad, ok := w.paddingRow(e.Table, e.TableAxis); ok {
			p.PaddingIdx = ptr(pad)
		}
	}
	f.Params = p
	return f
}
