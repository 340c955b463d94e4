// Package alibi is ALiBi (Press et al.): a bias m_h·(j - i) added to the
// attention scores, one slope per head, or -m_h·|i - j| when symmetric.
//
// Recognised forms (detect.go): a bias of the scores (passes/scorebias)
// linear in the key position with one slope per head, whatever computes it
// (slopes constant or computed at run time, positions from the key index,
// the mask's cumulative sum, the offset from the last key, or the
// distance), also through a fused attention op's bias input and
// FlexAttention's score_mod, and onnxpe's own ALiBiBias.
//
// rewrite.go folds the bias into constants or fuses it into ALiBiBias;
// extend.go continues bias constants fixed at export; lower.go lowers
// ALiBiBias; codegen.go writes the bias.
package alibi
