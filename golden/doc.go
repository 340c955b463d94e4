// Package golden holds the expected `onnxpe audit --json` report of every
// model in testmodels/ — the PyTorch exports, their ONNX Runtime basic and
// extended optimised saves (<name>.ort_basic.json, <name>.ort_extended.json)
// and the Go-built models — one JSON file per model in testdata/, compared
// byte for byte with what the command prints, and refreshed with
// `go test ./golden -update`.
//
// The files are not their own proof: a second test checks every file
// against the ground truth of testmodels/manifest.json and of the Go-built
// models (schemes, layers and every truth parameter, fitted values within
// 0.1%), and against the report's JSON Schema, so an expectation is never
// only what the code under test computed.
package golden
