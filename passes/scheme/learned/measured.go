package learned

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
)

func measure(f *passes.Finding) *passes.Measured {
	return absolute.Measured(f, "values on no sinusoid: a trained table")
}
