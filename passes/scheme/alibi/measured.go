package alibi

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/passes"
)

// measure is an ALiBi finding's own evidence: the bias of the scores
// evaluated over query and key positions and read as a slope per head.
func measure(f *passes.Finding) *passes.Measured {
	ev, _ := f.Evidence.(*Evidence)
	if ev == nil || len(ev.Slopes) == 0 {
		return nil
	}
	lo, hi := math.Inf(1), 0.0
	for _, s := range ev.Slopes {
		lo, hi = min(lo, math.Abs(s)), max(hi, math.Abs(s))
	}
	return &passes.Measured{Test: passes.TestScoreBias,
		Summary: fmt.Sprintf("the bias %s of the scores is linear in the key position, %d slopes from %.3g to %.3g", ev.Bias, len(ev.Slopes), lo, hi),
		Change:  passes.Sig3(hi)}
}
