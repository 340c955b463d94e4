package disentangled

import (
	"fmt"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/work"
)

// RewriteDisentangled stores DeBERTa's bucket function.
var Rewrite = &passes.Pass[*rewrite.Change]{
	Name: "rewrite_disentangled",
	Doc: `Replace DeBERTa's log-bucket computation by a table gathered at q - k.

The relative position of every distance q - k from -(N-1) to N-1 (N is
--max-positions, else 4096) is what the model's own bucket function gives
(evaluated with the distances replaced): a constant table of 2N-1
entries gathered at q - k + N-1 where the model computed signs,
logarithms and ceilings. Relative positions that are not bucketed
(DeBERTa v2 with position_buckets <= 0: q - k clamped into the relative
table) are left, with that reason: a Clip is as cheap as a Gather.`,
	Requires: []passes.Analyzer{work.Normalize, Detect, rewrite.Edit},
	Run: func(c *passes.Context) (*rewrite.Change, error) {
		r := rewrite.Of(c)
		return r.Findings(c, rewrite.Findings{Pass: "rewrite_disentangled", Scheme: Name, Detect: Detect,
			Do: func(w *work.Work, f *passes.Finding, _ *rewrite.Change) error { return disentangled(r, w, f) }})
	},
}

// disentangled stores DeBERTa's bucket function.
func disentangled(r *rewrite.Rewrite, w *work.Work, f *passes.Finding) error {
	ev, ok := f.Evidence.(*Evidence)
	p, ok2 := f.Params.(*Params)
	if !ok || !ok2 {
		return fmt.Errorf("%w: no disentangled evidence", rewrite.ErrRewrite)
	}
	if p.PositionBuckets == nil {
		return fmt.Errorf("%w: position_buckets null: the relative positions are q - k clamped into the relative table (no logarithmic buckets), a Range, a Sub and a Clip per term that a table gathered at q - k would only replace by a Gather; nothing to store", rewrite.ErrRewrite)
	}
	rel := rewrite.WorkValue(w, ev.Relative)
	if rel == nil {
		return fmt.Errorf("%w: the relative positions %q are not a value of the model", rewrite.ErrRewrite, ev.Relative)
	}
	bucket := func(d int) int { return ev.Buckets[d+ev.MaxDist] }
	// The distances q - k and the bucket function's output, read by value
	// at a length long enough for the logarithmic buckets.
	L := min(max(64, 4*ev.Span), ev.MaxDist+1)
	pr := probe.NewProbe(w, 1, L, 0)
	var dist, out *graph.Value
	for _, n := range w.Cone(rel) {
		for _, o := range n.Outputs() {
			if w.OrigValue(o) == "" {
				continue
			}
			t, err := pr.Value(o)
			if err != nil || t.Len() != L*L {
				continue
			}
			x := t.Float64s()
			isDist, isBucket := true, true
			for i := 0; i < L && (isDist || isBucket); i++ {
				for j := 0; j < L; j++ {
					if x[i*L+j] != float64(i-j) {
						isDist = false
					}
					if x[i*L+j] != float64(bucket(i-j)) {
						isBucket = false
					}
				}
			}
			switch {
			case isDist && dist == nil && t.Rank() == 2 && w.ElemType(o).IsInt():
				dist = o
			case isBucket && !isDist && out == nil && dist != nil && t.Rank() == 2:
				out = o // the first bucketed value: the function's output
			}
		}
	}
	if dist == nil || out == nil {
		return fmt.Errorf("%w: no values hold q - k and its bucket", rewrite.ErrRewrite)
	}
	n := r.MaxPositions()
	row := make([]int64, 2*n-1)
	for i := range row {
		row[i] = int64(i - (n - 1))
	}
	cut := kernels.FromSlice([]int{1, 2*n - 1}, row)
	if dt := w.ElemType(dist); dt != graph.Int64 {
		cut = work.CastInts(cut, dt)
	}
	pr = probe.NewProbe(w, 1, 2*n-1, 0)
	pr.Budget = 1 << 20
	pr.SetCuts(map[*graph.Value]*kernels.Tensor{dist: cut})
	t, err := pr.Value(out)
	if err != nil || t.Len() != 2*n-1 {
		return fmt.Errorf("%w: evaluating the buckets at distances ±%d: %v", rewrite.ErrRewrite, n-1, err)
	}
	dt := w.ElemType(out)
	tab, err := r.Table("onnxpe_relative_buckets", dt, []int64{int64(2*n - 1)}, t.Float64s())
	if err != nil {
		return err
	}
	om, err := r.Lookup(rewrite.MainName(w, out))
	if err != nil {
		return err
	}
	dm, err := r.Lookup(rewrite.MainName(w, dist))
	if err != nil {
		return err
	}
	idx := r.Op1("Add", []*graph.Value{r.CastInt64(dm, w.ElemType(dist)), r.ScalarInt(int64(n - 1))})
	om.ReplaceKeepingName(rewrite.Typed(r.Op1("Gather", []*graph.Value{tab, idx}, graph.IntAttr("axis", 0)), dt, 2))
	return nil
}
