//go:build ort

package verify

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/ortpeer"
	"github.com/onnxpe/onnxpe/kernels"
)

// ORTAvailable reports whether this build can run ONNX Runtime.
func ORTAvailable() bool { return true }

type ortRunner struct{ s *ortpeer.Session }

// newORTRunner opens the model file at path in ONNX Runtime with its
// default graph optimisations (what deployments run).
func newORTRunner(path string, m *graph.Model, threads int) (runner, error) {
	s, err := ortpeer.NewSession(path, m, ortpeer.Options{Threads: threads, Level: "all"})
	if err != nil {
		return nil, err
	}
	return &ortRunner{s: s}, nil
}

func (r *ortRunner) run(in, like map[string]*kernels.Tensor) (map[string]*kernels.Tensor, error) {
	return r.s.Run(in, like)
}

func (r *ortRunner) close() { r.s.Close() }
