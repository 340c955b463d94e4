package floater

import (
	"fmt"

	"github.com/onnxpe/onnxpe/passes"
)

// measure is a FLOATER finding's evidence: the states of the position
// flow, one per position, read from the integration (or its table).
func measure(f *passes.Finding) *passes.Measured {
	ev, _ := f.Evidence.(*Evidence)
	if ev == nil || len(ev.Sample) < 2 {
		return nil
	}
	change := 0.0
	for _, r := range ev.Sample[1:] {
		for j, x := range r {
			if j < len(ev.Sample[0]) {
				change = max(change, abs(x-ev.Sample[0][j]))
			}
		}
	}
	how := fmt.Sprintf("integrated in %d stages per step", ev.Stages)
	if ev.Stages == 0 {
		how = "stored as a table"
	}
	return &passes.Measured{Test: passes.TestPositionRows,
		Summary: fmt.Sprintf("the states of the position flow (%s) differ from position to position (%d rows read) and are added to the layers' inputs", how, len(ev.Sample)),
		Change:  passes.Sig3(change)}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
