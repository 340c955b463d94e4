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
//
// codegen/<model>/<go|c>/ holds the source `onnxpe codegen` generates for a
// model of each scheme and form (every file with a .golden suffix, so that
// the go tool does not build it), compared byte for byte and refreshed by
// the same -update: a change of the generator shows in their diffs. Their
// proof is codegen's acceptance test, which builds and runs the generated
// tests of every model against the executor's golden vectors.
package golden
