// Package unknown is what the audit reports where it cannot tell a
// block's positional encoding, instead of a guess: no attention block was
// found, a probe it needed could not run, or the position information a
// block receives fits no scheme onnxpe reads. Its findings name the
// layers they concern, the reason (a param) and, in their notes and
// evidence, what was measured. The audit makes them (there is no
// detector); policies fail on them unless --allow-unknown is given, and
// extend refuses a model that has them.
package unknown
