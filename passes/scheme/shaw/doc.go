// Package shaw is the relative position representations of Shaw et al.:
// learned vectors of the clipped distance multiplied with q and added to
// the scores (and with the attention weights, to the values).
//
// Recognised forms (detect.go): a block's extra score term, q times a
// position-only value that gathers a table by an index of the query and
// key positions (its direction, clipping and max_relative_position read
// from the index over probe positions), and the output-side product of
// the weights with such a table.
//
// Nothing to rewrite or extend (computed for any distance); codegen.go
// writes the index and the tables.
package shaw
