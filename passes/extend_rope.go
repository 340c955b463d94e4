package passes

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
)

// Forms of an encoding in the report.
const (
	FormComputed = "computed"
	FormStored   = "stored"
	FormFused    = "fused"
	FormTable    = "table"
)

// checkRoPEMethod refuses a request that names no RoPE rule.
func checkRoPEMethod(o ExtendOptions) error {
	if !slices.Contains(RoPEMethods, o.Method) {
		if o.Method == "" {
			return extendErr("the model uses RoPE: give --method (%s)", strings.Join(RoPEMethods, ", "))
		}
		return extendErr("--method %s does not fit RoPE (methods: %s)", o.Method, strings.Join(RoPEMethods, ", "))
	}
	return nil
}

// ropePlan is what applyRoPE needs beyond the report item.
type ropePlan struct {
	rule  *RoPERule
	ev    *RoPEEvidence
	p     *RoPEParams
	omega []float64 // the frequencies the rule applies to, pair order
	amp0  float64   // the amplitude kept under the rule's (compose)
}

// planRoPE checks the request against one RoPE finding and decides the
// rule and its parameters.
func (x *Extended) planRoPE(f *Finding) (*ExtendItem, error) {
	o := x.Opts
	ev, ok := f.Evidence.(*RoPEEvidence)
	p, ok2 := f.Params.(*RoPEParams)
	if !ok || !ok2 {
		return nil, extendErr("the RoPE of layers %s has no evidence", layerList(f.Layers))
	}
	it := &ExtendItem{Scheme: RoPEScheme, Layers: f.Layers, Method: o.Method, Finding: f}
	where := "the RoPE of layers " + layerList(f.Layers)
	if p.Axes == 2 {
		grid := "an image's patch grid (its size follows the image)"
		if len(p.Grid) == 2 {
			grid = fmt.Sprintf("a %d x %d patch grid", p.Grid[0], p.Grid[1])
		}
		return nil, extendErr("%s rotates over %s (axial 2-D RoPE): its positions are an image's rows and columns, not a sequence to make longer", where, grid)
	}
	if ev.Synthetic {
		return nil, extendErr("%s reads its frequencies or cos/sin caches from graph inputs: the values are not in the file (give the extended caches at run time)", where)
	}
	switch {
	case f.Fused:
		it.Form = FormFused
		if ev.Stored == nil {
			return nil, extendErr("%s is computed inside the fused op %s without cos/sin caches: there are no frequencies to rewrite", where, fusedOpName(ev))
		}
	case ev.Stored != nil:
		it.Form = FormStored
	case ev.Angles != nil && (ev.Angles.FreqFrom != "" || ev.Angles.Program != nil):
		it.Form = FormComputed
	default:
		why := ev.ExactWhy
		if why == "" {
			why = "the graph's frequencies were not found"
		}
		return nil, extendErr("%s: cannot rewrite its frequencies: %s", where, why)
	}
	if p.RotaryDim < 4 || len(ev.Pairs) == 0 || len(ev.Pairs) != len(ev.InvFreq) {
		return nil, extendErr("%s: rotary dim %d", where, p.RotaryDim)
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
		return nil, extendErr("%s already has scaling %s%s: give --replace-scaling %s (drop it and apply %s to the plain frequencies of base %s) or %s (apply %s on top of it)",
			where, scaling, scalingSummary(p), ReplaceScaling, o.Method, baseString(p), ComposeScaling, o.Method)
	case o.ReplaceScaling == ReplaceScaling:
		if p.Base == nil {
			return nil, extendErr("%s: --replace-scaling replace recomputes the plain frequencies from the base, which the audit could not fit", where)
		}
		plan.omega = make([]float64, len(ev.Pairs))
		for k := range plan.omega {
			plan.omega[k] = math.Pow(*p.Base, -2*float64(k)/float64(p.RotaryDim))
		}
		it.note("replaced the model's %s scaling: the rule applies to the frequencies of base %g", scaling, *p.Base)
	default: // compose
		if dynamicNow {
			return nil, extendErr("%s: its frequencies change with the length (dynamic NTK); --replace-scaling compose needs fixed ones (use replace)", where)
		}
		plan.omega = slices.Clone(ev.InvFreq)
		if ev.Angles != nil && len(ev.Angles.Freq) == len(ev.InvFreq) {
			plan.omega = slices.Clone(ev.Angles.Freq)
		}
		plan.amp0 = ev.Amplitude
		if ev.Angles != nil && ev.Angles.Scale != 0 {
			plan.amp0 = ev.Angles.Scale
		}
		it.note("composed with the model's %s scaling: the rule applies to its scaled frequencies (the audit may not name the result)", scaling)
	}
	// The lengths: what the model supports now and what it was trained
	// for.
	var oldMax, orig int
	var from string
	switch {
	case p.MaxPositions != nil && it.Form != FormComputed:
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
	case o.ReplaceScaling == ReplaceScaling && p.OriginalMaxPositions != nil:
		orig = *p.OriginalMaxPositions
	default:
		orig = oldMax
	}
	if orig == 0 {
		return nil, extendErr("%s is computed in the graph, which does not say how many positions the model was trained for: give --original-max-positions", where)
	}
	if oldMax > 0 {
		it.OldMax = ptr(oldMax)
	}
	if o.To <= max(oldMax, orig) {
		return nil, extendErr("--to %d is not longer than the %d positions %s supports", o.To, max(oldMax, orig), where)
	}
	factor := o.Factor
	if factor == 0 {
		factor = float64(o.To) / float64(orig)
	}
	if !(factor > 1) {
		return nil, extendErr("the factor must be larger than 1, not %g", factor)
	}
	u := &RoPERule{Method: o.Method, Factor: factor, Orig: orig, RotaryDim: p.RotaryDim,
		Low: cmpOr(o.LowFreqFactor, DefaultLowFreqFactor), High: cmpOr(o.HighFreqFactor, DefaultHighFreqFactor),
		BetaFast: cmpOr(o.BetaFast, DefaultBetaFast), BetaSlow: cmpOr(o.BetaSlow, DefaultBetaSlow)}
	if p.Base != nil {
		u.Base = *p.Base
	}
	if u.Method == MethodYaRN {
		if p.Base == nil {
			return nil, extendErr("%s: yarn's correction range needs the base, which the audit could not fit", where)
		}
		u.AttentionFactor = o.AttentionFactor
		if u.AttentionFactor == 0 {
			u.AttentionFactor = 0.1*math.Log(factor) + 1
		}
	}
	if u.Dynamic() && it.Form == FormFused && fusedOpName(ev) != "that rotates q and k" {
		return nil, extendErr("--method dynamic-ntk does not fit %s: the caches of %s would be computed from its total_sequence_length for every call, which the audit cannot read back to check the rule (use a static rule)", where, fusedOpName(ev))
	}
	it.Rule, plan.rule = u, u
	it.Params = u.Params()
	it.OldMaxFrom = fmt.Sprintf("the RoPE of layers %s (%s)", layerList(f.Layers), from)
	if orig != oldMax {
		it.note("the rule's original length is %d positions", orig)
	}
	if e := expectParams(p, u, it.Form, o.To, o.ReplaceScaling == ComposeScaling); e != nil {
		it.Expect = e
	}
	it.Plan = plan
	return it, nil
}

