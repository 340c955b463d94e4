// Package rope is rotary position embedding (RoPE): q and k rotated pair by
// pair by angles position·frequency (Su et al.), with the frequencies
// base^(-2k/d) or scaled by a rule.
//
// Recognised forms (detect.go, fused.go): a rotation on a block's q or k
// side, found by probing the region between the projection and the scores
// with unit vectors, whatever ops write it (rotate_half by Slice/Split and
// Neg/Concat, rotate_every_two by strided Slice or Gather and a stack,
// complex pairs, cos/sin computed from inv_freq or read from a stored
// table); partial rotary dims; M-RoPE (a position stream per section) and
// 2-D RoPE over a patch grid (detect_axes.go); RotaryEmbedding of both
// domains and the do_rotary of GroupQueryAttention, SparseAttention and
// PagedAttention, and of Attention and the decoder-masked ops. The base and
// the scaling rule (linear, ntk, dynamic ntk, llama3, yarn, longrope) are
// fitted from the measured frequencies (fit.go, measure.go); the exact
// arithmetic of the angles is confirmed for codegen (exact.go).
//
// The rewrites (rewrite.go, rewrite_axes.go) fuse the rotations into
// RotaryEmbedding with caches of the model's own values, and store
// M-RoPE's and 2-D RoPE's cos and sin; extend.go applies the scaling rules
// (extend_rules.go) and builds the reference they are checked against
// (extend_reference.go); lower.go lowers the fused ops; codegen*.go write
// the cos/sin and the rotation as Go and C.
package rope
