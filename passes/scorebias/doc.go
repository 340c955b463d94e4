// Package scorebias is what the bias schemes (ALiBi and T5) share: every
// bias the attention scores receive that does not depend on content,
// evaluated as [head, query, key] (the score_bias pass: Bias, with the
// slopes of a bias linear in the key and whether it is a function of key -
// query), also those of FlexAttention's score_mod and of gated biases, and
// the golden vectors of a bias for codegen.
package scorebias
