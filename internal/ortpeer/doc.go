// Package ortpeer runs models in ONNX Runtime, the most used ONNX runtime,
// as a second oracle beside onnxpe's own executor: differential tests and
// `verify --peer ort` compare the two.
//
// The package needs cgo and ONNX Runtime's shared library; it is built only
// with the build tag `ort`. The library comes from the npm package
// onnxruntime-node (`make ort`); ONNXPE_ORT_LIB names it. Without the tag,
// Available reports false and nothing links against ONNX Runtime.
package ortpeer

import "os"

// EnvLib is the environment variable naming libonnxruntime.so.
const EnvLib = "ONNXPE_ORT_LIB"

// LibPath is the library named by ONNXPE_ORT_LIB, or "".
func LibPath() string { return os.Getenv(EnvLib) }
