// Package testmodels holds the test corpus of onnxpe: models exported from
// PyTorch (under models/, with the manifest of their ground truth) and Go
// builders for models the exporter does not produce (newer opsets, fused
// nodes, external data, subgraphs, shared tables, and large synthetic
// graphs for benchmarks).
//
// It is for tests and benchmarks; nothing in the tool depends on it.
package testmodels
