// Package verify checks that two ONNX models compute the same thing, with
// inputs chosen to exercise positions: it reads what each input means
// from the graph (token ids and the vocabulary from the table they index,
// position ids, attention masks, past keys/values and the axis they grow
// along), finds the largest position a stored table allows by reading and
// running the model, and sweeps a single-token step, a short padded batch,
// the longest sequence, positions near the largest supported one, and
// KV-cache steps. The rows of a batch sit at different positions (by their
// padding, their cache's history, positions they repeat or a shift of
// their own), so that a model reading one row's positions for all differs. Both models run in onnxpe's kernels (and ONNX Runtime in
// builds with the ort tag); every output is compared under a tolerance
// policy per element type, and the report says, per input set and output,
// the largest absolute and relative error, the largest ULP distance, the
// mismatch count, the worst element and the sequence position where the
// difference starts. Reports print as a table, JSON and JUnit XML.
//
// Compare compares two models, CompareReference a model with stored
// outputs, Precision audits how precisely a model's cos/sin or
// sinusoidal values hold positions in its float type.
//
// The analysis works on any model; the audit's findings (package passes)
// can sharpen it through Hints. verify does not detect or rewrite
// positional encodings itself.
package verify
