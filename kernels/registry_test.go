package kernels

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
)

// TestRegisterWhileSessionsCompile registers kernels from several
// goroutines while others make and run sessions and list the registry:
// Register is guarded by a lock (it is not init-only), so under the race
// detector (make test-race) this test reports no race, and without the
// race detector it does not die of a concurrent map write. With the lock
// removed, `go test -race -run TestRegisterWhileSessionsCompile` fails.
func TestRegisterWhileSessionsCompile(t *testing.T) {
	const writers, readers, each = 4, 4, 50
	m := graph.NewModel(9, "race", graph.Opset{Version: 17})
	x := m.Graph.AddInput("x", graph.TensorType(graph.Float, graph.Dims(2)))
	m.Graph.AddOutput(m.Graph.Op("Neg", []*graph.Value{x}, 1)[0])
	in := map[string]*Tensor{"x": FromSlice([]int{2}, []float32{1, 2})}
	var wg sync.WaitGroup
	errs := make(chan error, writers+readers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				Register("test.onnxpe.race", fmt.Sprintf("Op%d_%d", w, i), 1, 0, identity, 0)
			}
		})
	}
	for range readers {
		wg.Go(func() {
			for range each {
				s, err := NewSession(m, Options{Threads: 1})
				if err != nil {
					errs <- err
					return
				}
				if _, err := s.Run(in); err != nil {
					errs <- err
					return
				}
				_ = Ops()
				_ = Supports("test.onnxpe.race", "Op0_0", 1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range writers {
		for i := range each {
			if !Supports("test.onnxpe.race", fmt.Sprintf("Op%d_%d", w, i), 1) {
				t.Fatalf("Op%d_%d was not registered", w, i)
			}
		}
	}
}

// TestEveryOpDeclaresItsInputs: each registered op has an input spec
// (SetInputs), which NewSession checks nodes against, so that a node with
// a missing or extra input is an error of the model and not an index out
// of range in its kernel.
func TestEveryOpDeclaresItsInputs(t *testing.T) {
	for _, name := range Ops() {
		domain, op := "", name
		if i := strings.LastIndexByte(name, '.'); i >= 0 {
			domain, op = name[:i], name[i+1:]
		}
		if strings.HasPrefix(domain, "test.") {
			continue
		}
		if _, ok := inputSpec(domain, op, 1<<20); !ok {
			t.Errorf("%s has no input spec: call SetInputs beside its Register (see arity.go)", name)
		}
	}
}

// TestInputSpecs checks nodes against their ops' input specs.
func TestInputSpecs(t *testing.T) {
	g := graph.NewModel(9, "arity", graph.Opset{Version: 17}).Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, nil))
	for _, tc := range []struct {
		op    string
		opset int64
		ins   []*graph.Value
		ok    bool
	}{
		{"Add", 17, []*graph.Value{x, x}, true},
		{"Add", 17, []*graph.Value{x}, false},
		{"Add", 17, []*graph.Value{x, nil}, false},
		{"Add", 17, []*graph.Value{x, x, x}, false},
		{"Add", 17, []*graph.Value{x, x, nil}, true}, // a trailing empty name
		{"Concat", 17, nil, false},
		{"Concat", 17, []*graph.Value{x, x, x, x}, true},
		{"Concat", 17, []*graph.Value{x, nil, x}, false},
		{"Gemm", 17, []*graph.Value{x, x, nil}, true},
		{"Slice", 9, []*graph.Value{x}, true},
		{"Slice", 13, []*graph.Value{x}, false},
		{"Slice", 13, []*graph.Value{x, x, x, nil, x}, true},
		{"Loop", 17, []*graph.Value{nil, nil}, true},
		{"Loop", 17, []*graph.Value{nil, nil, x, x}, true},
		{"Loop", 17, []*graph.Value{nil, nil, nil}, false},
		{"Constant", 17, []*graph.Value{x}, false},
	} {
		n := g.NewNode(tc.op, "", tc.ins, 1)
		if err := checkInputs(n, tc.opset); (err == nil) != tc.ok {
			t.Errorf("%s-%d with %d inputs: %v, want ok=%v", tc.op, tc.opset, len(tc.ins), err, tc.ok)
		}
	}
}

// Every kernel is registered for versions the loader accepts: none starts
// after the newest version graph knows of its domain (a model of that
// version would be refused before it ran).
func TestKernelsWithinNewestOpsets(t *testing.T) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	for k, es := range registry {
		newest, ok := graph.NewestOpsets[k.domain]
		if !ok {
			continue
		}
		for _, e := range es {
			if e.since > newest {
				t.Errorf("%s.%s is registered since version %d, after the newest graph knows (%d)", k.domain, k.op, e.since, newest)
			}
		}
	}
}
