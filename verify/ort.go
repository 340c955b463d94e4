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
	// A model that crashes ONNX Runtime while loading crashes it in a
	// child process, not in this one.
	opts := ortpeer.Options{Threads: threads, Level: "all"}
	if err := ortpeer.LoadsInChild(path, opts); err != nil {
		return nil, err
	}
	s, err := ortpeer.NewSession(path, m, opts)
	if err != nil {
		return nil, err
	}
	return &ortRunner{s: s}, nil
}

func (r *ortRunner) run(in, like map[string]*kernels.Tensor) (map[string]*kernels.Tensor, error) {
	return r.s.Run(in, like)
}

func (r *ortRunner) close() { r.s.Close() }
