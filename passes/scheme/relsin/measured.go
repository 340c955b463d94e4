package relsin

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/passes"
)

// measure is a relative-sinusoid finding's own evidence: the sinusoid of
// the distances its position term reads.
func measure(f *passes.Finding) *passes.Measured {
	ev, _ := f.Evidence.(*Evidence)
	if ev == nil || len(ev.Omega) == 0 {
		return nil
	}
	lo, hi := math.Inf(1), 0.0
	for _, w := range ev.Omega {
		lo, hi = min(lo, w), max(hi, w)
	}
	return &passes.Measured{Test: passes.TestScoreBias,
		Summary: fmt.Sprintf("a position term of the scores reads sin and cos of the key−query distances at %d frequencies, %.3g to %.3g radians per position", len(ev.Omega), lo, hi),
		Change:  passes.Sig3(hi)}
}
