// Package attn finds the attention blocks of a model and what reaches
// their scores: a block is a Softmax between a product of two content
// values (Q·Kᵀ) and a product with V, or a fused attention op (blocks.go);
// its sides are the regions between the projected q and k and the scores
// (sides.go); its bias and extra score terms what else the scores add
// (bias.go, terms.go, distance.go). The graphs of generation ops are
// audited as models of their own (generation.go). Every detector starts
// from these.
package attn
