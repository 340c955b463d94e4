package learned

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/rewrite"
)

// planLearned plans the extension of a learned table: hierarchical
// decomposition.
func PlanLearned(x *rewrite.Extended, f *passes.Finding) (*rewrite.ExtendItem, error) {
	o := x.Opts
	if o.Method != "" && o.Method != rewrite.MethodHierarchical {
		return nil, rewrite.ExtendErr("the model has a learned position table besides RoPE: --method %s does not fit it", o.Method)
	}
	it, where := rewrite.NewTableItem(f)
	p := f.Params.(*Params)
	ev, ok := f.Evidence.(*absolute.TableEvidence)
	if !ok || ev.Table == "" || p.MaxPositions == nil {
		return nil, rewrite.ExtendErr("%s: no stored table found", where)
	}
	off := 0
	if p.PositionOffset != nil {
		off = *p.PositionOffset
	}
	n := *p.MaxPositions - off
	if n < 2 {
		return nil, rewrite.ExtendErr("%s holds %d positions", where, n)
	}
	if o.To > n*n {
		return nil, rewrite.ExtendErr("--method hierarchical reaches at most n² = %d positions from a table of %d; --to %d is more", n*n, n, o.To)
	}
	alpha := o.Alpha
	if alpha == 0 {
		alpha = rewrite.DefaultAlpha
	}
	it.Form, it.Method, it.OldMax = rewrite.FormTable, rewrite.MethodHierarchical, passes.Ptr(n)
	it.Params = map[string]any{"method": rewrite.MethodHierarchical, "alpha": alpha}
	it.Plan = &absolute.TablePlan{Ev: ev, Offset: off, N: n, Transposed: true, Fill: fillHierarchical}
	if f.Fused {
		it.Form = rewrite.FormFused
	}
	return it, nil
}

// fillHierarchical fills the new rows of a learned table by hierarchical
// decomposition.
func fillHierarchical(x *rewrite.Extended, it *rewrite.ExtendItem, tab *rewrite.TableConst, vals []float64, rows int) error {
	tp := it.Plan.(*absolute.TablePlan)
	hierarchical(vals, tab.Vals, tp.Offset, tp.N, x.Opts.To, tab.Width, it.Params["alpha"].(float64))
	it.Note("position p >= %d gets alpha·u_i + (1-alpha)·u_j with i = p div %d, j = p mod %d and u_i = (row_i - alpha·row_0)/(1-alpha) (rows counted from position 0); the first %d rows are the trained table, bit for bit", tp.N, tp.N, tp.N, tp.N)
	return nil
}

// hierarchical fills rows offset+n..offset+N-1 of dst from the table src
// (Su, 2020, kexue.fm/archives/7947: with 1-based positions,
// q_{(i-1)·n+j} = α·u_i + (1-α)·u_j and u_i = (p_i - α·p_1)/(1-α), so
// that q_1..q_n = p_1..p_n; here with 0-based positions, position
// i·n + j gets α·u_i + (1-α)·u_j).
func hierarchical(dst, src []float64, offset, n, N, width int, alpha float64) {
	row := func(i int) []float64 { return src[(offset+i)*width : (offset+i+1)*width] }
	p0 := row(0)
	u := func(i, c int) float64 { return (row(i)[c] - alpha*p0[c]) / (1 - alpha) }
	for p := n; p < N; p++ {
		i, j := p/n, p%n
		for c := 0; c < width; c++ {
			dst[(offset+p)*width+c] = alpha*u(i, c) + (1-alpha)*u(j, c)
		}
	}
}
