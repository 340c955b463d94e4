package rope

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/passes"
)

// measure is a rope finding's own evidence (where the score test does
// not confirm it: a fused op, a 2-D rotation, a rotation outside
// attention): the unit-vector probes that show pairs of lanes turned by
// angles linear in the position.
func measure(f *passes.Finding) *passes.Measured {
	ev, _ := f.Evidence.(*Evidence)
	if ev == nil {
		return nil
	}
	if f.Fused && len(ev.InvFreq) == 0 {
		return &passes.Measured{Test: passes.TestFusedContract,
			Summary: "a fused rotation (RotaryEmbedding, or an attention op's do_rotary) whose contract turns pairs of q's and k's lanes; its cos/sin are not in the file"}
	}
	if len(ev.InvFreq) == 0 {
		if !ev.Synthetic {
			return nil
		}
		if len(ev.Pairs) == 0 {
			return &passes.Measured{Test: passes.TestFusedContract,
				Summary: "q·cos + R(q)·sin with R an op whose contract rotates halves (the notes name it), the cos and sin graph inputs: the op cannot be probed and the angles are not in the file"}
		}
		return &passes.Measured{Test: passes.TestRotation,
			Summary: fmt.Sprintf("%d pairs of q's lanes, found with unit vectors probed through the rotation, turn by cos and sin that come from graph inputs: their angles are not in the file", len(ev.Pairs))}
	}
	lo, hi := math.Inf(1), 0.0
	for _, w := range ev.InvFreq {
		lo, hi = min(lo, w), max(hi, w)
	}
	test, how := passes.TestRotation, "unit vectors of q probed through the rotation"
	if f.Fused {
		test, how = passes.TestFusedContract, "the fused op's cos/sin caches read at the positions"
	}
	return &passes.Measured{Test: test,
		Summary: fmt.Sprintf("%d pairs of lanes turn by angles linear in the position, %.3g to %.3g radians per position (%s)", len(ev.InvFreq), lo, hi, how),
		Change:  passes.Sig3(hi)}
}
