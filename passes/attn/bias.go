package attn

import (
	"github.com/onnxpe/onnxpe/passes/work"
)

// scaledScores reports whether a block scales its scores (T5 does not).
func ScaledScores(w *work.Work, b *Block) bool {
	if b.Fused == nil {
		return b.Scaled
	}
	if a := b.Fused.Attr("scale"); a != nil {
		return a.Float() != 1
	}
	return true // 1/sqrt(head size) by default
}
