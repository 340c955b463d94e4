//go:build !ort

package ortpeer

// Available reports whether this binary was built with ONNX Runtime
// support (build tag ort).
func Available() bool { return false }
