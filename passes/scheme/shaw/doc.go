// Package shaw is the relative position representations of Shaw et al.:
// learned vectors of the clipped distance multiplied with q and added to
// the scores (and with the attention weights, to the values).
//
// Recognised forms (detect.go): a block's extra score term, q times a
// position-only value that gathers a table by an index of the query and
// key positions (its direction, clipping and max_relative_position read
// from the index over probe positions), and the output-side product of
// the weights with such a table. Embeddings stored whole, a
// [queries, keys, dim] table cut to the length with no index in the graph
// (Nezha's functional relative positions), are read by what the term
// adds to the scores with q held fixed (stored.go): a function of
// key − query whose distances beyond ±k score as ±k; without a clipping
// such a table is not told apart from another relative scheme's.
//
// Nothing to rewrite; the extension has nothing to enlarge for an index
// (computed for any distance) and refuses embeddings stored whole
// (extend.go); codegen.go writes the index and the tables.
package shaw
