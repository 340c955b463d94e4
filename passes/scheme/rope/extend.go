package rope

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/work"
	"math"
	"slices"
	"strings"
)

// checkRoPEMethod refuses a request that names no RoPE rule.
func CheckRoPEMethod(o rewrite.ExtendOptions) error {
	if !slices.Contains(rewrite.RoPEMethods, o.Method) {
		if o.Method == "" {
			return rewrite.ExtendErr("the model uses RoPE: give --method (%s)", strings.Join(rewrite.RoPEMethods, ", "))
		}
		return rewrite.ExtendErr("--method %s does not fit RoPE (methods: %s)", o.Method, strings.Join(rewrite.RoPEMethods, ", "))
	}
	return nil
}

// ropePlan is what applyRoPE needs beyond the report item.
type ropePlan struct {
	rule  *Rule
	ev    *Evidence
	p     *Params
	omega []float64 // the frequencies the rule applies to, pair order
	amp0  float64   // the amplitude kept under the rule's (compose)
}

// planRoPE checks the request against one RoPE finding and decides the
// rule and its parameters.
func PlanRoPE(x *rewrite.Extended, f *passes.Finding) (*rewrite.ExtendItem, error) {
	o := x.Opts
	ev, ok := f.Evidence.(*Evidence)
	p, ok2 := f.Params.(*Params)
	if !ok || !ok2 {
		return nil, rewrite.ExtendErr("the RoPE of layers %s has no evidence", rewrite.LayerList(f.Layers))
	}
	it := &rewrite.ExtendItem{Scheme: Name, Layers: f.Layers, Method: o.Method, Finding: f}
	where := "the RoPE of layers " + rewrite.LayerList(f.Layers)
	if p.Axes == 2 {
		grid := "an image's patch grid (its size follows the image)"
		if len(p.Grid) == 2 {
			grid = fmt.Sprintf("a %d x %d patch grid", p.Grid[0], p.Grid[1])
		}
		return nil, rewrite.ExtendErr("%s rotates over %s (axial 2-D RoPE): its positions are an image's rows and columns, not a sequence to make longer", where, grid)
	}
	if ev.Synthetic {
		return nil, rewrite.ExtendErr("%s reads its frequencies or cos/sin caches from graph inputs: the values are not in the file (give the extended caches at run time)", where)
	}
	switch {
	case f.Fused:
		it.Form = rewrite.FormFused
		if ev.Stored == nil {
			return nil, rewrite.ExtendErr("%s is computed inside the fused op %s without cos/sin caches: there are no frequencies to rewrite", where, fusedOpName(ev))
		}
	case ev.Stored != nil:
		it.Form = rewrite.FormStored
	case ev.Angles != nil && (ev.Angles.FreqFrom != "" || ev.Angles.Program != nil):
		it.Form = rewrite.FormComputed
	default:
		why := ev.ExactWhy
		if why == "" {
			why = "the graph's frequencies were not found"
		}
		return nil, rewrite.ExtendErr("%s: cannot rewrite its frequencies: %s", where, why)
	}
	if p.RotaryDim < 4 || len(ev.Pairs) == 0 || len(ev.Pairs) != len(ev.InvFreq) {
		return nil, rewrite.ExtendErr("%s: rotary dim %d", where, p.RotaryDim)
	}
	scaling := "none"
	if p.Scaling != nil {
		scaling = *p.Scaling
	}
	dynamicNow := ev.Angles != nil && ev.Angles.Program != nil || p.Dynamic != nil && *p.Dynamic
	plan := &ropePlan{ev: ev, p: p, amp0: 1}
	// The frequencies the rule applies to.
	switch {
	case scaling == "none" && !dynamicNow:
		plan.omega = slices.Clone(ev.InvFreq)
		if ev.Angles != nil && len(ev.Angles.Freq) == len(ev.InvFreq) {
			plan.omega = slices.Clone(ev.Angles.Freq)
		}
	case o.ReplaceScaling == "":
		return nil, rewrite.ExtendErr("%s already has scaling %s%s: give --replace-scaling %s (drop it and apply %s to the plain frequencies of base %s) or %s (apply %s on top of it)",
			where, scaling, scalingSummary(p), rewrite.ReplaceScaling, o.Method, baseString(p), rewrite.ComposeScaling, o.Method)
	case o.ReplaceScaling == rewrite.ReplaceScaling:
		if p.Base == nil {
			return nil, rewrite.ExtendErr("%s: --replace-scaling replace recomputes the plain frequencies from the base, which the audit could not fit", where)
		}
		plan.omega = make([]float64, len(ev.Pairs))
		for k := range plan.omega {
			plan.omega[k] = math.Pow(*p.Base, -2*float64(k)/float64(p.RotaryDim))
		}
		it.Note("replaced the model's %s scaling: the rule applies to the frequencies of base %g", scaling, *p.Base)
	default: // compose
		if dynamicNow {
			return nil, rewrite.ExtendErr("%s: its frequencies change with the length (dynamic NTK); --replace-scaling compose needs fixed ones (use replace)", where)
		}
		plan.omega = slices.Clone(ev.InvFreq)
		if ev.Angles != nil && len(ev.Angles.Freq) == len(ev.InvFreq) {
			plan.omega = slices.Clone(ev.Angles.Freq)
		}
		plan.amp0 = ev.Amplitude
		if ev.Angles != nil && ev.Angles.Scale != 0 {
			plan.amp0 = ev.Angles.Scale
		}
		it.Note("composed with the model's %s scaling: the rule applies to its scaled frequencies (the audit may not name the result)", scaling)
	}
	// The lengths: what the model supports now and what it was trained
	// for.
	var oldMax, orig int
	var from string
	switch {
	case p.MaxPositions != nil && it.Form != rewrite.FormComputed:
		oldMax, from = *p.MaxPositions, fmt.Sprintf("its cos/sin tables hold %d positions", *p.MaxPositions)
	case o.OriginalMax > 0:
		oldMax, from = o.OriginalMax, "--original-max-positions"
	case scaling != "none" && p.Factor != nil && p.OriginalMaxPositions != nil:
		oldMax = int(math.Round(*p.Factor * float64(*p.OriginalMaxPositions)))
		from = fmt.Sprintf("its %s rule extends %d positions by %g", scaling, *p.OriginalMaxPositions, *p.Factor)
	}
	switch {
	case o.OriginalMax > 0:
		orig = o.OriginalMax
	case o.ReplaceScaling == rewrite.ReplaceScaling && p.OriginalMaxPositions != nil:
		orig = *p.OriginalMaxPositions
	default:
		orig = oldMax
	}
	if orig == 0 {
		return nil, rewrite.ExtendErr("%s is computed in the graph, which does not say how many positions the model was trained for: give --original-max-positions", where)
	}
	if oldMax > 0 {
		it.OldMax = passes.Ptr(oldMax)
	}
	if o.To <= max(oldMax, orig) {
		return nil, rewrite.ExtendErr("--to %d is not longer than the %d positions %s supports", o.To, max(oldMax, orig), where)
	}
	factor := o.Factor
	if factor == 0 {
		factor = float64(o.To) / float64(orig)
	}
	if !(factor > 1) {
		return nil, rewrite.ExtendErr("the factor must be larger than 1, not %g", factor)
	}
	u := &Rule{Method: o.Method, Factor: factor, Orig: orig, RotaryDim: p.RotaryDim,
		Low: rewrite.CmpOr(o.LowFreqFactor, rewrite.DefaultLowFreqFactor), High: rewrite.CmpOr(o.HighFreqFactor, rewrite.DefaultHighFreqFactor),
		BetaFast: rewrite.CmpOr(o.BetaFast, rewrite.DefaultBetaFast), BetaSlow: rewrite.CmpOr(o.BetaSlow, rewrite.DefaultBetaSlow)}
	if p.Base != nil {
		u.Base = *p.Base
	}
	if u.Method == rewrite.MethodYaRN {
		if p.Base == nil {
			return nil, rewrite.ExtendErr("%s: yarn's correction range needs the base, which the audit could not fit", where)
		}
		u.AttentionFactor = o.AttentionFactor
		if u.AttentionFactor == 0 {
			u.AttentionFactor = 0.1*math.Log(factor) + 1
		}
	}
	if u.Dynamic() && it.Form == rewrite.FormFused && fusedOpName(ev) != "that rotates q and k" {
		return nil, rewrite.ExtendErr("--method dynamic-ntk does not fit %s: the caches of %s would be computed from its total_sequence_length for every call, which the audit cannot read back to check the rule (use a static rule)", where, fusedOpName(ev))
	}
	it.Rule, plan.rule = u, u
	it.Params = u.Params()
	it.OldMaxFrom = fmt.Sprintf("the RoPE of layers %s (%s)", rewrite.LayerList(f.Layers), from)
	if orig != oldMax {
		it.Note("the rule's original length is %d positions", orig)
	}
	if e := expectParams(p, u, it.Form, o.To, o.ReplaceScaling == rewrite.ComposeScaling); e != nil {
		it.Expect = e
	}
	it.Plan = plan
	return it, nil
}

