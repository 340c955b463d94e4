package kernels

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
)

// chainModel is y = x+x; z = y*x; w = y+z over x of n float32s, all three
// outputs (so that w is not written over y or z): when w is made, y, z and
// w are live (3n floats; x, the caller's, is not counted).
func chainModel(t *testing.T) *graph.Model {
	m := graph.NewModel(9, "t", graph.Opset{Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, nil))
	y := g.Op("Add", []*graph.Value{x, x}, 1)[0]
	z := g.Op("Mul", []*graph.Value{y, x}, 1)[0]
	w := g.Op("Add", []*graph.Value{y, z}, 1)[0]
	g.AddOutput(w)
	g.AddOutput(y)
	g.AddOutput(z)
	return m
}

// The executor checks the live total against the budget before it
// allocates (B5: no total bounded a run): over it, the node that asked
// fails naming the bytes, and every byte reserved is given back.
func TestBudgetBoundsTheLiveTotal(t *testing.T) {
	const n = 1 << 20 // 4 MiB a tensor
	x := FromSlice([]int{n}, make([]float32, n))
	for _, tc := range []struct {
		limit int64
		fail  bool
	}{{10 << 20, true}, {13 << 20, false}} {
		b := NewBudget(tc.limit)
		b.SetHint("--memory-limit")
		s, err := NewSession(chainModel(t), Options{Budget: b})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second run reuses the pool
			_, err = s.Run(map[string]*Tensor{"x": x})
			if tc.fail {
				var ne *NodeError
				if !errors.Is(err, ErrOverBudget) || !errors.Is(err, ErrTooLarge) || !errors.As(err, &ne) || ne.Op != "Add" {
					t.Fatalf("limit %d: error %v, want the budget's, of the last Add", tc.limit, err)
				}
				for _, w := range []string{"4.0 MiB (4194304 bytes) more", "8.0 MiB (8388608 bytes) held already", "memory budget of 10.0 MiB", "--memory-limit sets it"} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
			} else if err != nil {
				t.Fatalf("limit %d: %v", tc.limit, err)
			}
			if b.Used() != 0 {
				t.Errorf("limit %d: %d bytes still reserved after Run", tc.limit, b.Used())
			}
			if b.Peak() > tc.limit {
				t.Errorf("limit %d: peak %d", tc.limit, b.Peak())
			}
		}
		if !tc.fail && b.Peak() != 12<<20 {
			t.Errorf("peak %d, want the three live tensors, %d", b.Peak(), 12<<20)
		}
	}
}

// No single tensor is larger than the budget's limit, whatever
// MaxTensorBytes allows.
func TestBudgetBoundsEachTensor(t *testing.T) {
	b := NewBudget(1 << 20)
	_, err := runOpWith(t, Options{Budget: b}, "", "ConstantOfShape", 17, 1, nil, FromSlice([]int{1}, []int64{1 << 19}))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a 2 MiB tensor under a 1 MiB budget: %v", err)
	}
	if b.Used() != 0 {
		t.Errorf("%d bytes left reserved", b.Used())
	}
}

// Sessions running at once share the budget; Reserve never goes over it.
func TestBudgetSharedAndConcurrent(t *testing.T) {
	b := NewBudget(1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				if b.Reserve(300) == nil {
					if b.Used() > 1000 {
						t.Errorf("used %d", b.Used())
					}
					mu.Lock()
					got++
					mu.Unlock()
					b.Release(300)
				}
			}
		}()
	}
	wg.Wait()
	if b.Used() != 0 || b.Peak() > 900 || got == 0 {
		t.Errorf("used %d, peak %d, %d reservations", b.Used(), b.Peak(), got)
	}
	if err := b.Reserve(1001); !errors.Is(err, ErrOverBudget) {
		t.Errorf("Reserve over the limit: %v", err)
	}
	if err := b.Fits(1001); err == nil {
		t.Error("Fits over the limit")
	}
	if NewBudget(0).Reserve(1<<62) != nil {
		t.Error("a budget without a limit refused")
	}
	if DefaultBudgetLimit() <= 0 {
		t.Error("no default limit")
	}
}
