package kernels

import (
	"fmt"
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