func fusedOpName(ev *Evidence) string {
	for _, b := range ev.Blocks {
		if b.Op != "" {
			return b.Op
		}
	}
	return "that rotates q and k"
}

func baseString(p *Params) string {
	if p.Base == nil {
		return "(unknown)"
	}
	return fmt.Sprint(*p.Base)
}

func scalingSummary(p *Params) string {
	s := ""
	if p.Factor != nil {
		s += fmt.Sprintf(", factor %g", *p.Factor)
	}
	if p.OriginalMaxPositions != nil {
		s += fmt.Sprintf(", original_max_positions %d", *p.OriginalMaxPositions)
	}
	if p.Dynamic != nil && *p.Dynamic {
		s += ", dynamic"
	}
	return s
}

// expectParams are the params the audit of the extended model must give:
// the model's, with the rule's.
func expectParams(p *Params, u *Rule, form string, to int, compose bool) *Params {
	if compose {
		return nil
	}
	e := *p
	e.Scaling = passes.Ptr(u.scaling())
	e.Factor = passes.Ptr(u.Factor)
	e.OriginalMaxPositions, e.Dynamic, e.LowFreqFactor, e.HighFreqFactor = nil, nil, nil, nil
	e.BetaFast, e.BetaSlow, e.AttentionFactor, e.CorrectionRange = nil, nil, nil, nil
	e.ShortFactor, e.LongFactor, e.Frequencies = nil, nil, nil
	switch u.Method {
	case rewrite.MethodNTK:
		e.Dynamic = passes.Ptr(false)
	case rewrite.MethodDynamicNTK:
		e.OriginalMaxPositions, e.Dynamic = passes.Ptr(u.Orig), passes.Ptr(true)
	case rewrite.MethodLlama3:
		e.OriginalMaxPositions, e.LowFreqFactor, e.HighFreqFactor = passes.Ptr(u.Orig), passes.Ptr(u.Low), passes.Ptr(u.High)
	case rewrite.MethodYaRN:
		lo, hi := u.CorrectionRange()
		e.OriginalMaxPositions, e.BetaFast, e.BetaSlow = passes.Ptr(u.Orig), passes.Ptr(u.BetaFast), passes.Ptr(u.BetaSlow)
		e.AttentionFactor, e.CorrectionRange = passes.Ptr(u.AttentionFactor), []float64{lo, hi}
	}
	if form != rewrite.FormComputed && u.Method != rewrite.MethodDynamicNTK {
		e.MaxPositions = passes.Ptr(to)
	}
	if u.Method == rewrite.MethodDynamicNTK {
		e.MaxPositions = nil // the cos/sin are computed for every call
	}
	return &e
}

