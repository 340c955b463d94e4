// Package codegen turns the audit's findings into standalone source: the
// exact positional encoding of a model as a Go package (standard library
// only) or a header-only C99 file, with tests whose golden vectors onnxpe's
// executor computed on the model's own subgraph.
//
// Every scheme is one emitter (a Go file here that reads a Finding and its
// Evidence into template data and computes the golden vectors), one
// template per language (templates/go/<scheme>.tmpl and
// templates/c/<scheme>.tmpl, each defining the scheme's code and its test)
// and one golden file per language under golden/codegen/ (refreshed with
// `go test ./golden -update`).
//
// What the emitted code computes is read from the model, never re-derived
// from a scheme's published formula: the exact constants (frequencies as
// stored, slopes, bucket tables, position tables) and the arithmetic the
// graph performs (positions times frequencies in the graph's element type,
// a scale after sin and cos, a cast to float16), rounding as the graph
// rounds, so that the emitted functions reproduce the executor bit for bit
// in the common case and within 1e-6 always. The golden vectors come from
// passes.Context.Extract: the subgraph computing the encoding, cut at q for
// a rotation, run by kernels.Session at positions up to the model's largest
// (or DefaultPositions for encodings the model computes at any position).
//
// It does not detect anything (it consumes passes' findings), does not
// import verify, and does not write files: the caller writes Result.Files.
package codegen
