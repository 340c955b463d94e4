//go:build !ort

package verify

import (
	"github.com/onnxpe/onnxpe/graph"
)

// ORTAvailable reports whether this build can run ONNX Runtime.
func ORTAvailable() bool { return false }

func newORTRunner(string, *graph.Model, int) (runner, error) { return nil, ErrNoORT }
