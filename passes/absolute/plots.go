package absolute

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
)

func TableHeatmap(ids *plot.IDs, name string, ev *TableEvidence) *plot.Figure {
	rows := ev.Sample
	if len(rows) == 0 {
		rows = ev.Rows0
	}
	if len(rows) == 0 || len(rows[0]) == 0 {
		return nil
	}
	cb := plot.SymmetricBar("value", rows)
	hm := &plot.Heatmap{Title: name + " per position", XLabel: "dimension", YLabel: "position (token index)", Rows: rows}
	desc := fmt.Sprintf("Heat map of the position encoding added to the token embeddings, %d positions by %d dimensions, values from %s to %s.",
		len(rows), len(rows[0]), plot.NumLabel(cb.Vmin), plot.NumLabel(cb.Vmax))
	caption := fmt.Sprintf("What the model adds to the embeddings at positions 0–%d (the first %d tokens), as onnxpe's kernels evaluated it.", len(rows)-1, len(rows))
	if ev.Table != "" {
		caption += fmt.Sprintf(" Read from the stored table %s (%d rows).", ev.Table, ev.Rows)
	}
	return plot.HeatmapFigure(ids, "table_heatmap", name, desc, caption, cb, hm)
}

// positionSimilarity draws the cosine similarity of the encodings of every
// two positions: trained tables show how position information is shared
// between neighbours.
func PositionSimilarity(ids *plot.IDs, ev *TableEvidence) *plot.Figure {
	rows := ev.Sample
	if len(rows) == 0 {
		rows = ev.Rows0
	}
	n := len(rows)
	if n < 2 {
		return nil
	}
	norm := make([]float64, n)
	for i, r := range rows {
		for _, x := range r {
			norm[i] += x * x
		}
		norm[i] = math.Sqrt(norm[i])
	}
	sim := make([][]float64, n)
	for i := range sim {
		sim[i] = make([]float64, n)
		for j := range sim[i] {
			var dot float64
			for k := range rows[i] {
				dot += rows[i][k] * rows[j][k]
			}
			sim[i][j] = math.NaN()
			if norm[i] > 0 && norm[j] > 0 {
				sim[i][j] = dot / (norm[i] * norm[j])
			}
		}
	}
	cb := plot.Colorbar{Label: "cosine similarity", Vmin: -1, Vmax: 1, Cmap: plot.Diverging}
	hm := &plot.Heatmap{Title: "Similarity between positions", XLabel: "position", YLabel: "position", Rows: sim}
	desc := fmt.Sprintf("Heat map of the cosine similarity between the encodings of every two of the first %d positions.", n)
	caption := fmt.Sprintf("Cosine similarity between the encodings of positions 0–%d, from the same values: a trained table shows a band along the diagonal when neighbouring positions get similar vectors.", n-1)
	return plot.HeatmapFigureW(ids, 70+300+8+96, "position_similarity", "Position similarity", desc, caption, cb, hm)
}
