package learned

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/work"
	"slices"
)

// LearnedPass finds learned position tables added to the embeddings.
var Detect = &passes.Pass[[]*passes.Finding]{
	Name: "learned",
	Doc: `Find learned position tables added to the embeddings.

An absolute encoding (the absolute pass) whose rows are not a sinusoid is
a learned table: a stored table in its cone gives max_positions (its
rows) and position_offset (the row read at the first position).
EmbedLayerNormalization's position table is learned unless its values
are a sinusoid; a table whose values are not in the file is reported
learned, with a note.`,
	Requires: []passes.Analyzer{work.Normalize, absolute.Absolute},
	Run: func(c *passes.Context) ([]*passes.Finding, error) {
		w := work.Of(c)
		return absolute.ClaimAbsolute(c, func(e *absolute.Encoding) *passes.Finding { return learnedFinding(w, e) }), nil
	},
}

// learnedFinding is the finding of e when its rows are not a sinusoid.
func learnedFinding(w *work.Work, e *absolute.Encoding) *passes.Finding {
	if e.Sin != nil && e.Unread == "" && (e.Fused || e.Varies) {
		return nil
	}
	f := &passes.Finding{Scheme: Name, Layers: e.Layers, Nodes: e.Nodes, Fused: e.Fused, Evidence: e.Evidence, Notes: slices.Clone(e.Notes)}
	p := &Params{Dim: e.Dim}
	switch {
	case e.Unread != "":
		if e.TableRows > 0 {
			p.MaxPositions = passes.Ptr(e.TableRows)
		}
		f.Notes = append(f.Notes, e.Unread)
	case e.Fused:
		p.PositionOffset = passes.Ptr(e.Offset)
		if e.TableRows > 0 {
			p.MaxPositions = passes.Ptr(e.TableRows)
		}
	case e.Table != nil:
		p.MaxPositions = passes.Ptr(e.TableRows)
		if off, ok, note := absolute.Offset(w, e); ok {
			p.PositionOffset = passes.Ptr(off)
		} else if note != "" {
			f.Notes = append(f.Notes, note)
		}
	default:
		f.Notes = append(f.Notes, "max_positions: the added rows are computed, not read from a stored table")
	}
	f.Params = p
	return f
}
