package cli

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/onnxpe/onnxpe/graph"
)

// loadModel loads a model, turning every failure into a one-line input
// error that names the file.
func loadModel(path string) (*graph.Model, error) {
	m, err := graph.Load(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path == path {
			return nil, badInput("%s: %v", path, pe.Err)
		}
		return nil, badInput("%s: %v", path, err)
	}
	return m, nil
}

// humanBytes prints a byte count with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
