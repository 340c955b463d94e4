package learned

import (
	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
)

// learnedPlots: the table per position and the similarity of positions.
func Plots(ids *plot.IDs, fd *passes.Finding) []*plot.Figure {
	ev, ok := fd.Evidence.(*absolute.TableEvidence)
	if !ok {
		return nil
	}
	return []*plot.Figure{absolute.TableHeatmap(ids, "Learned position table", ev), absolute.PositionSimilarity(ids, ev)}
}
