package passes

import "github.com/onnxpe/onnxpe/graph"

// byValue holds one fact per value of a working copy. The values Clone
// numbered (Value.Num) have their place in a slice; any other value (made
// after the copy, or of another model) goes to a map. Maps over the 300k
// values of a 100k-node copy cost twice the slices and, in an audit's
// first run, their fresh pages.
type byValue[T any] struct {
	m    *graph.Model
	at   []T
	has  []bool
	rest map[*graph.Value]T
}

func newByValue[T any](m *graph.Model) byValue[T] {
	k := m.NumCloned() + 1
	return byValue[T]{m: m, at: make([]T, k), has: make([]bool, k)}
}

// slot is v's place in at, or -1.
func (t *byValue[T]) slot(v *graph.Value) int {
	if v == nil {
		return -1
	}
	if n := v.Num(); n > 0 && n < len(t.at) && v.Graph() != nil && v.Graph().Model() == t.m {
		return n
	}
	return -1
}

func (t *byValue[T]) get(v *graph.Value) (T, bool) {
	if i := t.slot(v); i >= 0 {
		return t.at[i], t.has[i]
	}
	x, ok := t.rest[v]
	return x, ok
}

// of is v's fact, or the zero value.
func (t *byValue[T]) of(v *graph.Value) T {
	x, _ := t.get(v)
	return x
}

func (t *byValue[T]) set(v *graph.Value, x T) {
	if i := t.slot(v); i >= 0 {
		t.at[i], t.has[i] = x, true
		return
	}
	if t.rest == nil {
		t.rest = map[*graph.Value]T{}
	}
	t.rest[v] = x
}