// applyRoPE rewrites the frequencies (computed RoPE) or the cos/sin
// tables (stored tables, caches of fused ops) of one finding.
func ApplyRoPE(x *rewrite.Extended, it *rewrite.ExtendItem) error {
	r := x.R
	ch := r.Begin("extend", Name)
	defer r.End(ch)
	pl := it.Plan.(*ropePlan)
	u := pl.rule
	newAmp := u.Amplitude() * pl.amp0
	if it.Form == rewrite.FormComputed {
		if err := ropeFrequencies(x, it, pl, u, nil); err != nil {
			return err
		}
		return ropeAmplitude(x, it, pl, newAmp)
	}
	if u.Dynamic() {
		return ropeTablesDynamic(x, it, pl, u, newAmp)
	}
	omega := u.Frequencies(pl.omega, 0)
	return ropeTables(x, it, pl, omega, newAmp)
}

// ropeFrequencies replaces the frequencies the graph multiplies the
// positions by: a constant of the same shape and type (static rules), or
// their computation from the largest position (dynamic NTK). values, when
// set, are the frequencies to write (pair order) instead of the rule's.
func ropeFrequencies(x *rewrite.Extended, it *rewrite.ExtendItem, pl *ropePlan, u *Rule, values []float64) error {
	r, ev := x.R, pl.ev
	a := ev.Angles
	name := a.FreqFrom
	// pairOf maps each element of the frequency value to its pair.
	var pairOf []int
	var dims []int64
	var dt graph.DataType
	if name != "" {
		t := probe.Const(x.Ctx, name)
		if t == nil {
			return rewrite.ExtendErr("the frequencies %q are not a constant", name)
		}
		dt = t.DType
		for _, d := range t.Shape {
			dims = append(dims, int64(d))
		}
		for i, v := range t.Float64s() {
			k := slices.Index(a.Freq, v)
			if k < 0 {
				return rewrite.ExtendErr("element %d (%g) of the frequencies %q is none of the pairs' frequencies", i, v, name)
			}
			pairOf = append(pairOf, k)
		}
	} else {
		prog := a.Program
		last := prog.Steps[len(prog.Steps)-1]
		n := r.Node(last.Node)
		if n == nil {
			return rewrite.ExtendErr("the node %q computing the frequencies is not in the model", last.Node)
		}
		name = n.Output(0).Name
		dt = last.Type
		pairOf = make([]int, prog.Len)
		for k, e := range prog.Index {
			pairOf[e] = k
		}
		wv := rewrite.WorkValue(work.Of(x.Ctx), name)
		if wv == nil {
			return rewrite.ExtendErr("the frequencies %q have no inferred shape", name)
		}
		sh := work.Of(x.Ctx).Shape(wv)
		if !sh.AllKnown() {
			return rewrite.ExtendErr("the frequencies %q have shape %s", name, work.Of(x.Ctx).ShapeString(sh))
		}
		total := 1
		for _, d := range sh.Dims {
			dims = append(dims, int64(d))
			total *= int(d)
		}
		if total != prog.Len {
			return rewrite.ExtendErr("the frequencies %q have %d elements, the program %d", name, total, prog.Len)
		}
	}
	v, err := r.Lookup(name)
	if err != nil {
		return err
	}
	if !dt.IsFloat() {
		return rewrite.ExtendErr("the frequencies %q have element type %v", name, dt)
	}
	perElem := func(vals []float64) []float64 {
		out := make([]float64, len(pairOf))
		for i, k := range pairOf {
			out[i] = vals[k]
		}
		return out
	}
	if !u.Dynamic() || values != nil {
		nw := values
		if nw == nil {
			nw = u.Frequencies(pl.omega, 0)
		}
		t, err := graph.TensorFromFloat64(name, dt, dims, perElem(nw))
		if err != nil {
			return err
		}
		x.ReplaceConst(v, t)
		it.Edit(name, "frequencies %s: %s", fmtFloats(pl.omega, dt), fmtFloats(nw, dt))
		return nil
	}
	// Dynamic NTK: ω_k · s^(-e_k), s = max(1, f·L/orig - (f-1)), L the
	// largest position + 1, computed in float64 and rounded once to the
	// frequencies' type (a float32 Pow is off by an ulp or two, which at
	// position 16384 turns an angle by 1e-3 rad).
	f64 := graph.Double
	L, err := maxPositionPlus1(x, pl.ev, f64)
	if err != nil {
		return err
	}
	scal := func(v float64) *graph.Value {
		c, err := r.Table("onnxpe_extend_const", f64, nil, []float64{v})
		if err != nil {
			panic("passes: " + err.Error())
		}
		return c
	}
	s := r.Op1("Sub", []*graph.Value{r.Op1("Mul", []*graph.Value{L, scal(u.Factor / float64(u.Orig))}), scal(u.Factor - 1)})
	s = rewrite.Typed(r.Op1("Max", []*graph.Value{s, scal(1)}), f64, 0)
	negE := u.DynamicExponents(len(pl.omega))
	for i := range negE {
		negE[i] = -negE[i]
	}
	om, err := r.Table("onnxpe_extend_inv_freq", f64, dims, perElem(pl.omega))
	if err != nil {
		return err
	}
	ex, err := r.Table("onnxpe_extend_ntk_exponent", f64, dims, perElem(negE))
	if err != nil {
		return err
	}
	y := rewrite.Typed(r.Op1("Mul", []*graph.Value{om, r.Op1("Pow", []*graph.Value{s, ex})}), f64, len(dims))
	if dt != f64 {
		y = rewrite.Typed(r.Op1("Cast", []*graph.Value{y}, graph.IntAttr("to", int64(dt))), dt, len(dims))
	}
	if v.Producer() != nil {
		v.ReplaceKeepingName(y)
	} else {
		v.ReplaceAllUsesWith(y)
	}
	it.Edit(name, "frequencies computed from the largest position: %s · max(1, %g·L/%d - %g)^(-2k/%d), in float64 rounded to %v", fmtFloats(pl.omega, dt), u.Factor, u.Orig, u.Factor-1, u.RotaryDim-2, dt)
	return nil
}

