// Command onnxpe audits, rewrites and verifies the positional encodings of
// ONNX models. See `onnxpe --help`.
package main

import (
	"os"

	"github.com/onnxpe/onnxpe/internal/cli"
)

func main() { os.Exit(cli.Main()) }
