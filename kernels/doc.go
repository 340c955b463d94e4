// Package kernels is onnxpe's reference executor: a runtime tensor type,
// an op registry keyed by (domain, op type, opset range), plain Go kernels
// over typed slices, and a Session that runs a graph.Model (If/Loop/Scan
// bodies and model-local functions included).
//
// It exists so that other packages can evaluate models and subgraphs
// numerically: passes probe candidate subgraphs, verify runs an original and
// a rewritten model side by side, codegen computes golden vectors. Kernels
// favour clarity and exactness (float16 and bfloat16 are computed in float32
// and rounded once per op, as ONNX Runtime does; Options.Accumulate64 sums
// in float64) over raw speed, although MatMul-like ops are blocked.
//
// A Session packs the constant weights of its matrix products once,
// recycles freed intermediates through a per-session buffer pool, counts
// the intermediate storage each run holds (Session.LastRunStats; views
// share storage and count once), and spreads large elementwise, softmax and
// normalisation work over Options.Threads goroutines.
//
// It is not a general ONNX runtime: it covers the ops that transformer
// exports and ONNX Runtime's optimizer produce (see the registry), not
// sequences, maps, optionals, strings, complex numbers, training or
// quantised ops, and it does no graph optimisation or shape inference.
//
// The fused ALiBi op of this project is documented at ALiBiBias.
package kernels