func fusedOpName(ev *RoPEEvidence) string {
	for _, b := range ev.Blocks {
		if b.Op != "" {
			return b.Op
		}
	}
	return "that rotates q and k"
}

func baseString(p *RoPEParams) string {
	if p.Base == nil {
		return "(unknown)"
	}
	return fmt.Sprint(*p.Base)
}

func scalingSummary(p *RoPEParams) string {
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
func expectParams(p *RoPEParams, u *RoPERule, form string, to int, compose bool) *RoPEParams {
	if compose {
		return nil
	}
	e := *p
	e.Scaling = ptr(u.scaling())
	e.Factor = ptr(u.Factor)
	e.OriginalMaxPositions, e.Dynamic, e.LowFreqFactor, e.HighFreqFactor = nil, nil, nil, nil
	e.BetaFast, e.BetaSlow, e.AttentionFactor, e.CorrectionRange = nil, nil, nil, nil
	e.ShortFactor, e.LongFactor, e.Frequencies = nil, nil, nil
	switch u.Method {
	case MethodNTK:
		e.Dynamic = ptr(false)
	case MethodDynamicNTK:
		e.OriginalMaxPositions, e.Dynamic = ptr(u.Orig), ptr(true)
	case MethodLlama3:
		e.OriginalMaxPositions, e.LowFreqFactor, e.HighFreqFactor = ptr(u.Orig), ptr(u.Low), ptr(u.High)
	case MethodYaRN:
		lo, hi := u.CorrectionRange()
		e.OriginalMaxPositions, e.BetaFast, e.BetaSlow = ptr(u.Orig), ptr(u.BetaFast), ptr(u.BetaSlow)
		e.AttentionFactor, e.CorrectionRange = ptr(u.AttentionFactor), []float64{lo, hi}
	}
	if form != FormComputed && u.Method != MethodDynamicNTK {
		e.MaxPositions = ptr(to)
	}
	if u.Method == MethodDynamicNTK {
		e.MaxPositions = nil // the cos/sin are computed for every call
	}
	return &e
}

// applyRoPE rewrites the frequencies (computed RoPE) or the cos/sin
// tables (stored tables, caches of fused ops) of one finding.
func (x *Extended) applyRoPE(it *ExtendItem) error {
	r := x.r
	ch := r.begin("extend", RoPEScheme)
	defer r.end(ch)
	pl := it.Plan.(*ropePlan)
	u := pl.rule
	newAmp := u.Amplitude() * pl.amp0
	if it.Form == FormComputed {
		if err := x.ropeFrequencies(it, pl, u, nil); err != nil {
			return err
		}
		return x.ropeAmplitude(it, pl, newAmp)
	}
	if u.Dynamic() {
		return x.ropeTablesDynamic(it, pl, u, newAmp)
	}
	omega := u.Frequencies(pl.omega, 0)
	return x.ropeTables(it, pl, omega, newAmp)
}

// ropeFrequencies replaces the frequencies the graph multiplies the
// positions by: a constant of the same shape and type (static rules), or
// their computation from the largest position (dynamic NTK). values, when
// set, are the frequencies to write (pair order) instead of the rule's.
func (x *Extended) ropeFrequencies(it *ExtendItem, pl *ropePlan, u *RoPERule, values []float64) error {
	r, ev := x.r, pl.ev
	a := ev.Angles
	name := a.FreqFrom
	// pairOf maps each element of the frequency value to its pair.
	var pairOf []int
	var dims []int64
	var dt graph.DataType
	if name != "" {
		t := x.ctx.Const(name)
		if t == nil {
			return extendErr("the frequencies %q are not a constant", name)
		}
		dt = t.DType
		for _, d := range t.Shape {
			dims = append(dims, int64(d))
		}
		for i, v := range t.Float64s() {
			k := slices.Index(a.Freq, v)
			if k < 0 {
				return extendErr("element %d (%g) of the frequencies %q is none of the pairs' frequencies", i, v, name)
			}
			pairOf = append(pairOf, k)
		}
	} else {
		prog := a.Program
		last := prog.Steps[len(prog.Steps)-1]
		n := r.node(last.Node)
		if n == nil {
			return extendErr("the node %q computing the frequencies is not in the model", last.Node)
		}
		name = n.Output(0).Name
		dt = last.Type
		pairOf = make([]int, prog.Len)
		for k, e := range prog.Index {
			pairOf[e] = k
		}
		wv := x.ctx.Work().workValue(name)
		if wv == nil {
			return extendErr("the frequencies %q have no inferred shape", name)
		}
		sh := x.ctx.Work().Shape(wv)
		if !sh.AllKnown() {
			return extendErr("the frequencies %q have shape %s", name, x.ctx.Work().shapeString(sh))
		}
		total := 1
		for _, d := range sh.Dims {
			dims = append(dims, int64(d))
			total *= int(d)
		}
		if total != prog.Len {
			return extendErr("the frequencies %q have %d elements, the program %d", name, total, prog.Len)
		}
	}
	v, err := r.lookup(name)
	if err != nil {
		return err
	}
	if !dt.IsFloat() {
		return extendErr("the frequencies %q have element type %v", name, dt)
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
		x.replaceConst(v, t)
		it.edit(name, "frequencies %s: %s", fmtFloats(pl.omega, dt), fmtFloats(nw, dt))
		return nil
	}
	// Dynamic NTK: ω_k · s^(-e_k), s = max(1, f·L/orig - (f-1)), L the
	// largest position + 1, computed in float64 and rounded once to the
	// frequencies' type (a float32 Pow is off by an ulp or two, which at
	// position 16384 turns an angle by 1e-3 rad).
	f64 := graph.Double
	L, err := x.maxPositionPlus1(pl.ev, f64)
	if err != nil {
		return err
	}
	scal := func(v float64) *graph.Value {
		c, err := r.table("onnxpe_extend_const", f64, nil, []float64{v})
		if err != nil {
			panic("passes: " + err.Error())
		}
		return c
	}
	s := r.op1("Sub", []*graph.Value{r.op1("Mul", []*graph.Value{L, scal(u.Factor / float64(u.Orig))}), scal(u.Factor - 1)})
	s = typed(r.op1("Max", []*graph.Value{s, scal(1)}), f64, 0)
	negE := u.DynamicExponents(len(pl.omega))
	for i := range negE {
		negE[i] = -negE[i]
	}
	om, err := r.table("onnxpe_extend_inv_freq", f64, dims, perElem(pl.omega))
	if err != nil {
		return err
	}
	ex, err := r.table("onnxpe_extend_ntk_exponent", f64, dims, perElem(negE))
	if err != nil {
		return err
	}
	y := typed(r.op1("Mul", []*graph.Value{om, r.op1("Pow", []*graph.Value{s, ex})}), f64, len(dims))
	if dt != f64 {
		y = typed(r.op1("Cast", []*graph.Value{y}, graph.IntAttr("to", int64(dt))), dt, len(dims))
	}
	if v.Producer() != nil {
		v.ReplaceKeepingName(y)
	} else {
		v.ReplaceAllUsesWith(y)
	}
	it.edit(name, "frequencies computed from the largest position: %s · max(1, %g·L/%d - %g)^(-2k/%d), in float64 rounded to %v", fmtFloats(pl.omega, dt), u.Factor, u.Orig, u.Factor-1, u.RotaryDim-2, dt)
	return nil
}

// maxPositionPlus1 is L = the largest position of a call + 1, a scalar of
// type dt, read where the rotation reads its positions.
func (x *Extended) maxPositionPlus1(ev *RoPEEvidence, dt graph.DataType) (*graph.Value, error) {
	L, err := x.callLength(ev)
	if err != nil {
		return nil, err
	}
	return typed(x.r.op1("Cast", []*graph.Value{L}, graph.IntAttr("to", int64(dt))), dt, 0), nil
}

// callLength is the largest position of a call + 1 as an int64 scalar:
// from the positions the rotation reads (the largest, or the first plus
// the sequence length), or, for fused ops, from their position ids or
// GroupQueryAttention's total_sequence_length.
func (x *Extended) callLength(ev *RoPEEvidence) (*graph.Value, error) {
	r, w := x.r, x.ctx.Work()
	one := r.scalarInt(1)
	max1 := func(v *graph.Value, dt graph.DataType) *graph.Value {
		v = r.castInt64(v, dt)
		m := r.op1("ReduceMax", []*graph.Value{v}, graph.IntAttr("keepdims", 0))
		return typed(r.op1("Add", []*graph.Value{m, one}), graph.Int64, 0)
	}
	for _, b := range ev.Blocks {
		if b.Op != "" {
			n := r.node(b.Op)
			if n != nil && n.OpType == "GroupQueryAttention" && n.Input(6) != nil {
				t := r.castInt64(n.Input(6), graph.Int32)
				return typed(r.op1("Reshape", []*graph.Value{t, r.ints([]int64{0})}), graph.Int64, 0), nil
			}
			continue
		}
		if out, err := r.lookup(b.Q.Out); err == nil {
			if n := out.Producer(); n != nil && n.OpType == "RotaryEmbedding" {
				pi := 3
				if n.Domain == DomainMicrosoft {
					pi = 1
				}
				if p := n.Input(pi); p != nil && r.rank(p) == 2 {
					return max1(p, graph.Int64), nil
				}
				return nil, extendErr("dynamic-ntk needs the positions of every call: %s reads its positions as one offset", nodeName(n))
			}
		}
	}
	pos := ev.Positions
	if pos == nil {
		pos = w.positionsInput(ev)
	}
	switch {
	case pos != nil && pos.Value != "":
		v, err := r.lookup(pos.Value)
		if err != nil {
			return nil, err
		}
		return max1(v, w.ElemType(pos.value)), nil
	case pos != nil && len(ev.Blocks) > 0:
		// The first position plus the sequence length of q.
		q, err := r.lookup(ev.Blocks[0].Q.In)
		if err != nil {
			return nil, err
		}
		start := r.scalarInt(pos.StartConst)
		if pos.Start != "" {
			v, err := r.lookup(pos.Start)
			if err != nil {
				return nil, err
			}
			start = r.op1("Reshape", []*graph.Value{r.castInt64(v, w.ElemType(pos.start)), r.ints([]int64{0})})
		}
		seq := r.op1("Reshape", []*graph.Value{r.dimOf(q, int64(ev.Axis)), r.ints([]int64{0})})
		return typed(r.op1("Add", []*graph.Value{start, seq}), graph.Int64, 0), nil
	}
	why := ev.PositionsWhy
	if why == "" {
		why = "no value holds them"
	}
	return nil, extendErr("dynamic-ntk needs the positions of every call, which the rotation does not read from one value (%s)", why)
}

// ropeTablesDynamic replaces the stored cos/sin tables (or fused caches)
// of a finding by their computation for every call under dynamic NTK: rows
// 0..L-1, L the largest position + 1, of ω_k·s(L)^(-2k/(d-2)), in float64
// (cast to the table's type), each column the cos or sin of its pair as in
// the stored table.
func (x *Extended) ropeTablesDynamic(it *ExtendItem, pl *ropePlan, u *RoPERule, amp float64) error {
	r := x.r
	Lint, err := x.callLength(pl.ev)
	if err != nil {
		return err
	}
	f64 := graph.Double // computed in float64, rounded once to the table's type
	Lf := typed(r.op1("Cast", []*graph.Value{Lint}, graph.IntAttr("to", int64(f64))), f64, 0)
	scal := func(v float64) *graph.Value {
		c, err := r.table("onnxpe_extend_const", f64, nil, []float64{v})
		if err != nil {
			panic("passes: " + err.Error())
		}
		return c
	}
	half := len(pl.omega)
	sv := r.op1("Sub", []*graph.Value{r.op1("Mul", []*graph.Value{Lf, scal(u.Factor / float64(u.Orig))}), scal(u.Factor - 1)})
	sv = r.op1("Max", []*graph.Value{sv, scal(1)})
	negE := u.DynamicExponents(half)
	for i := range negE {
		negE[i] = -negE[i]
	}
	om, err := r.table("onnxpe_extend_inv_freq", f64, []int64{1, int64(half)}, pl.omega)
	if err != nil {
		return err
	}
	ex, err := r.table("onnxpe_extend_ntk_exponent", f64, []int64{1, int64(half)}, negE)
	if err != nil {
		return err
	}
	freq := r.op1("Mul", []*graph.Value{om, r.op1("Pow", []*graph.Value{sv, ex})}) // [1, half]
	rows := r.op1("Cast", []*graph.Value{r.op1("Range", []*graph.Value{r.scalarInt(0), Lint, one(r)})}, graph.IntAttr("to", int64(f64)))
	ang := r.op1("Mul", []*graph.Value{r.unsqueeze(rows, 1), freq}) // [L, half]
	cosV, sinV := r.op1("Cos", []*graph.Value{ang}), r.op1("Sin", []*graph.Value{ang})
	if amp != 1 {
		cosV = r.op1("Mul", []*graph.Value{cosV, scal(amp)})
		sinV = r.op1("Mul", []*graph.Value{sinV, scal(amp)})
	}
	all := typed(r.op1("Concat", []*graph.Value{cosV, sinV, r.op1("Neg", []*graph.Value{cosV}), r.op1("Neg", []*graph.Value{sinV})}, graph.IntAttr("axis", 1)), f64, 2)
	tables, err := x.storedCosSin(pl)
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
		y := typed(r.op1("Gather", []*graph.Value{all, r.vecInt(idx...)}, graph.IntAttr("axis", 1)), f64, 2)
		if row0 > 0 {
			head, err := r.table("onnxpe_extend_rows", f64, []int64{int64(row0), int64(tab.width)}, tab.vals[:row0*tab.width])
			if err != nil {
				return err
			}
			y = r.op1("Concat", []*graph.Value{head, y}, graph.IntAttr("axis", 0))
		}
		dims := slices.Clone(tab.dims)
		dims[tab.axis] = -1
		y = r.op1("Reshape", []*graph.Value{y, r.vecInt(dims...)})
		if tab.dt != f64 {
			y = r.op1("Cast", []*graph.Value{y}, graph.IntAttr("to", int64(tab.dt)))
		}
		typed(y, tab.dt, len(dims))
		x.changed = append(x.changed, base)
		base.ReplaceAllUsesWith(y)
		it.edit(base.Name, "cos/sin table %v %v computed for every call: rows 0..L-1 (L the largest position + 1) of the frequencies %s · max(1, %g·L/%d - %g)^(-2k/%d), in float64", tab.dt, tab.dims, fmtFloats(pl.omega, f64), u.Factor, u.Orig, u.Factor-1, u.RotaryDim-2)
	}
	it.note("dynamic NTK: the cos/sin follow the length of every call, so the tables are computed in the graph (in float64, rounded to the table's type) instead of stored")
	return nil
}

