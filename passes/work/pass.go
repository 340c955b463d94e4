package work

import (
	"github.com/onnxpe/onnxpe/passes"
)

// Work is the normalised working copy made by the Normalize pass.
func Of(c *passes.Context) *Work { return passes.Result(c, Normalize) }