// maxPositionPlus1 is L = the largest position of a call + 1, a scalar of
// type dt, read where the rotation reads its positions.
func maxPositionPlus1(x *rewrite.Extended, ev *Evidence, dt graph.DataType) (*graph.Value, error) {
	L, err := callLength(x, ev)
	if err != nil {
		return nil, err
	}
	return rewrite.Typed(x.R.Op1("Cast", []*graph.Value{L}, graph.IntAttr("to", int64(dt))), dt, 0), nil
}

// callLength is the largest position of a call + 1 as an int64 scalar:
// from the positions the rotation reads (the largest, or the first plus
// the sequence length), or, for fused ops, from their position ids or
// GroupQueryAttention's total_sequence_length.
func callLength(x *rewrite.Extended, ev *Evidence) (*graph.Value, error) {
	r, w := x.R, work.Of(x.Ctx)
	one := r.ScalarInt(1)
	max1 := func(v *graph.Value, dt graph.DataType) *graph.Value {
		v = r.CastInt64(v, dt)
		m := r.Op1("ReduceMax", []*graph.Value{v}, graph.IntAttr("keepdims", 0))
		return rewrite.Typed(r.Op1("Add", []*graph.Value{m, one}), graph.Int64, 0)
	}
	for _, b := range ev.Blocks {
		if b.Op != "" {
			n := r.Node(b.Op)
			if n != nil && n.OpType == "GroupQueryAttention" && n.Input(6) != nil {
				t := r.CastInt64(n.Input(6), graph.Int32)
				return rewrite.Typed(r.Op1("Reshape", []*graph.Value{t, r.Ints([]int64{0})}), graph.Int64, 0), nil
			}
			continue
		}
		if out, err := r.Lookup(b.Q.Out); err == nil {
			if n := out.Producer(); n != nil && n.OpType == "RotaryEmbedding" {
				pi := 3
				if n.Domain == rewrite.DomainMicrosoft {
					pi = 1
				}
				if p := n.Input(pi); p != nil && r.Rank(p) == 2 {
					return max1(p, graph.Int64), nil
				}
				return nil, rewrite.ExtendErr("dynamic-ntk needs the positions of every call: %s reads its positions as one offset", work.NodeName(n))
			}
		}
	}
	pos := ev.Positions
	if pos == nil {
		pos = positionsInput(w, ev)
	}
	switch {
	case pos != nil && pos.Value != "":
		v, err := r.Lookup(pos.Value)
		if err != nil {
			return nil, err
		}
		return max1(v, w.ElemType(pos.WorkValue)), nil
	case pos != nil && len(ev.Blocks) > 0:
		// The first position plus the sequence length of q.
		q, err := r.Lookup(ev.Blocks[0].Q.In)
		if err != nil {
			return nil, err
		}
		start := r.ScalarInt(pos.StartConst)
		if pos.Start != "" {
			v, err := r.Lookup(pos.Start)
			if err != nil {
				return nil, err
			}
			start = r.Op1("Reshape", []*graph.Value{r.CastInt64(v, w.ElemType(pos.WorkStart)), r.Ints([]int64{0})})
		}
		seq := r.Op1("Reshape", []*graph.Value{r.DimOf(q, int64(ev.Axis)), r.Ints([]int64{0})})
		return rewrite.Typed(r.Op1("Add", []*graph.Value{start, seq}), graph.Int64, 0), nil
	}
	why := ev.PositionsWhy
	if why == "" {
		why = "no value holds them"
	}
	return nil, rewrite.ExtendErr("dynamic-ntk needs the positions of every call, which the rotation does not read from one value (%s)", why)
}

