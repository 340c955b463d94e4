package passes

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

// RoPERules lists the RoPE items of the extension (nil for other
// schemes).
func (x *Extended) RoPERules() []*ExtendItem {
	var out []*ExtendItem
	for _, it := range x.Report.Items {
		if it.Rule != nil {
			out = append(out, it)
		}
	}
	return out
}

// ErrNoReference is returned by Reference when no reference can be built
// for the extension (the rule composed with the model's, a base the
// audit could not fit); the reason follows it.
var ErrNoReference = fmt.Errorf("no reference")

// Reference builds the model the extension of a RoPE model is checked
// against: the original model (the same weights) whose rotations read
// cos/sin caches of N positions computed, independently of the
// extension's code, from the published formula of the rule
// (ReferenceRoPE, from the base the audit fitted): unfused rotations are
// fused into RotaryEmbedding nodes reading those caches (as onnxpe
// rewrite does), the caches of fused ops are replaced. seqLen is the
// length dynamic NTK is evaluated at (the largest position + 1 of the
// inputs it will run on); other rules ignore it.
func (x *Extended) Reference(seqLen int) (*graph.Model, error) {
	n := x.Opts.To
	r, err := newRewrite(x.ctx.Model, RewriteOptions{MaxPositions: n})
	if err != nil {
		return nil, err
	}
	w := x.ctx.Work()
	r.work = w
	ch := r.begin("reference", RoPEScheme)
	for _, it := range x.RoPERules() {
		if it.plan.amp0 != 1 || it.Expect == nil {
			return nil, fmt.Errorf("%w: the rule is composed with the model's own, which no published formula describes", ErrNoReference)
		}
		p := it.plan.p
		if p.Base == nil {
			return nil, fmt.Errorf("%w: the audit could not fit the base of the RoPE of layers %s", ErrNoReference, layerList(it.Layers))
		}
		inv, amp := ReferenceRoPE(*it.Rule, *p.Base, p.RotaryDim, seqLen)
		if len(inv) != len(it.plan.ev.Pairs) {
			return nil, fmt.Errorf("%w: %d reference frequencies for %d pairs", ErrNoReference, len(inv), len(it.plan.ev.Pairs))
		}
		ev := it.plan.ev
		caches := func(rows, half int, col func([2]int) int) ([]float64, []float64, error) {
			cs := make([]float64, rows*half)
			sn := make([]float64, rows*half)
			for pos := 0; pos < rows; pos++ {
				for k, pr := range ev.Pairs {
					th := float64(pos) * inv[k]
					cs[pos*half+col(pr)] = amp * math.Cos(th)
					sn[pos*half+col(pr)] = amp * math.Sin(th)
				}
			}
			return cs, sn, nil
		}
		if it.Form == FormComputed && p.MultimodalSections != nil {
			// M-RoPE reads a position stream per section, which
			// RotaryEmbedding does not: the reference keeps the model's
			// graph and holds the formula's frequencies (and amplitude).
			if err := x.inPlaceReference(r, it, inv, amp); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrNoReference, err)
			}
			continue
		}
		if it.Form != FormFused {
			pos := ev.Positions
			if pos == nil {
				pos = w.positionsInput(ev)
			}
			if err := r.ropeWith(w, it.f, ch, pos, caches); err != nil {
				return nil, fmt.Errorf("%w: fusing the RoPE of layers %s with the reference caches: %v", ErrNoReference, layerList(it.Layers), err)
			}
			continue
		}
		// Fused ops: their caches, column k holding pair k by contract.
		st := ev.Stored
		for i, cols := range [][]TableColumn{st.Cos, st.Sin} {
			sin := i == 1
			v, err := r.lookup(cols[0].Table)
			if err != nil {
				return nil, err
			}
			t := v.Const
			if t == nil || v.Producer() != nil || len(t.Dims()) != 2 {
				return nil, fmt.Errorf("%w: the cache %q is not a [positions, columns] initializer", ErrNoReference, cols[0].Table)
			}
			width := int(t.Dims()[1])
			vals := make([]float64, n*width)
			for k, c := range cols {
				for pos := 0; pos < n; pos++ {
					th := float64(pos) * inv[k]
					if sin {
						vals[pos*width+c.Col] = amp * math.Sin(th)
					} else {
						vals[pos*width+c.Col] = amp * math.Cos(th)
					}
				}
			}
			nt, err := graph.TensorFromFloat64(v.Name, t.DataType(), []int64{int64(n), int64(width)}, vals)
			if err != nil {
				return nil, err
			}
			v.Const = nt
			v.Type = graph.TensorType(nt.DataType(), graph.Dims(nt.Dims()...))
		}
	}
	r.end(ch)
	// The other constants read at positions (masks), as the extension
	// enlarged them: the reference differs from the extended model only
	// in its cos/sin.
	for _, wc := range x.widened {
		dst := r.M.Graph.Lookup(wc.name)
		if dst == nil {
			return nil, fmt.Errorf("%w: the constant %q is not in the model", ErrNoReference, wc.name)
		}
		if dst.Const != nil && dst.Producer() == nil {
			dst.Const = wc.t
			dst.Type = graph.TensorType(wc.t.DataType(), graph.Dims(wc.t.Dims()...))
			continue
		}
		nv, err := r.addConst(wc.t.Clone())
		if err != nil {
			return nil, err
		}
		dst.ReplaceAllUsesWith(nv)
	}
	if err := r.finish(); err != nil {
		return nil, err
	}
	r.M.Graph.ValueInfo = nil // sizes changed; the reference is only run
	return r.M, nil
}

