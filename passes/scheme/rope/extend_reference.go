package rope

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/work"
)

// RoPERules lists the RoPE items of the extension (nil for other
// schemes).
func Rules(x *rewrite.Extended) []*rewrite.ExtendItem {
	var out []*rewrite.ExtendItem
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
//
// The reference keeps the model's own precision, so that at large
// positions it differs from the extension only by what the rule changes:
// the formula scales each frequency of the fitted base by a factor
// (ReferenceFrequencies), which multiplies the model's own frequencies
// (those its graph multiplies the positions by, or those measured from
// its tables; the base's when its own rule is replaced), and the cos/sin
// of RoPE computed in the graph are those of the angles rounded as the
// graph rounds them (its product's element type, then its scale and
// cast), of stored tables and fused caches float64 (what the extension
// promises for them).
func Reference(x *rewrite.Extended, seqLen int) (*graph.Model, error) {
	n := x.Opts.To
	r, err := rewrite.NewRewrite(x.Ctx.Model, passes.RewriteOptions{MaxPositions: n})
	if err != nil {
		return nil, err
	}
	w := work.Of(x.Ctx)
	r.Work = w
	ch := r.Begin("reference", Name)
	for _, it := range Rules(x) {
		pl := it.Plan.(*ropePlan)
		if pl.amp0 != 1 || it.Expect == nil {
			return nil, fmt.Errorf("%w: the rule is composed with the model's own, which no published formula describes", ErrNoReference)
		}
		p := pl.p
		if p.Base == nil {
			return nil, fmt.Errorf("%w: the audit could not fit the base of the RoPE of layers %s", ErrNoReference, rewrite.LayerList(it.Layers))
		}
		ev := pl.ev
		inv, amp, err := ReferenceFrequencies(*pl.rule, ev, p, seqLen)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoReference, err)
		}
		if len(inv) != len(ev.Pairs) {
			return nil, fmt.Errorf("%w: %d reference frequencies for %d pairs", ErrNoReference, len(inv), len(ev.Pairs))
		}
		// sinCos is the cos and sin of pair k at pos: rounded as the
		// graph computes them when it does, else in float64.
		sinCos := func(pos, k int) (float64, float64) {
			th := float64(pos) * inv[k]
			return amp * math.Cos(th), amp * math.Sin(th)
		}
		if a := ev.Angles; it.Form == rewrite.FormComputed && a != nil && a.Type.IsFloat() {
			g := *a
			g.Scale, g.ScaleFrom = amp, "reference"
			f := make([]float64, len(inv))
			for k := range inv {
				f[k] = graph.RoundTo(g.Type, inv[k])
			}
			sinCos = func(pos, k int) (float64, float64) { return g.SinCos(float64(pos), f[k]) }
		}
		caches := func(rows, half int, col func([2]int) int) ([]float64, []float64, error) {
			cs := make([]float64, rows*half)
			sn := make([]float64, rows*half)
			for pos := 0; pos < rows; pos++ {
				for k, pr := range ev.Pairs {
					cs[pos*half+col(pr)], sn[pos*half+col(pr)] = sinCos(pos, k)
				}
			}
			return cs, sn, nil
		}
		if it.Form == rewrite.FormComputed && p.MultimodalSections != nil {
			// M-RoPE reads a position stream per section, which
			// RotaryEmbedding does not: the reference keeps the model's
			// graph and holds the formula's frequencies (and amplitude).
			if err := inPlaceReference(x, r, it, inv, amp); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrNoReference, err)
			}
			continue
		}
		if it.Form != rewrite.FormFused {
			pos := ev.Positions
			if pos == nil {
				pos = positionsInput(w, ev)
			}
			if err := ropeWith(r, w, it.Finding, ch, pos, caches, nil); err != nil {
				return nil, fmt.Errorf("%w: fusing the RoPE of layers %s with the reference caches: %v", ErrNoReference, rewrite.LayerList(it.Layers), err)
			}
			continue
		}
		// Fused ops: their caches, column k holding pair k by contract.
		st := ev.Stored
		for i, cols := range [][]TableColumn{st.Cos, st.Sin} {
			sin := i == 1
			v, err := r.Lookup(cols[0].Table)
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
					cv, sv := sinCos(pos, k)
					if sin {
						cv = sv
					}
					vals[pos*width+c.Col] = cv
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
	r.End(ch)
	// The other constants read at positions (masks), as the extension
	// enlarged them: the reference differs from the extended model only
	// in its cos/sin.
	for _, wc := range x.Widened {
		dst := r.M.Graph.Lookup(wc.Name)
		if dst == nil {
			return nil, fmt.Errorf("%w: the constant %q is not in the model", ErrNoReference, wc.Name)
		}
		if dst.Const != nil && dst.Producer() == nil {
			dst.Const = wc.T
			dst.Type = graph.TensorType(wc.T.DataType(), graph.Dims(wc.T.Dims()...))
			continue
		}
		nv, err := r.AddConst(wc.T.Clone())
		if err != nil {
			return nil, err
		}
		dst.ReplaceAllUsesWith(nv)
	}
	if err := r.Finish(); err != nil {
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
func (rule *Rule) Equivalent(got passes.Params) bool {
	p, ok := got.(*Params)
	if !ok || p.Scaling == nil || p.Base == nil || p.Factor == nil {
		return false
	}
	u := Rule{Method: *p.Scaling, Factor: *p.Factor, Low: deref(p.LowFreqFactor), High: deref(p.HighFreqFactor),
		BetaFast: deref(p.BetaFast), BetaSlow: deref(p.BetaSlow), AttentionFactor: deref(p.AttentionFactor)}
	if p.OriginalMaxPositions != nil {
		u.Orig = *p.OriginalMaxPositions
	}
	if u.Method == rewrite.MethodLlama3 && (p.OriginalMaxPositions == nil || p.LowFreqFactor == nil || p.HighFreqFactor == nil) {
		// The audit leaves the lengths null (the graph fixes only their
		// wavelengths): the rule's setting stands for them when one of
		// the settings read has its wavelengths.
		if !rule.sameBands(p.llama3) {
			return false
		}
		u.Orig, u.Low, u.High = rule.Orig, rule.Low, rule.High
	}
	if u.Method == rewrite.MethodYaRN && (p.OriginalMaxPositions == nil || p.BetaFast == nil || p.BetaSlow == nil) {
		// The audit leaves null what the ramp does not fix: the rule's
		// setting stands for them when its ramp is the one read.
		if !rule.sameRamp(p.CorrectionRange) {
			return false
		}
		u.Orig, u.BetaFast, u.BetaSlow = rule.Orig, rule.BetaFast, rule.BetaSlow
	}
	switch {
	case u.Method == "ntk" && p.Dynamic != nil && *p.Dynamic:
		u.Method = rewrite.MethodDynamicNTK
	case u.Method != rule.Method:
		return false
	}
	if u.Method != rule.Method || p.RotaryDim != rule.RotaryDim || *p.Base != rule.Base {
		return false
	}
	L := rule.Orig
	for _, l := range []int{1, L, 2 * L, 4 * L} {
		a, aa := ReferenceRoPE(u, *p.Base, p.RotaryDim, l)
		b, ba := ReferenceRoPE(*rule, rule.Base, rule.RotaryDim, l)
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

// sameRamp reports whether YaRN's ramp over the rule's pairs is the one
// of the correction range cr (ranges that differ only where no pair lies
// give the same frequencies).
func (rule *Rule) sameRamp(cr []float64) bool {
	if len(cr) != 2 {
		return false
	}
	lo, hi := rule.CorrectionRange()
	for k := 0; k < rule.RotaryDim/2; k++ {
		if math.Abs(rule.ramp(float64(k), lo, hi)-rule.ramp(float64(k), cr[0], cr[1])) > 1e-9 {
			return false
		}
	}
	return true
}

// sameBands reports whether one of the llama3 settings the audit read
// has the rule's wavelengths orig/low and orig/high: the same frequencies.
func (rule *Rule) sameBands(read []llama3Setting) bool {
	same := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Abs(b) }
	for _, c := range read {
		if same(float64(c.orig)/c.low, float64(rule.Orig)/rule.Low) && same(float64(c.orig)/c.high, float64(rule.Orig)/rule.High) {
			return true
		}
	}
	return false
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
func inPlaceReference(x *rewrite.Extended, r *rewrite.Rewrite, it *rewrite.ExtendItem, inv []float64, amp float64) error {
	saved, changed := x.R, x.Changed
	defer func() { x.R, x.Changed = saved, changed }()
	x.R, x.Changed = r, nil
	scratch := &rewrite.ExtendItem{}
	pl := it.Plan.(*ropePlan)
	if err := ropeFrequencies(x, scratch, pl, pl.rule, inv); err != nil {
		return err
	}
	return ropeAmplitude(x, scratch, pl, amp)
}

// ReferenceFrequencies are the frequencies (pair order) and the cos/sin
// amplitude a RoPE finding has under rule u by the published formula
// (ReferenceRoPE, from the fitted base; seqLen as there): the formula
// scales the base's frequency of pair k, base^(-2k/d), by some factor,
// which is applied to the model's own frequency of that pair — the one its
// graph multiplies the positions by, or the one measured from its cos/sin
// tables — so that the reference keeps the model's frequencies exactly
// where the rule keeps them (a float32 constant is rarely base^(-2k/d)
// correctly rounded: one unit in the last place of 0.316 turns the angle at
// position 16380 by 5e-4 rad). A model that has a rule of its own (its
// frequencies scaled, or following the length) gets the formula's
// frequencies of the base: the new rule replaces its own.
func ReferenceFrequencies(u Rule, ev *Evidence, p *Params, seqLen int) ([]float64, float64, error) {
	if p.Base == nil {
		return nil, 0, fmt.Errorf("the audit could not fit the base")
	}
	inv, amp := ReferenceRoPE(u, *p.Base, p.RotaryDim, seqLen)
	scaled := p.Scaling != nil && *p.Scaling != "none" || p.Dynamic != nil && *p.Dynamic || ev.Angles != nil && ev.Angles.Program != nil
	if scaled {
		return inv, amp, nil
	}
	own := ev.InvFreq
	if ev.Angles != nil && len(ev.Angles.Freq) == len(ev.InvFreq) {
		own = ev.Angles.Freq
	}
	plain, _ := ReferenceRoPE(Rule{Method: "default"}, *p.Base, p.RotaryDim, seqLen)
	if len(own) != len(inv) || len(plain) != len(inv) {
		return nil, 0, fmt.Errorf("%d reference frequencies for %d of the model's", len(inv), len(own))
	}
	out := make([]float64, len(inv))
	for k := range inv {
		out[k] = own[k] * (inv[k] / plain[k])
	}
	return out, amp, nil
}
