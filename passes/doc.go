// Package passes finds the positional encodings of a model and, later,
// rewrites them. Every analysis is a Pass: a declared value with a name, a
// doc string, the passes it requires and a Run function; results flow
// from pass to pass through a Context (the shape of
// golang.org/x/tools/go/analysis).
//
// Detection never changes the caller's model. Normalize makes a working
// copy (functions inlined, constants folded, shapes inferred
// symbolically) and keeps a map from every copied node back to the
// original, so findings name original nodes. Detectors work on the copy:
// they find candidate subgraphs by structure, evaluate them with the
// kernels on probe positions (Probe), and fit the parameters of a scheme
// from the values (fit.go). Names of nodes and values, producer strings
// and metadata are never evidence.
//
// The unit of knowledge is a Finding: a scheme, the attention layers it
// reaches, the original nodes that carry it, the vocabulary params of
// DESIGN.md (what reports show) and typed evidence (what rewrites and
// codegen use without detecting again).
//
// It is not a general ONNX optimiser: normalisation serves detection, and
// the working copy is never saved.
package passes