// ropeTablesDynamic replaces the stored cos/sin tables (or fused caches)
// of a finding by their computation for every call under dynamic NTK: rows
// 0..L-1, L the largest position + 1, of ω_k·s(L)^(-2k/(d-2)), in float64
// (cast to the table's type), each column the cos or sin of its pair as in
// the stored table.
func ropeTablesDynamic(x *rewrite.Extended, it *rewrite.ExtendItem, pl *ropePlan, u *Rule, amp float64) error {
	r := x.R
	Lint, err := callLength(x, pl.ev)
	if err != nil {
		return err
	}
	f64 := graph.Double // computed in float64, rounded once to the table's type
	Lf := rewrite.Typed(r.Op1("Cast", []*graph.Value{Lint}, graph.IntAttr("to", int64(f64))), f64, 0)
	scal := func(v float64) *graph.Value {
		c, err := r.Table("onnxpe_extend_const", f64, nil, []float64{v})
		if err != nil {
			panic("passes: " + err.Error())
		}
		return c
	}
	half := len(pl.omega)
	sv := r.Op1("Sub", []*graph.Value{r.Op1("Mul", []*graph.Value{Lf, scal(u.Factor / float64(u.Orig))}), scal(u.Factor - 1)})
	sv = r.Op1("Max", []*graph.Value{sv, scal(1)})
	negE := u.DynamicExponents(half)
	for i := range negE {
		negE[i] = -negE[i]
	}
	om, err := r.Table("onnxpe_extend_inv_freq", f64, []int64{1, int64(half)}, pl.omega)
	if err != nil {
		return err
	}
	ex, err := r.Table("onnxpe_extend_ntk_exponent", f64, []int64{1, int64(half)}, negE)
	if err != nil {
		return err
	}
	freq := r.Op1("Mul", []*graph.Value{om, r.Op1("Pow", []*graph.Value{sv, ex})}) // [1, half]
	rows := r.Op1("Cast", []*graph.Value{r.Op1("Range", []*graph.Value{r.ScalarInt(0), Lint, one(r)})}, graph.IntAttr("to", int64(f64)))
	ang := r.Op1("Mul", []*graph.Value{r.Unsqueeze(rows, 1), freq}) // [L, half]
	cosV, sinV := r.Op1("Cos", []*graph.Value{ang}), r.Op1("Sin", []*graph.Value{ang})
	if amp != 1 {
		cosV = r.Op1("Mul", []*graph.Value{cosV, scal(amp)})
		sinV = r.Op1("Mul", []*graph.Value{sinV, scal(amp)})
	}
	all := rewrite.Typed(r.Op1("Concat", []*graph.Value{cosV, sinV, r.Op1("Neg", []*graph.Value{cosV}), r.Op1("Neg", []*graph.Value{sinV})}, graph.IntAttr("axis", 1)), f64, 2)
	tables, err := extendedStoredCosSin(x, pl)
	if err != nil {
		return err
	}
	for _, s := range tables {
		base, tab, row0, cols := s.base, s.tab, s.row0, s.cols
		idx := make([]int64, len(cols))
		for j, c := range cols {
			k := int64(c.pair)
			if c.sin {
				k += int64(half)
			}
			if c.sign < 0 {
				k += 2 * int64(half)
			}
			idx[j] = k
		}
		y := rewrite.Typed(r.Op1("Gather", []*graph.Value{all, r.VecInt(idx...)}, graph.IntAttr("axis", 1)), f64, 2)
		if row0 > 0 {
			head, err := r.Table("onnxpe_extend_rows", f64, []int64{int64(row0), int64(tab.Width)}, tab.Vals[:row0*tab.Width])
			if err != nil {
				return err
			}
			y = r.Op1("Concat", []*graph.Value{head, y}, graph.IntAttr("axis", 0))
		}
		dims := slices.Clone(tab.Dims)
		dims[tab.Axis] = -1
		y = r.Op1("Reshape", []*graph.Value{y, r.VecInt(dims...)})
		if tab.Dt != f64 {
			y = r.Op1("Cast", []*graph.Value{y}, graph.IntAttr("to", int64(tab.Dt)))
		}
		rewrite.Typed(y, tab.Dt, len(dims))
		x.Changed = append(x.Changed, base)
		base.ReplaceAllUsesWith(y)
		it.Edit(base.Name, "cos/sin table %v %v computed for every call: rows 0..L-1 (L the largest position + 1) of the frequencies %s · max(1, %g·L/%d - %g)^(-2k/%d), in float64", tab.Dt, tab.Dims, fmtFloats(pl.omega, f64), u.Factor, u.Orig, u.Factor-1, u.RotaryDim-2)
	}
	it.Note("dynamic NTK: the cos/sin follow the length of every call, so the tables are computed in the graph (in float64, rounded to the table's type) instead of stored")
	return nil
}

