// Package disentangled is DeBERTa's disentangled attention: content-to-
// position (c2p) and position-to-content (p2c) scores of a relative
// embedding of the log-bucketed distance.
//
// Recognised forms (detect.go): score terms gathered by an index of the
// query and key positions, c2p when the content is q, p2c when it is k;
// the index before its clamp gives position_buckets and
// max_relative_positions, offset by half the table's rows (its shape, or
// the clamp's upper bound computed from the length at the probe's, as
// DeBERTa v1 slices its table to 2·min(length, max_relative_positions)); one relative embedding reproducing both
// position tables through the content projections gives share_att_key.
//
// rewrite.go stores the bucket function as a table gathered at q - k;
// codegen.go writes the bucket function and the indexes.
package disentangled
