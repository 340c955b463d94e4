package sinusoidal

import (
	"fmt"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"math"
	"slices"
)

// planSinusoidal plans the extension of a stored sinusoidal table: its own
// formula, continued (a computed one needs nothing).
func PlanSinusoidal(x *rewrite.Extended, f *passes.Finding) (*rewrite.ExtendItem, error) {
	it, where := rewrite.NewTableItem(f)
	if x.Opts.Method != "" {
		return nil, rewrite.ExtendErr("--method %s does not fit %s: sinusoidal tables are continued with their own formula (no --method)", x.Opts.Method, where)
	}
	p := f.Params.(*Params)
	if p.Computed || p.MaxPositions == nil {
		it.Form, it.Method = rewrite.FormComputed, "none"
		it.Note("computed in the graph for any position: nothing to enlarge")
		return it, nil
	}
	ev, ok := f.Evidence.(*absolute.TableEvidence)
	if !ok || ev.Table == "" {
		return nil, rewrite.ExtendErr("%s: no stored table found", where)
	}
	off := 0
	if p.PositionOffset != nil {
		off = *p.PositionOffset
	}
	n := *p.MaxPositions - off
	it.Form, it.Method, it.OldMax = rewrite.FormTable, rewrite.MethodOwnFormula, passes.Ptr(n)
	if f.Fused {
		it.Form = rewrite.FormFused
	}
	if p.Base != nil {
		it.Params["base"] = *p.Base
	}
	it.Params["freq_denominator"] = p.FreqDenominator
	it.Params["layout"] = p.Layout
	it.Plan = &absolute.TablePlan{Ev: ev, Offset: off, N: n, Fill: sinusoidRows}
	return it, nil
}

// sinusoidRows continues a stored sinusoidal table with the formula the
// audit measured: column pairs (sin, cos) of frequency ω_k at angle
// ω_k·(row - row0), checked on every stored row first.
func sinusoidRows(x *rewrite.Extended, it *rewrite.ExtendItem, tab *rewrite.TableConst, vals []float64, rows int) error {
	ev := it.Plan.(*absolute.TablePlan).Ev
	p := it.Finding.Params.(*Params)
	if len(ev.Pairs) == 0 || len(ev.Pairs) != len(ev.Omega) {
		return rewrite.ExtendErr("the sinusoidal table has no measured frequencies")
	}
	omega := slices.Clone(ev.Omega)
	// The formula's frequencies, when they are those measured.
	if p.Base != nil && p.Dim > 0 {
		den := float64(p.Dim / 2)
		if p.FreqDenominator == "d/2-1" {
			den--
		}
		exact := make([]float64, len(omega))
		ok := den > 0
		order := make([]int, len(omega))
		for k := range order {
			order[k] = k
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case omega[a] > omega[b]:
				return -1
			case omega[a] < omega[b]:
				return 1
			}
			return 0
		})
		for rank, k := range order {
			exact[k] = math.Pow(*p.Base, -float64(rank)/den)
			if math.Abs(exact[k]/omega[k]-1) > 1e-4 {
				ok = false
			}
		}
		if ok {
			omega = exact
		} else {
			it.Note("the measured frequencies are not base^(-k/%s) exactly: the new rows use the measured ones", p.FreqDenominator)
		}
	}
	// Which column holds what, and the row of angle 0.
	kind := make([]int, tab.Width) // -1 zero, else 2k (sin) or 2k+1 (cos)
	for j := range kind {
		kind[j] = -1
	}
	for k, pr := range ev.Pairs {
		if pr[0] >= tab.Width || pr[1] >= tab.Width {
			return rewrite.ExtendErr("the sinusoidal pairs do not fit the table's %d columns", tab.Width)
		}
		kind[pr[0]], kind[pr[1]] = 2*k, 2*k+1
	}
	isZero := func(r int) bool {
		for j := 0; j < tab.Width; j++ {
			if tab.Vals[r*tab.Width+j] != 0 {
				return false
			}
		}
		return true
	}
	row0 := -1
	for r := 0; r < tab.Rows && row0 < 0; r++ {
		ok := true
		for j, kd := range kind {
			v := tab.Vals[r*tab.Width+j]
			if kd >= 0 && kd%2 == 0 && math.Abs(v) > 1e-6 || kd >= 0 && kd%2 == 1 && math.Abs(v-1) > 1e-6 {
				ok = false
				break
			}
		}
		if ok {
			row0 = r
		}
	}
	if row0 < 0 {
		return rewrite.ExtendErr("no row of the sinusoidal table has angle 0")
	}
	value := func(r, j int) float64 {
		kd := kind[j]
		if kd < 0 {
			return 0
		}
		th := omega[kd/2] * float64(r-row0)
		if kd%2 == 0 {
			return math.Sin(th)
		}
		return math.Cos(th)
	}
	tol := 2e-4
	if probe.IsHalfType(tab.Dt) {
		tol = 4e-3
	}
	zeros := 0
	for r := 0; r < tab.Rows; r++ {
		if isZero(r) {
			zeros++
			continue
		}
		for j := range kind {
			om := 0.0
			if kind[j] >= 0 {
				om = omega[kind[j]/2]
			}
			if d := math.Abs(tab.Vals[r*tab.Width+j] - value(r, j)); d > tol*(1+math.Abs(float64(r-row0))*om*1e-3) {
				return rewrite.ExtendErr("row %d, column %d of the sinusoidal table is %.7g, its formula gives %.7g: the table does not follow it", r, j, tab.Vals[r*tab.Width+j], value(r, j))
			}
		}
	}
	for r := tab.Rows; r < rows; r++ {
		for j := range kind {
			vals[r*tab.Width+j] = value(r, j)
		}
	}
	if zeros > 0 {
		it.Note("%d zero row(s) of the table (padding) kept", zeros)
	}
	it.Note("new rows: sin/cos of ω_k·(row - %d) in float64, ω_k from base %s", row0, baseOrMeasured(p))
	return nil
}

func baseOrMeasured(p *Params) string {
	if p.Base == nil {
		return "(measured)"
	}
	return fmt.Sprintf("%g, denominator %s", *p.Base, p.FreqDenominator)
}