func one(r *rewrite.Rewrite) *graph.Value { return r.ScalarInt(1) }

// positionsInput is the graph input holding position ids [batch, seq]
// that the cos/sin of ev are computed from, when the detector could not
// say where the positions are read (dynamic rules).
func positionsInput(w *work.Work, ev *Evidence) *probe.Positions {
	var vals []*graph.Value
	for _, b := range ev.Blocks {
		for _, s := range []Side{b.Q, b.K} {
			if s.side != nil {
				vals = append(vals, s.side.Pos...)
			}
		}
	}
	var found *graph.Value
	for _, n := range w.Cone(vals...) {
		for _, in := range n.Inputs() {
			if in != nil && in.Producer() == nil && in.IsGraphInput() && w.Role(in) == work.RolePositions {
				if found != nil && found != in {
					return nil
				}
				found = in
			}
		}
	}
	if found == nil || w.OrigValue(found) == "" {
		return nil
	}
	return probe.NewPositions(w, found)
}

// ropeAmplitude makes cos and sin carry amplitude a: the constants that
// scale them (a Mul after each Sin and Cos) replaced, or a Mul inserted
// after each.
func ropeAmplitude(x *rewrite.Extended, it *rewrite.ExtendItem, pl *ropePlan, a float64) error {
	r, an := x.R, pl.ev.Angles
	cur := 1.0
	if an.Scale != 0 {
		cur = an.Scale
	}
	if a == cur || math.Abs(a-cur) < 1e-12 {
		return nil
	}
	done := 0
	replaced := map[*graph.Value]bool{}
	for _, name := range pl.ev.CosSinNodes {
		n := r.Node(name)
		if n == nil || (n.OpType != "Sin" && n.OpType != "Cos") || !work.IsONNX(n) {
			continue
		}
		out := n.Output(0)
		if cur != 1 {
			// The Mul by a constant equal to the current scale, maybe
			// after a Cast.
			c := x.ScaleConst(out, cur)
			if c == nil {
				return rewrite.ExtendErr("the %s of the rotation is not multiplied by a constant %.7g: cannot change the scale to %.7g", work.NodeName(n), cur, a)
			}
			if !replaced[c] {
				replaced[c] = true
				t := x.ConstTensor(c)
				vals, err := t.Float64s()
				if err != nil {
					return err
				}
				for i := range vals {
					vals[i] = a
				}
				nt, err := graph.TensorFromFloat64(c.Name, t.DataType(), t.Dims(), vals)
				if err != nil {
					return err
				}
				x.ReplaceConst(c, nt)
				it.Edit(c.Name, "scale of %s %.7g: %.7g", n.OpType, cur, a)
			}
			done++
			continue
		}
		if out.IsGraphOutput() {
			return rewrite.ExtendErr("the %s of the rotation is a graph output", n.OpType)
		}
		c, err := r.Table("onnxpe_extend_attention_factor", an.Type, nil, []float64{a})
		if err != nil {
			return err
		}
		uses := out.Uses()
		y := rewrite.Typed(r.Op1("Mul", []*graph.Value{out, c}), an.Type, -1)
		for _, u := range uses {
			u.Node.SetInput(u.Index, y)
		}
		it.Edit(work.NodeName(n), "%s multiplied by attention_factor %.7g", n.OpType, a)
		done++
	}
	if done == 0 {
		return rewrite.ExtendErr("no Sin or Cos node computes the rotation's cos and sin: cannot scale them by %g", a)
	}
	return nil
}