func one(r *Rewrite) *graph.Value { return r.scalarInt(1) }

// positionsInput is the graph input holding position ids [batch, seq]
// that the cos/sin of ev are computed from, when the detector could not
// say where the positions are read (dynamic rules).
func (w *Work) positionsInput(ev *RoPEEvidence) *Positions {
	var vals []*graph.Value
	for _, b := range ev.Blocks {
		for _, s := range []RoPESide{b.Q, b.K} {
			if s.side != nil {
				vals = append(vals, s.side.Pos...)
			}
		}
	}
	var found *graph.Value
	for _, n := range w.cone(vals...) {
		for _, in := range n.Inputs() {
			if in != nil && in.Producer() == nil && in.IsGraphInput() && w.Role(in) == RolePositions {
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
	return w.newPositions(found)
}

// ropeAmplitude makes cos and sin carry amplitude a: the constants that
// scale them (a Mul after each Sin and Cos) replaced, or a Mul inserted
// after each.
func (x *Extended) ropeAmplitude(it *ExtendItem, pl *ropePlan, a float64) error {
	r, an := x.r, pl.ev.Angles
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
		n := r.node(name)
		if n == nil || (n.OpType != "Sin" && n.OpType != "Cos") || !isONNX(n) {
			continue
		}
		out := n.Output(0)
		if cur != 1 {
			// The Mul by a constant equal to the current scale, maybe
			// after a Cast.
			c := x.scaleConst(out, cur)
			if c == nil {
				return extendErr("the %s of the rotation is not multiplied by a constant %.7g: cannot change the scale to %.7g", nodeName(n), cur, a)
			}
			if !replaced[c] {
				replaced[c] = true
				t := x.constTensor(c)
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
				x.replaceConst(c, nt)
				it.edit(c.Name, "scale of %s %.7g: %.7g", n.OpType, cur, a)
			}
			done++
			continue
		}
		if out.IsGraphOutput() {
			return extendErr("the %s of the rotation is a graph output", n.OpType)
		}
		c, err := r.table("onnxpe_extend_attention_factor", an.Type, nil, []float64{a})
		if err != nil {
			return err
		}
		uses := out.Uses()
		y := typed(r.op1("Mul", []*graph.Value{out, c}), an.Type, -1)
		for _, u := range uses {
			u.Node.SetInput(u.Index, y)
		}
		it.edit(nodeName(n), "%s multiplied by attention_factor %.7g", n.OpType, a)
		done++
	}
	if done == 0 {
		return extendErr("no Sin or Cos node computes the rotation's cos and sin: cannot scale them by %g", a)
	}
	return nil
}

// scaleConst is the constant (a scalar equal to s) a Mul multiplies v by,
// looking through casts.
func (x *Extended) scaleConst(v *graph.Value, s float64) *graph.Value {
	for steps := 0; steps < 4; steps++ {
		var next *graph.Value
		for _, u := range v.Uses() {
			n := u.Node
			switch {
			case n.OpType == "Mul" && isONNX(n) && len(n.Inputs()) == 2:
				c := n.Input(1 - u.Index)
				if t := x.constTensor(c); t != nil && t.Len() == 1 {
					if f, err := t.Float64s(); err == nil && math.Abs(f[0]-s) <= 1e-6*math.Abs(s) {
						return c
					}
				}
			case n.OpType == "Cast" && isONNX(n) && len(v.Uses()) == 1:
				next = n.Output(0)
			}
		}
		if next == nil {
			return nil
		}
		v = next
	}
	return nil
}

// replaceConst gives value v the tensor t: an initializer keeps its name
// and gets t; another value (a Constant node's output, a value computed
// from constants) is replaced by a new initializer.
func (x *Extended) replaceConst(v *graph.Value, t *graph.Tensor) {
	x.changed = append(x.changed, v)
	if v.Const != nil && v.Producer() == nil {
		t.SetName(v.Name)
		v.Const = t
		v.Type = graph.TensorType(t.DataType(), graph.Dims(t.Dims()...))
		return
	}
	nv, err := x.r.addConst(t)
	if err != nil {
		panic("passes: " + err.Error())
	}
	v.ReplaceAllUsesWith(nv)
	x.changed = append(x.changed, nv)
}

// ropeTables recomputes the stored cos/sin tables of a finding (caches of
// fused ops included) in float64 with the new frequencies and amplitude,
// for positions 0..N-1.
func (x *Extended) ropeTables(it *ExtendItem, pl *ropePlan, omega []float64, amp float64) error {
	tables, err := x.storedCosSin(pl)
	if err != nil {
		return err
	}
	n := x.Opts.To
	for _, s := range tables {
		base, tab, row0, cols := s.base, s.tab, s.row0, s.cols
		vals := make([]float64, (row0+n)*tab.width)
		copy(vals, tab.vals[:row0*tab.width])
		for p := 0; p < n; p++ {
			for j, c := range cols {
				th := float64(p) * omega[c.pair]
				v := math.Cos(th)
				if c.sin {
					v = math.Sin(th)
				}
				vals[(row0+p)*tab.width+j] = c.sign * amp * v
			}
		}
		if !finite(vals) {
			return extendErr("the cos/sin table %q: the rule gives non-finite values", base.Name)
		}
		dims := slices.Clone(tab.dims)
		dims[tab.axis] = int64(row0 + n)
		t, err := graph.TensorFromFloat64(base.Name, tab.dt, dims, vals)
		if err != nil {
			return err
		}
		x.replaceConst(base, t)
		it.edit(base.Name, "cos/sin table %v %v to %v, recomputed in float64 (%s)", tab.dt, tab.dims, dims, u2s(it.Plan.(*ropePlan).rule))
	}
	return nil
}

func u2s(u *RoPERule) string { return u.String() }

// storedTable is one stored cos/sin table of a RoPE finding: the constant,
// read as [rows, width], the row of position 0 and what every column holds.
type storedTable struct {
	base *graph.Value
	tab  *tableConst
	row0 int
	cols []column
}

// storedCosSin reads the distinct cos/sin tables the finding's evidence
// names (StoredCosSin) and identifies their columns by value. Names that
// lead to one constant (through layout ops and casts) give it once.
func (x *Extended) storedCosSin(pl *ropePlan) ([]storedTable, error) {
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
		base, err := x.baseConst(name)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out, func(s storedTable) bool { return s.base == base }) {
			continue
		}
		tab, err := x.tableOf(base)
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
			return nil, extendErr("the cos/sin table %q: %v", base.Name, err)
		}
		out = append(out, storedTable{base, tab, row0, cols})
	}
	return out, nil
}

