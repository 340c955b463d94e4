// Package learned is the learned absolute encoding: a trained table with a
// row per position added to the token embeddings (GPT-2, BERT, OPT's offset
// of 2, ViT's patches).
//
// Recognised forms (detect.go): an absolute encoding (passes/absolute)
// whose rows are not a sinusoid, read from a stored table at the positions
// (a Gather, a Slice, a one-hot product, on either axis of a table stored
// transposed) or added whole, and EmbedLayerNormalization's position table.
//
// rewrite.go turns a Gather at 0, 1, 2, ... into a Slice; extend.go extends
// the table by hierarchical decomposition, the trained rows kept bit for
// bit; codegen and plots share passes/absolute's.
package learned
