// Package t5 is T5's relative attention bias: key - query mapped to
// log-spaced buckets, a learned [buckets, heads] table added to the scores.
//
// Recognised forms (detect.go, fused.go): a bias of the scores
// (passes/scorebias) that depends only on key - query and gathers a bucket
// table (the bucket map read over 512 positions gives num_buckets,
// bidirectional and max_distance; with a KV cache, over the new keys), and
// RelativePositionBias with or without GatedRelativePositionBias; a bias
// stored as a [heads, queries, keys] table (stored.go: a fixed-size export
// or constant folding), read by which distances share a value.
//
// rewrite.go stores the bias of every distance as a table gathered by key -
// query, or emits RelativePositionBias; codegen.go writes the bucket function
// and the bias.
package t5