// tableConst is a constant read as [rows, width]: every axis but the last
// has size 1 except the rows axis.
type tableConst struct {
	dims  []int64
	axis  int
	rows  int
	width int
	dt    graph.DataType
	vals  []float64
}

func (x *Extended) tableOf(v *graph.Value) (*tableConst, error) {
	t := x.constTensor(v)
	if t == nil {
		return nil, extendErr("%q is not a constant", v.Name)
	}
	dims := slices.Clone(t.Dims())
	if len(dims) < 2 {
		return nil, extendErr("the table %q has shape %v", v.Name, dims)
	}
	tc := &tableConst{dims: dims, axis: -1, width: int(dims[len(dims)-1]), dt: t.DataType(), rows: 1}
	for i, d := range dims[:len(dims)-1] {
		if d != 1 {
			if tc.axis >= 0 {
				return nil, extendErr("the table %q has shape %v: more than one axis of rows", v.Name, dims)
			}
			tc.axis, tc.rows = i, int(d)
		}
	}
	if tc.axis < 0 {
		tc.axis = len(dims) - 2
	}
	vals, err := t.Float64s()
	if err != nil {
		return nil, extendErr("the table %q: %v", v.Name, err)
	}
	tc.vals = vals
	return tc, nil
}

// constTensor is the tensor of an initializer or of a Constant node's
// output (nil otherwise).
func (x *Extended) constTensor(v *graph.Value) *graph.Tensor {
	if v.Const != nil && v.Producer() == nil {
		return v.Const
	}
	if p := v.Producer(); p != nil && p.OpType == "Constant" && isONNX(p) {
		if a := p.Attr("value"); a != nil && a.Tensor != nil {
			return a.Tensor
		}
	}
	return nil
}

