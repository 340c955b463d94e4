// Package depgraph holds no code: its test checks the import graph of the
// module against the picture in DESIGN.md ("Packages and who may import
// whom") — dependencies point one way, only graph touches protobuf types,
// ONNX Runtime (cgo) is reached only under the ort build tag.
package depgraph
