// Package probe evaluates values of the working copy with onnxpe's kernels
// for chosen inputs (probe.go: positions, masks, a KV cache, parameters
// synthesised by role), builds standalone models from parts of it for
// golden vectors (extract.go), finds where an encoding reads its positions
// (positions.go) and the tables it reads (tables.go), and holds the fits
// and exact arithmetic several schemes share (fit.go, exact.go, angles.go).
// Numbers decide detection: the detectors probe candidates with it.
package probe
