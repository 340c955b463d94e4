// Package relsin is the relative attention of Transformer-XL and XLNet: a
// sinusoid table of the distances, projected by its own key weights,
// scored against q plus learned global biases u and v.
//
// Recognised forms (detect.go): a block's score term q'·R aligned to
// key - query by a relative shift (pad/reshape/slice, or reshape/slice and
// a gather), the distances of its rows (Transformer-XL's or XLNet's), the
// frequencies and clamp_len read from the angles at probe lengths.
// stored.go reads the sinusoid stored as a constant at fixed sizes (no Sin
// or Cos left): its rows fitted as a stored sinusoid, each row's distance
// from its slowest pair's phase.
//
// rewrite.go stores the sinusoid as a [2N+1, dim] table gathered at the
// distances; codegen.go writes the table's rows. A stored finding is left
// as it is by both and by extend.go, with the reason.
package relsin
