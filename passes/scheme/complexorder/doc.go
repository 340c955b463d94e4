// Package complexorder is the complex-order word embedding of Wang et al.:
// each word amplitude·e^(i(ω·pos + θ)), its frequency and phase per word.
//
// Recognised forms (detect.go): a Sin and a Cos of one angle that is a
// position-only value times a token-dependent one (plus a phase), each
// multiplied by a token-dependent amplitude.
//
// Nothing to rewrite (the phases depend on the tokens); codegen.go writes
// the tables and the embedding.
package complexorder
