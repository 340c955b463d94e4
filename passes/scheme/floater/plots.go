package floater

import (
	"fmt"
	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
	"github.com/onnxpe/onnxpe/passes"
)

// floaterPlots: the states of the integration.
func Plots(ids *plot.IDs, fd *passes.Finding) []*plot.Figure {
	ev, ok := fd.Evidence.(*Evidence)
	if !ok {
		return nil
	}
	p, _ := fd.Params.(*Params)
	return []*plot.Figure{floaterStates(ids, ev, p)}
}

func floaterStates(ids *plot.IDs, ev *Evidence, p *Params) *plot.Figure {
	if len(ev.Sample) == 0 || len(ev.Sample[0]) == 0 {
		return nil
	}
	cb := plot.SymmetricBar("value", ev.Sample)
	hm := &plot.Heatmap{Title: "integrated states", XLabel: "state component (first 64)", YLabel: "position", Rows: ev.Sample}
	desc := fmt.Sprintf("Heat map of FLOATER's states at positions 0 to %d, first %d components, values from %s to %s.", len(ev.Sample)-1, len(ev.Sample[0]), plot.NumLabel(cb.Vmin), plot.NumLabel(cb.Vmax))
	caption := fmt.Sprintf("The position biases the layers read (table %s, %d positions): the solution of the learned dynamics at every position's time.", ev.Table, ev.Rows)
	if p != nil && p.Solver != nil && p.Step != nil {
		caption += fmt.Sprintf(" Integrated by %s steps of %s (%d evaluations of the dynamics per step, weights %s).", *p.Solver, plot.ValueLabel(*p.Step), ev.Stages, plot.JoinValues(ev.B))
	} else if p != nil && p.Form == "table" {
		caption += " The states are stored: the integration is not in the graph."
	}
	return plot.HeatmapFigure(ids, "floater_states", "FLOATER states", desc, caption, cb, hm)
}
