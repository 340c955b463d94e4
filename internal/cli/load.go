package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/onnxpe/onnxpe/graph"
)

// loadModel loads a model, turning every failure into a one-line input
// error that names the file. Each rule of the format the file breaks and
// the loader tolerates (graph.Model.Repairs: nodes out of order, a domain
// missing from the opset imports, no producer) is printed on warn as one
// "onnxpe: warning:" line; warn may be nil to say nothing (a file the
// command wrote itself and has warned about already).
func loadModel(warn io.Writer, path string) (*graph.Model, error) {
	return loadModelWith(warn, path, graph.LoadOptions{})
}

// loadModelWith is loadModel with load options.
func loadModelWith(warn io.Writer, path string, opts graph.LoadOptions) (*graph.Model, error) {
	m, err := graph.LoadWith(path, opts)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path == path {
			return nil, badInput("%s: %v", path, pe.Err)
		}
		return nil, badInput("%s: %v", path, err)
	}
	if warn != nil {
		for _, r := range m.Repairs() {
			fmt.Fprintf(warn, "onnxpe: warning: %s: %s\n", path, r.Msg)
		}
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

// warnMissingExternal prints one warning for each external data file of
// m's initializers that is absent (a model loaded with
// AllowMissingExternal), saying what follows (why).
func warnMissingExternal(w io.Writer, path string, m *graph.Model, why string) {
	missing := map[string]bool{}
	for _, v := range m.Graph.Initializers {
		if e := v.Const.External(); e != nil && e.Missing() && !missing[e.Location] {
			missing[e.Location] = true
			fmt.Fprintf(w, "onnxpe: warning: %s: external data file %q is missing: %s\n", path, e.Location, why)
		}
	}
}
