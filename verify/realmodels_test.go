package verify_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/verify"
)

// TestRealModelsAgainstThemselves runs the default sweep on the real
// models vendored for the audit (passes/testdata/realmodels: graphs
// written by other people's tools) against a second copy of themselves.
// Each must be equal, or be refused as a model that cannot run (an op
// the executor does not have, weights that are absent): never an
// internal error or a spurious difference. The refused ones are counted
// and listed.
func TestRealModelsAgainstThemselves(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("..", "passes", "testdata", "realmodels", "*", "model.onnx"))
	if len(dirs) < 10 {
		t.Fatalf("only %d real models", len(dirs))
	}
	equal, refused, heavy := 0, 0, 0
	for _, p := range dirs {
		name := filepath.Base(filepath.Dir(p))
		a, err := graph.Load(p)
		if err != nil { // weights in an external file that is not vendored
			refused++
			t.Logf("refused %s: %v", name, err)
			continue
		}
		// DORT graphs take their weights as inputs at fixed sizes: a run
		// is seconds of arithmetic, too long for a unit test (they are
		// equal to themselves: onnxpe verify on them exits 0).
		if n := inputElements(a); n > 1<<22 {
			heavy++
			t.Logf("skipped %s: %d input elements", name, n)
			continue
		}
		b, _ := graph.Load(p)
		r, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1})
		var me *verify.ModelError
		switch {
		case err != nil && errors.As(err, &me) && !errors.Is(err, kernels.ErrInternal):
			refused++
			t.Logf("refused %s: %v", name, err)
		case err != nil:
			t.Errorf("%s: %v", name, err)
		case !r.Equal:
			t.Errorf("%s: %s", name, r.Summary)
		default:
			equal++
		}
	}
	t.Logf("real models: %d equal to themselves, %d refused, %d skipped as too heavy", equal, refused, heavy)
	if equal < len(dirs)/2 {
		t.Errorf("only %d of %d real models verified", equal, len(dirs))
	}
}

// inputElements counts the elements of m's fed inputs at their declared
// fixed sizes (symbolic sizes count 1).
func inputElements(m *graph.Model) int64 {
	var total int64
	for _, v := range kernels.FeedInputs(m) {
		n := int64(1)
		dims, _ := v.Type.Shape()
		for _, d := range dims {
			if d.Known {
				n *= d.Value
			}
		}
		total += n
	}
	return total
}