// ropeTables recomputes the stored cos/sin tables of a finding (caches of
// fused ops included) in float64 with the new frequencies and amplitude,
// for positions 0..N-1.
func ropeTables(x *rewrite.Extended, it *rewrite.ExtendItem, pl *ropePlan, omega []float64, amp float64) error {
	tables, err := extendedStoredCosSin(x, pl)
	if err != nil {
		return err
	}
	n := x.Opts.To
	for _, s := range tables {
		base, tab, row0, cols := s.base, s.tab, s.row0, s.cols
		vals := make([]float64, (row0+n)*tab.Width)
		copy(vals, tab.Vals[:row0*tab.Width])
		for p := 0; p < n; p++ {
			for j, c := range cols {
				th := float64(p) * omega[c.pair]
				v := math.Cos(th)
				if c.sin {
					v = math.Sin(th)
				}
				vals[(row0+p)*tab.Width+j] = c.sign * amp * v
			}
		}
		if !rewrite.Finite(vals) {
			return rewrite.ExtendErr("the cos/sin table %q: the rule gives non-finite values", base.Name)
		}
		dims := slices.Clone(tab.Dims)
		dims[tab.Axis] = int64(row0 + n)
		t, err := graph.TensorFromFloat64(base.Name, tab.Dt, dims, vals)
		if err != nil {
			return err
		}
		x.ReplaceConst(base, t)
		it.Edit(base.Name, "cos/sin table %v %v to %v, recomputed in float64 (%s)", tab.Dt, tab.Dims, dims, u2s(it.Plan.(*ropePlan).rule))
	}
	return nil
}

