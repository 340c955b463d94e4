package sinusoidal

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
)

func measure(f *passes.Finding) *passes.Measured {
	return absolute.Measured(f, "sin/cos pairs whose angles grow linearly with the position")
}
