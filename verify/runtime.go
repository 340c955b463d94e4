package verify

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// Runtime names the executors that run the models.
type Runtime string

// The runtimes. RuntimeBoth runs each model in both executors and
// compares all four pairings.
const (
	RuntimeGo   Runtime = "go"
	RuntimeORT  Runtime = "ort"
	RuntimeBoth Runtime = "both"
)

// ErrNoORT is returned when ONNX Runtime is asked for in a build without
// it (the pure-Go build).
var ErrNoORT = errors.New("this onnxpe was built without ONNX Runtime; build it with the ort tag " +
	"(CGO_ENABLED=1 go build -tags ort ./cmd/onnxpe) and set ONNXPE_ORT_LIB to libonnxruntime.so (make ort installs one)")

// runner runs one model in one executor.
type runner interface {
	// run computes the outputs; like gives tensors of the expected type
	// and shape by output name where the executor needs them (ONNX
	// Runtime's half-precision outputs).
	run(in, like map[string]*kernels.Tensor) (map[string]*kernels.Tensor, error)
	close()
}

type goRunner struct{ s *kernels.Session }

// goSessions counts the sessions verify made (its tests check that a
// comparison makes one per model).
var goSessions atomic.Int64

func newGoRunner(m *graph.Model, threads int, outputs []string) (*goRunner, error) {
	goSessions.Add(1)
	s, err := kernels.NewSession(m, kernels.Options{Threads: threads, Outputs: outputs})
	if err != nil {
		return nil, err
	}
	return &goRunner{s: s}, nil
}

func (r *goRunner) run(in, _ map[string]*kernels.Tensor) (map[string]*kernels.Tensor, error) {
	return r.s.Run(in)
}

// runInto runs r on in, writing the large outputs of onnxpe's executor
// into sp as they are made (kernels.Session.RunInto); other runtimes run
// as run does.
func runInto(r runner, in, like map[string]*kernels.Tensor, sp *kernels.Spill) (map[string]*kernels.Tensor, error) {
	if k, ok := r.(kept); ok {
		r = k.runner
	}
	if g, ok := r.(*goRunner); ok {
		return g.s.RunInto(in, sp)
	}
	return r.run(in, like)
}

func (r *goRunner) close() {
	if r.s != nil {
		r.s.Close()
		r.s = nil
	}
}

// ModelError says that a model could not be loaded into an executor or
// run on an input set: the pair cannot be compared (exit 2), unless the
// other model ran the same inputs (then the models differ).
type ModelError struct {
	Model   string // "A" or "B"
	Path    string
	Runtime Runtime
	Set     string // the input set, "" when the model could not be loaded
	Err     error
}

func (e *ModelError) Error() string {
	name := e.Path
	if name == "" {
		name = "model " + e.Model
	}
	if e.Set == "" {
		return fmt.Sprintf("%s cannot be run by %s: %v", name, runtimeName(e.Runtime), e.Err)
	}
	return fmt.Sprintf("%s cannot run input set %q in %s: %v", name, e.Set, runtimeName(e.Runtime), e.Err)
}

func (e *ModelError) Unwrap() error { return e.Err }

func runtimeName(r Runtime) string {
	if r == RuntimeORT {
		return "ONNX Runtime"
	}
	return "onnxpe's kernels"
}

// ErrIncompatible is wrapped by errors about pairs that cannot be
// compared at all (different inputs).
var ErrIncompatible = errors.New("models cannot be compared")