func u2s(u *Rule) string { return u.String() }

// storedTable is one stored cos/sin table of a RoPE finding: the constant,
// read as [rows, width], the row of position 0 and what every column holds.
type storedTable struct {
	base *graph.Value
	tab  *rewrite.TableConst
	row0 int
	cols []column
}

// storedCosSin reads the distinct cos/sin tables the finding's evidence
// names (StoredCosSin) and identifies their columns by value. Names that
// lead to one constant (through layout ops and casts) give it once.
func extendedStoredCosSin(x *rewrite.Extended, pl *ropePlan) ([]storedTable, error) {
	st := pl.ev.Stored
	all := append(slices.Clone(st.Cos), st.Sin...)
	var names []string
	for _, c := range all {
		if !slices.Contains(names, c.Table) {
			names = append(names, c.Table)
		}
	}
	var out []storedTable
	for _, name := range names {
		base, err := x.BaseConst(name)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out, func(s storedTable) bool { return s.base == base }) {
			continue
		}
		tab, err := x.TableOf(base)
		if err != nil {
			return nil, err
		}
		row0 := 0
		for _, c := range all {
			if c.Table == name {
				row0 = c.Row0
			}
		}
		cols, err := identifyColumns(tab, row0, pl.ev.InvFreq, pl.ev.Amplitude)
		if err != nil {
			return nil, rewrite.ExtendErr("the cos/sin table %q: %v", base.Name, err)
		}
		out = append(out, storedTable{base, tab, row0, cols})
	}
	return out, nil
}

// column is what one column of a cos/sin table holds: sign·amplitude·cos
// (or sin) of a pair's angle.
type column struct {
	pair int
	sin  bool
	sign float64
}

// identifyColumns reads, for every column of a stored cos/sin table,
// which pair's cos or sin it holds (positions from row0 on), by comparing
// with the measured frequencies and amplitude.
func identifyColumns(t *rewrite.TableConst, row0 int, omega []float64, amp float64) ([]column, error) {
	rows := t.Rows - row0
	if rows < 2 {
		return nil, fmt.Errorf("%d rows", rows)
	}
	tol := 2e-4
	if probe.IsHalfType(t.Dt) {
		tol = 4e-3
	}
	cols := make([]column, t.Width)
	for j := range cols {
		best, bestErr := column{pair: -1}, math.Inf(1)
		for k, om := range omega {
			for _, c := range []column{{k, false, 1}, {k, true, 1}, {k, false, -1}, {k, true, -1}} {
				e := 0.0
				for p := 0; p < rows && e <= tol*(1+float64(p)*om*1e-3); p++ {
					want := math.Cos(float64(p) * om)
					if c.sin {
						want = math.Sin(float64(p) * om)
					}
					e = max(e, math.Abs(t.Vals[(row0+p)*t.Width+j]-c.sign*amp*want)/(1+float64(p)*om*1e-3))
				}
				if e < bestErr {
					best, bestErr = c, e
				}
			}
		}
		if best.pair < 0 || bestErr > tol {
			return nil, fmt.Errorf("column %d holds neither the cos nor the sin of a rotary pair (closest off by %.3g)", j, bestErr)
		}
		cols[j] = best
	}
	return cols, nil
}

// fmtFloats prints a few values for the report.
func fmtFloats(v []float64, dt graph.DataType) string {
	var s []string
	for i, x := range v {
		if i == 3 && len(v) > 4 {
			s = append(s, "...", fmt.Sprintf("%.4g", rewrite.RoundTrip(dt, v[len(v)-1])))
			break
		}
		s = append(s, fmt.Sprintf("%.4g", rewrite.RoundTrip(dt, x)))
	}
	return fmt.Sprint(s)
}