// baseConst follows a table value of the model back through layout ops
// that keep its last axis and its row order (Unsqueeze, Squeeze, Expand,
// Reshape, Cast, Identity) to the constant holding it.
func (x *Extended) baseConst(name string) (*graph.Value, error) {
	v, err := x.r.lookup(name)
	if err != nil {
		return nil, err
	}
	for steps := 0; steps < 16; steps++ {
		if x.constTensor(v) != nil {
			return v, nil
		}
		p := v.Producer()
		if p == nil || !isONNX(p) {
			break
		}
		switch p.OpType {
		case "Unsqueeze", "Squeeze", "Expand", "Reshape", "Cast", "Identity":
			v = p.Input(0)
			continue
		}
		break
	}
	return nil, extendErr("the table %q is not a constant of the model (it is computed by %s)", name, producerString(v))
}

func producerString(v *graph.Value) string {
	if v == nil || v.Producer() == nil {
		return "a graph input"
	}
	return fmt.Sprintf("%s (%s)", nodeName(v.Producer()), v.Producer().OpType)
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
func identifyColumns(t *tableConst, row0 int, omega []float64, amp float64) ([]column, error) {
	rows := t.rows - row0
	if rows < 2 {
		return nil, fmt.Errorf("%d rows", rows)
	}
	tol := 2e-4
	if isHalfType(t.dt) {
		tol = 4e-3
	}
	cols := make([]column, t.width)
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
					e = max(e, math.Abs(t.vals[(row0+p)*t.width+j]-c.sign*amp*want)/(1+float64(p)*om*1e-3))
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
			s = append(s, "...", fmt.Sprintf("%.4g", roundTrip(dt, v[len(v)-1])))
			break
		}
		s = append(s, fmt.Sprintf("%.4g", roundTrip(dt, x)))
	}
	return fmt.Sprint(s)
}
