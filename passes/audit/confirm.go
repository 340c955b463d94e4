package audit

import (
	"fmt"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/schemes"
	"github.com/onnxpe/onnxpe/passes/work"
)

// confirm gives every detector's finding its evidence: for the schemes
// that change the blocks' scores, the score test of the blocks it reaches
// (a block whose scores do not change with the positions is left out of
// the finding, and a finding left with no block is not reported: --trace
// says why); where the test does not confirm it, the scheme's own
// measurement.
func confirm(c *passes.Context, all []*passes.Finding) []*passes.Finding {
	w := work.Of(c)
	tests := map[int]*attn.ScoreTest{}
	for b, t := range passes.Result(c, attn.Scores) {
		tests[b.Index] = t
	}
	var out []*passes.Finding
	for _, f := range all {
		sc := schemes.Lookup(f.Scheme)
		if sc == nil {
			out = append(out, f)
			continue
		}
		if sc.Relative && !f.Fused && len(f.Layers) > 0 {
			var flat []int
			f.Layers, flat = partitionLayers(f.Layers, tests)
			for _, l := range flat {
				c.Miss("evidence", fmt.Sprintf("%s at layer %d", f.Scheme, l), "with q and k held fixed, the block's scores do not change with the positions: the block receives no position information from this encoding", 2)
			}
			if len(f.Layers) == 0 {
				continue
			}
			f.Measured = relativeMeasured(f.Layers, tests)
		}
		if f.Measured == nil && sc.Measure != nil {
			f.Measured = sc.Measure(f)
		}
		if f.Measured == nil && f.Fused {
			f.Measured = &passes.Measured{Test: passes.TestFusedContract, Summary: "a fused op whose contract applies the encoding: " + strings.Join(origOps(w, f), ", ")}
		}
		out = append(out, f)
	}
	return out
}

// partitionLayers splits layers into those whose score test does not show
// scores that ignore the positions (kept) and those whose test does
// (flat).
func partitionLayers(layers []int, tests map[int]*attn.ScoreTest) (kept, flat []int) {
	for _, l := range layers {
		if t := tests[l]; t != nil && t.Uniform() {
			flat = append(flat, l)
		} else {
			kept = append(kept, l)
		}
	}
	return kept, flat
}

// relativeMeasured is the score test of the layers as evidence, when it
// ran on every one and shows scores of key − query alone (nil otherwise).
func relativeMeasured(layers []int, tests map[int]*attn.ScoreTest) *passes.Measured {
	change, residual, n, shift := 0.0, 0.0, 0, int64(0)
	for _, l := range layers {
		t := tests[l]
		if t == nil || !t.Relative() {
			return nil
		}
		change, residual, n = max(change, t.Change), max(residual, t.Residual, t.Shifted), t.Len
		shift = t.Shift
	}
	moved := ""
	if shift > 0 {
		moved = fmt.Sprintf(", also with every position moved by %d", shift)
	}
	return &passes.Measured{Test: passes.TestRelativeScores,
		Summary: fmt.Sprintf("with q and k held fixed over %d positions, the scores of the %s, less each query's own, depend on key − query alone%s, and change with it",
			n, layerWord(len(layers)), moved),
		Change: passes.Sig3(change), Residual: passes.Sig3(residual)}
}

func layerWord(n int) string {
	if n == 1 {
		return "layer"
	}
	return fmt.Sprintf("%d layers", n)
}

// origOps names the ops of a finding's nodes that are not ONNX's
// primitives (the fused ops and RotaryEmbedding), once each.
func origOps(w *work.Work, f *passes.Finding) []string {
	names := map[string]bool{}
	for _, n := range f.Nodes {
		names[n] = true
	}
	var out []string
	w.Orig.Graph.Walk(func(n *graph.Node) {
		if names[n.Name] && (!work.IsONNX(n) || work.IsRotaryOp(n)) && !slices.Contains(out, n.OpType) {
			out = append(out, n.OpType)
		}
	})
	if len(out) == 0 {
		out = append(out, "the op its nodes name")
	}
	return out
}
