package complexorder

import (
	"fmt"

	"github.com/onnxpe/onnxpe/passes"
)

// measure is a complex-order finding's evidence: the phases of the word
// embeddings, evaluated at consecutive positions, grow by each word's
// frequency per position.
func measure(f *passes.Finding) *passes.Measured {
	ev, _ := f.Evidence.(*Evidence)
	if ev == nil || len(ev.Pos) < 2 {
		return nil
	}
	return &passes.Measured{Test: passes.TestRotation,
		Summary: fmt.Sprintf("the embeddings' real and imaginary parts turn by the position times each word's frequencies (%s read at %d positions)", ev.Phase, len(ev.Pos))}
}
