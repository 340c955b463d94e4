// Package sinusoidal is the sinusoidal absolute encoding (Vaswani et al.):
// sin and cos of position·base^(-k/D) added to the token embeddings.
//
// Recognised forms (detect.go): an absolute encoding (passes/absolute)
// whose rows lie on sin/cos circles with angles linear in the position,
// interleaved or [sin | cos], D = d/2 or d/2 - 1, whether it is computed in
// the graph (its exact arithmetic read for codegen) or stored (max_positions
// its rows, fairseq's zeroed padding row), and EmbedLayerNormalization's
// position table when its values are a sinusoid.
//
// rewrite.go precomputes a computed encoding into a table; extend.go
// continues a stored table with its own formula; codegen and plots share
// passes/absolute's.
package sinusoidal
