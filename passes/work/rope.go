package work

import (
	"slices"
)

// sortOrig dedups original node names and sorts them in the original order.
func (w *Work) SortOrig(names []string) []string {
	w.origIndexes()
	// Each name's place is looked up once, not at every comparison (a
	// 100k-node model's findings list tens of thousands of names). Sorting
	// the pairs by place makes the comparisons and swaps sorting the names
	// by place would, so the order is the same.
	keyed := make([]keyedName, len(names))
	for i, name := range names {
		keyed[i] = keyedName{w.nameOrder[name], name}
	}
	slices.SortFunc(keyed, func(a, b keyedName) int { return a.k - b.k })
	out := make([]string, len(keyed))
	for i, kn := range keyed {
		out[i] = kn.name
	}
	return slices.Compact(out)
}

type keyedName struct {
	k    int
	name string
}
