package work

import (
	"github.com/onnxpe/onnxpe/graph"
)

// numbered is a value or a node: Model.Clone numbers those of its copy.
type numbered interface {
	comparable
	Num() int
	Graph() *graph.Graph
}

// byNum holds one fact per value (or node) of a working copy. Those Clone
// numbered (Value.Num, Node.Num) have their place in a slice; any other
// (made after the copy, or of another model) goes to a map. Maps over the
// 160k values of a 100k-node copy cost several times the slices and, in
// an audit's first run, their fresh pages.
type byNum[K numbered, T any] struct {
	m    *graph.Model
	at   []T
	has  []bool
	keys []K // the key at each place, kept only for tables that are walked (each)
	rest map[K]T
}

// byValue is a fact per value of the copy m.
type byValue[T any] = byNum[*graph.Value, T]

func newByValue[T any](m *graph.Model) byValue[T] {
	return newByNum[*graph.Value, T](m, m.NumCloned())
}

// newByNode is a fact per node of the copy m.
func newByNode[T any](m *graph.Model) byNum[*graph.Node, T] {
	return newByNum[*graph.Node, T](m, m.NumClonedNodes())
}

func newByNum[K numbered, T any](m *graph.Model, n int) byNum[K, T] {
	return byNum[K, T]{m: m, at: make([]T, n+1), has: make([]bool, n+1)}
}

// slot is k's place in at, or -1.
func (t *byNum[K, T]) slot(k K) int {
	var none K
	if k == none {
		return -1
	}
	if n := k.Num(); n > 0 && n < len(t.at) && k.Graph() != nil && k.Graph().Model() == t.m {
		return n
	}
	return -1
}

func (t *byNum[K, T]) get(k K) (T, bool) {
	if i := t.slot(k); i >= 0 {
		return t.at[i], t.has[i]
	}
	x, ok := t.rest[k]
	return x, ok
}

// of is k's fact, or the zero value.
func (t *byNum[K, T]) Of(k K) T {
	x, _ := t.get(k)
	return x
}

func (t *byNum[K, T]) set(k K, x T) {
	if i := t.slot(k); i >= 0 {
		t.at[i], t.has[i] = x, true
		if t.keys != nil {
			t.keys[i] = k
		}
		return
	}
	if t.rest == nil {
		t.rest = map[K]T{}
	}
	t.rest[k] = x
}

// walkable keeps the keys of the places set, for each.
func (t byNum[K, T]) walkable() byNum[K, T] {
	t.keys = make([]K, len(t.at))
	return t
}

// each calls f for every key with a fact (t made walkable): the numbered
// ones in their order, then the others.
func (t *byNum[K, T]) Each(f func(K, T)) {
	for i, k := range t.keys {
		if t.has[i] {
			f(k, t.at[i])
		}
	}
	for k, x := range t.rest {
		f(k, x)
	}
}
