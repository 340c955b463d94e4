package passes

import "slices"

// LearnedPass finds learned position tables added to the embeddings.
var LearnedPass = &Pass{
	Name: "learned",
	Doc: `Find learned position tables added to the embeddings.

An absolute encoding (the absolute pass) whose rows are not a sinusoid is
a learned table: a stored table in its cone gives max_positions (its
rows) and position_offset (the row read at the first position).
EmbedLayerNormalization's position table is learned unless its values
are a sinusoid; a table whose values are not in the file is reported
learned, with a note.`,
	Requires: []*Pass{Normalize, Absolute},
	Run: func(c *Context) (any, error) {
		w := c.Work()
		return claimAbsolute(c, func(e *Encoding) *Finding { return w.learnedFinding(e) }), nil
	},
}

// learnedFinding is the finding of e when its rows are not a sinusoid.
func (w *Work) learnedFinding(e *Encoding) *Finding {
	if e.Sin != nil && e.Unread == "" && (e.Fused || e.Varies) {
		return nil
	}
	f := &Finding{Scheme: LearnedAbsolute, Layers: e.Layers, Nodes: e.Nodes, Fused: e.Fused, Evidence: e.Evidence, Notes: slices.Clone(e.Notes)}
	p := &LearnedParams{Dim: e.Dim}
	switch {
	case e.Unread != "":
		if e.TableRows > 0 {
			p.MaxPositions = ptr(e.TableRows)
		}
		f.Notes = append(f.Notes, e.Unread)
	case e.Fused:
		p.PositionOffset = ptr(e.Offset)
		if e.TableRows > 0 {
			p.MaxPositions = ptr(e.TableRows)
		}
	case e.Table != nil:
		p.MaxPositions = ptr(e.TableRows)
		if off, ok := w.offset(e); ok {
			p.PositionOffset = ptr(off)
		}
	default:
		f.Notes = append(f.Notes, "max_positions: the added rows are computed, not read from a stored table")
	}
	f.Params = p
	return f
}