// Equivalent reports whether RoPE params read by the audit describe the
// same frequencies and amplitude as the item's rule: settings the graph
// cannot tell apart (llama3's original length when no frequency falls
// between its bands, YaRN's when the ramp is a step) give the same
// model.
func (it *ExtendItem) Equivalent(got Params) bool {
	p, ok := got.(*RoPEParams)
	if it.Rule == nil || !ok || p.Scaling == nil || p.Base == nil || p.Factor == nil {
		return false
	}
	u := RoPERule{Method: *p.Scaling, Factor: *p.Factor, Low: deref(p.LowFreqFactor), High: deref(p.HighFreqFactor),
		BetaFast: deref(p.BetaFast), BetaSlow: deref(p.BetaSlow), AttentionFactor: deref(p.AttentionFactor)}
	if p.OriginalMaxPositions != nil {
		u.Orig = *p.OriginalMaxPositions
	}
	switch {
	case u.Method == "ntk" && p.Dynamic != nil && *p.Dynamic:
		u.Method = MethodDynamicNTK
	case u.Method != it.Rule.Method:
		return false
	}
	if u.Method != it.Rule.Method || p.RotaryDim != it.Rule.RotaryDim || *p.Base != it.Rule.Base {
		return false
	}
	L := it.Rule.Orig
	for _, l := range []int{1, L, 2 * L, 4 * L} {
		a, aa := ReferenceRoPE(u, *p.Base, p.RotaryDim, l)
		b, ba := ReferenceRoPE(*it.Rule, it.Rule.Base, it.Rule.RotaryDim, l)
		if math.Abs(aa-ba) > 1e-9*ba {
			return false
		}
		for k := range b {
			if math.Abs(a[k]-b[k]) > 1e-12*b[k] {
				return false
			}
		}
	}
	return true
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// inPlaceReference writes the reference frequencies inv (pair order) and
// amplitude into the frequency constant of the rewrite r, with the
// extension's own edits pointed at r.
func (x *Extended) inPlaceReference(r *Rewrite, it *ExtendItem, inv []float64, amp float64) error {
	saved, changed := x.r, x.changed
	defer func() { x.r, x.changed = saved, changed }()
	x.r, x.changed = r, nil
	scratch := &ExtendItem{}
	if err := x.ropeFrequencies(scratch, it.plan, it.Rule, inv); err != nil {
		return err
	}
	return x.ropeAmplitude(scratch, it.plan, amp)
}
