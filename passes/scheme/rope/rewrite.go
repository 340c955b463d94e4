package rope

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/work"
)

// RewriteRoPE fuses every unfused RoPE rotation into a RotaryEmbedding node.
var Rewrite = &passes.Pass[*rewrite.Change]{
	Name: "rewrite_rope",
	Doc: `Replace each rotation of q and k by one fused RotaryEmbedding node.

Per RoPE finding, the cos/sin caches ([max_positions, rotary_dim/2], in
the model's float type) hold what the model's own cos/sin subgraph
computes at positions 0..N-1: it is evaluated with the kernels (cos and
sin of the model's angles in float64, rounded once), with the positions
replaced, so scaled frequencies and YaRN's attention factor are kept as
they are; cos/sin stored in float16 (cast up at use) are kept as stored
when they are a rotation up to float16's rounding; positions beyond a
stored table are computed in float64 from the measured frequencies and
amplitude. N is --max-positions, else the rows of the model's table, else
4096. Layers with the same caches share them. The fused node reads q as it was (4-D [batch, heads, seq, head] as
is; [batch, seq, heads, head] reshaped to 3-D) and the positions where
the model read them (an input, a Range offset by a KV-cache length, the
start of a slice). When the cos/sin depend on more than the positions
(dynamic NTK, frequencies given as inputs) the rotation is fused and the
cos/sin stay computed in the graph. --rope-op onnx emits the standard op
of opset 23 and upgrades the model's opset.`,
	Requires: []passes.Analyzer{work.Normalize, attn.Blocks, attn.Sides, Detect, rewrite.Edit},
	Run:      runRewriteRoPE,
}

func runRewriteRoPE(c *passes.Context) (*rewrite.Change, error) {
	r := rewrite.Of(c)
	// RotaryEmbedding turns every pair by one position per token: M-RoPE's
	// and 2-D RoPE's findings are their own passes' (which say what they
	// did with them); said here only when that pass does not run.
	otherPass := func(f *passes.Finding) (owner, short, what string) {
		p, ok := f.Params.(*Params)
		switch {
		case !ok:
		case p.Axes == 2:
			return "rewrite_axial_rope", "axial", "the two axes of 2-D RoPE"
		case p.MultimodalSections != nil:
			return "rewrite_mrope", "mrope", "M-RoPE's position streams"
		}
		return "", "", ""
	}
	return r.Findings(c, rewrite.Findings{Pass: "rewrite_rope", Scheme: Name, Detect: Detect,
		Want: func(f *passes.Finding) bool { owner, _, _ := otherPass(f); return owner == "" || !c.Runs(owner) },
		Do: func(w *work.Work, f *passes.Finding, ch *rewrite.Change) error {
			if owner, short, what := otherPass(f); owner != "" {
				return fmt.Errorf("%w: %s do not fit RotaryEmbedding (one position turns every pair): the finding is %s's, which this run leaves out (--passes %s)", rewrite.ErrRewrite, what, owner, short)
			}
			return rope(r, w, f, ch, attentionOf(c, r))
		},
		After: func(ch *rewrite.Change) error { return convertRotaries(r, ch) }})
}

// convertRotaries converts the fused RotaryEmbedding nodes of the other
// domain, when --rope-op names one.
func convertRotaries(r *rewrite.Rewrite, ch *rewrite.Change) error {
	if r.Opts.RoPEOp != "" {
		toONNX := r.Opts.RoPEOp == passes.RoPEOpONNX
		for _, n := range r.M.Graph.Nodes() {
			ms := n.Domain == rewrite.DomainMicrosoft
			if n.OpType != "RotaryEmbedding" || !ms && n.Domain != "" && n.Domain != "ai.onnx" || ms != toONNX {
				continue
			}
			if err := convertRotary(r, n, toONNX); err != nil {
				if errors.Is(err, rewrite.ErrRewrite) {
					ch.Skipped = append(ch.Skipped, fmt.Sprintf("%s (RotaryEmbedding): %s", work.NodeName(n), rewrite.Reason(err)))
					continue
				}
				return err
			}
			ch.Note("converted the fused RotaryEmbedding nodes to the %s op", r.Opts.RoPEOp)
		}
	}
	return nil
}

// ropeTarget is one rotation to fuse, in the rewritten model.
type ropeTarget struct {
	in, out *graph.Value
	work    *attn.Side
	layer   int
}

func rope(r *rewrite.Rewrite, w *work.Work, f *passes.Finding, ch *rewrite.Change, blocks *attentionBlocks) error {
	return ropeWith(r, w, f, ch, nil, nil, blocks)
}

// ropeCaches computes cos/sin caches [n, half] for a fusion, the columns
// given by col (extend's reference computes them from a formula).
type ropeCaches func(n, half int, col func([2]int) int) (cos, sin []float64, err error)

// ropeWith fuses the rotations of f; pos, when set, says where the
// positions are read when the finding does not (its cos/sin depend on
// more than the positions), and caches, when set, replaces the model's
// own cos/sin. With blocks (--attention fused), each block the op can
// express becomes one GroupQueryAttention node first.
func ropeWith(r *rewrite.Rewrite, w *work.Work, f *passes.Finding, ch *rewrite.Change, pos *probe.Positions, caches ropeCaches, blocks *attentionBlocks) error {
	ev, ok := f.Evidence.(*Evidence)
	p, ok2 := f.Params.(*Params)
	if !ok || !ok2 || len(ev.Blocks) == 0 {
		return fmt.Errorf("%w: the finding has no RoPE evidence", rewrite.ErrRewrite)
	}
	if pos != nil && ev.Positions == nil {
		e := *ev
		e.Positions = pos
		ev = &e
	}
	var targets []ropeTarget
	for _, b := range ev.Blocks {
		for _, s := range []Side{b.Q, b.K} {
			if s.side == nil || s.In == "" {
				continue
			}
			in, err := r.Lookup(rewrite.MainName(w, s.side.In))
			if err != nil {
				return err
			}
			out, err := r.Lookup(rewrite.MainName(w, s.side.Out))
			if err != nil {
				return err
			}
			targets = append(targets, ropeTarget{in: in, out: out, work: s.side, layer: b.Layer})
		}
	}
	if len(targets) == 0 {
		return fmt.Errorf("%w: no rotation to fuse", rewrite.ErrRewrite)
	}
	dt := w.ElemType(targets[0].work.Out)
	if !dt.IsFloat() {
		return fmt.Errorf("%w: q has element type %v", rewrite.ErrRewrite, dt)
	}
	half := p.RotaryDim / 2
	col := func(pair [2]int) int {
		if p.Layout == "interleaved" {
			return pair[0] / 2
		}
		return pair[0]
	}
	var cosV, sinV *graph.Value
	computed := ev.Positions == nil
	var rt *runtimeCache
	if !computed {
		n := r.Opts.MaxPositions
		if n <= 0 {
			n = passes.DefaultMaxPositions
			if p.MaxPositions != nil {
				n = *p.MaxPositions
			}
		}
		var cs, sn []float64
		var err error
		if caches != nil {
			cs, sn, err = caches(n, half, col)
		} else {
			cs, sn, err = ropeCache(w, targets[0].work, ev, p, n, col)
		}
		if err != nil {
			return fmt.Errorf("%w: %v", rewrite.ErrRewrite, err)
		}
		if cosV, err = r.Table("onnxpe_rope_cos_cache", dt, []int64{int64(n), int64(half)}, cs); err != nil {
			return err
		}
		if sinV, err = r.Table("onnxpe_rope_sin_cache", dt, []int64{int64(n), int64(half)}, sn); err != nil {
			return err
		}
	} else {
		var err error
		if rt, err = ropeRuntimeCache(w, targets[0].work, ev, p, col); err != nil {
			return fmt.Errorf("%w: %s: %v", rewrite.ErrRewrite, ev.PositionsWhy, err)
		}
		ch.Note("layers %v: the cos/sin depend on more than the positions (%s): the rotation is fused, the cos/sin stay computed in the graph", f.Layers, ev.PositionsWhy)
	}
	fused := map[int]bool{}
	if blocks != nil {
		var err error
		if fused, err = blocks.fuse(r, w, f, ch, targets, cosV, sinV, rt != nil); err != nil {
			return err
		}
	}
	for _, t := range targets {
		if fused[t.layer] {
			continue
		}
		if err := fuseRotation(r, w, t, ev, p, dt, cosV, sinV, rt); err != nil {
			return err
		}
	}
	return nil
}

// ropeCache evaluates the model's own cos/sin at positions 0..n-1 (the
// rows a stored table holds; beyond it, float64 from the measured
// frequencies and amplitude), [n, rotary_dim/2] each.
func ropeCache(w *work.Work, s *attn.Side, ev *Evidence, p *Params, n int, col func([2]int) int) ([]float64, []float64, error) {
	half := p.RotaryDim / 2
	exact := n
	if p.MaxPositions != nil && *p.MaxPositions < exact {
		exact = *p.MaxPositions
	}
	cs := make([]float64, n*half)
	sn := make([]float64, n*half)
	ec, es, err := ropeCacheExact(w, s, ev, exact, col, half, false)
	if err != nil {
		return nil, nil, err
	}
	copy(cs, ec)
	copy(sn, es)
	if ev.Stored != nil {
		// A stored table can hold anything in the other column of a pair;
		// the fused op turns both dimensions by one cos and one sin.
		if err := ropePairsMatch(w, s, ev, exact, col, half, ec, es); err != nil {
			return nil, nil, err
		}
	}
	// Check the model's values against the measured frequencies (this
	// confirms the positions were read where the graph reads them): the
	// angles over all positions give each frequency precisely, which
	// must be the measured one, and every angle must lie on its line.
	// Positions beyond the model's values continue that line in float64.
	// The fused caches hold the model's values as they are: a rotation
	// applied in float16, or cos/sin stored as float16 (ORT GenAI's fp16
	// caches, widened at use), is off the exact angles by its rounding,
	// which the tolerance allows (2 units of roundoff of the type: the
	// angle and the amplitude of a pair rounded per value move by at most
	// one), no more.
	tolAng := 2e-5
	if probe.IsHalfType(w.ElemType(s.Out)) {
		tolAng = 8e-3
	}
	if u := storedRoundoff(w, ev); 2*u > tolAng {
		tolAng = 2 * u
	}
	for k, pr := range ev.Pairs {
		c := col(pr)
		om, sign := ev.InvFreq[k], 1.0
		if exact > 1 {
			th := make([]float64, exact)
			var sxy, sxx float64
			for pos := 0; pos < exact; pos++ {
				a := math.Atan2(es[pos*half+c], ec[pos*half+c])
				if pos > 0 {
					a = th[pos-1] + math.Remainder(a-th[pos-1], 2*math.Pi)
				}
				th[pos] = a
				sxy += float64(pos) * a
				sxx += float64(pos) * float64(pos)
			}
			fit := sxy / sxx
			if fit < 0 {
				sign, fit = -1, -fit
			}
			if math.Abs(fit/om-1) > 1e-3 {
				return nil, nil, fmt.Errorf("the model's cos/sin of pair %d turn by %.7g per position, the rotation measured %.7g", k, fit, om)
			}
			om = fit
			for pos := 0; pos < exact; pos++ {
				d := math.Abs(th[pos] - sign*float64(pos)*om)
				amp := math.Hypot(es[pos*half+c], ec[pos*half+c])
				if d > tolAng*(1+float64(pos)*om*1e-2) || math.Abs(amp-ev.Amplitude) > tolAng*ev.Amplitude {
					return nil, nil, fmt.Errorf("the model's cos/sin of pair %d at position %d (%.7g, %.7g) are off the rotation by %.3g rad and %.3g in amplitude (%.3g allowed)", k, pos, ec[pos*half+c], es[pos*half+c], d, math.Abs(amp/ev.Amplitude-1), tolAng)
				}
			}
		}
		for pos := exact; pos < n; pos++ {
			th := float64(pos) * om
			cs[pos*half+c] = ev.Amplitude * math.Cos(th)
			sn[pos*half+c] = sign * ev.Amplitude * math.Sin(th)
		}
	}
	return cs, sn, nil
}

// ropeCacheExact probes the rotation of side s at positions 0..n-1 with q
// set to 1 at the first dimension of every pair: the rotated q holds cos
// and sin of every pair as the model computes them.
//
// With second set, q is 1 at the second dimension of every pair instead:
// the rotated q holds cos at the second dimension and -sin at the first.
func ropeCacheExact(w *work.Work, s *attn.Side, ev *Evidence, n int, col func([2]int) int, half int, second bool) ([]float64, []float64, error) {
	try := func(reduce bool) ([]float64, []float64, error) {
		pr := probe.NewProbe(w, 1, n, 0)
		pr.Budget = 1 << 20
		cuts := map[*graph.Value]*kernels.Tensor{}
		if err := probe.CutPositions(w, pr, ev.Positions, 0, cuts); err != nil {
			return nil, nil, err
		}
		shape, ok := pr.BindShape(w.Shape(s.In))
		if !ok || ev.Axis >= len(shape)-1 || shape[ev.Axis] != n {
			return nil, nil, fmt.Errorf("the shape %s of q does not follow the sequence", w.ShapeString(w.Shape(s.In)))
		}
		if reduce {
			for a := range shape[:len(shape)-1] {
				if a != ev.Axis {
					shape[a] = 1
				}
			}
		}
		d := shape[len(shape)-1]
		total := 1
		for _, x := range shape {
			total *= x
		}
		vals := make([]float64, total)
		for k := 0; k < total/d; k++ {
			for _, pp := range ev.Pairs {
				if second {
					vals[k*d+pp[1]] = 1
				} else {
					vals[k*d+pp[0]] = 1
				}
			}
		}
		t := probe.FromFloat64Any(w.ElemType(s.In), shape, vals)
		if t == nil {
			return nil, nil, fmt.Errorf("element type %v of q", w.ElemType(s.In))
		}
		cuts[s.In] = t
		pr.SetCuts(cuts)
		out, err := pr.Value(s.Out)
		if err != nil {
			return nil, nil, err
		}
		if !slices.Equal(out.Shape, shape) {
			return nil, nil, fmt.Errorf("the rotated value has shape %v, q has %v", out.Shape, shape)
		}
		o := out.Float64s()
		stride := 1
		for _, x := range shape[ev.Axis+1 : len(shape)-1] {
			stride *= x
		}
		cs := make([]float64, n*half)
		sn := make([]float64, n*half)
		for pos := 0; pos < n; pos++ {
			slot := pos * stride
			for _, pp := range ev.Pairs {
				if second {
					cs[pos*half+col(pp)] = o[slot*d+pp[1]]
					sn[pos*half+col(pp)] = -o[slot*d+pp[0]]
				} else {
					cs[pos*half+col(pp)] = o[slot*d+pp[0]]
					sn[pos*half+col(pp)] = o[slot*d+pp[1]]
				}
			}
		}
		return cs, sn, nil
	}
	cs, sn, err := try(true)
	if err != nil {
		var err2 error
		if cs, sn, err2 = try(false); err2 != nil {
			return nil, nil, fmt.Errorf("evaluating the cos/sin at positions 0..%d: %v", n-1, err)
		}
	}
	return cs, sn, nil
}

// ropePairsMatch checks that the second dimension of every pair is turned
// by the cos and sin the first dimension's probe read (cos, sin at
// positions 0..n-1): a fused RotaryEmbedding applies one of each per pair.
func ropePairsMatch(w *work.Work, s *attn.Side, ev *Evidence, n int, col func([2]int) int, half int, cos, sin []float64) error {
	c2, s2, err := ropeCacheExact(w, s, ev, n, col, half, true)
	if err != nil {
		return err
	}
	for pos := 0; pos < n; pos++ {
		for k, pp := range ev.Pairs {
			i := pos*half + col(pp)
			if math.Abs(c2[i]-cos[i]) > 1e-6*math.Max(1, math.Abs(cos[i])) || math.Abs(s2[i]-sin[i]) > 1e-6*math.Max(1, math.Abs(sin[i])) {
				return fmt.Errorf("the two dimensions of pair %d are turned by different cos/sin at position %d ((%.7g, %.7g) and (%.7g, %.7g)); a fused RotaryEmbedding turns both by one cos and one sin", k, pos, cos[i], sin[i], c2[i], s2[i])
			}
		}
	}
	return nil
}

// storedRoundoff is the unit roundoff of the narrowest float type the
// stored cos/sin tables of ev are kept in (float16: 2^-11, bfloat16:
// 2^-8), 0 when the cos/sin are not read from stored tables or are kept in
// float32 or wider.
func storedRoundoff(w *work.Work, ev *Evidence) float64 {
	if ev.Stored == nil {
		return 0
	}
	u := 0.0
	for _, cols := range [][]TableColumn{ev.Stored.Cos, ev.Stored.Sin} {
		for _, c := range cols {
			v := probe.Lookup(w, c.Table)
			if v == nil {
				continue
			}
			switch w.ElemType(v) {
			case graph.Float16:
				u = max(u, 0x1p-11)
			case graph.BFloat16:
				u = max(u, 0x1p-8)
			}
		}
	}
	return u
}

// runtimeCache are cos/sin the graph keeps computing, read as caches: the
// values holding cos and sin, the columns of every pair, and whether
// their rows run over batch and sequence or the sequence only.
type runtimeCache struct {
	cos, sin       string
	cosCol, sinCol []int64
	width          int64
	batch          bool
	sinSign        float64
}

// ropeRuntimeCache finds, among the values entering the rotation, those
// holding cos and sin of every pair at every position (a column each),
// for rotations whose cos/sin stay computed.
func ropeRuntimeCache(w *work.Work, s *attn.Side, ev *Evidence, p *Params, col func([2]int) int) (*runtimeCache, error) {
	half := p.RotaryDim / 2
	pr := probe.NewProbe(w, 1, 8, 0)
	shape, ok := pr.BindShape(w.Shape(s.In))
	if !ok || ev.Axis >= len(shape)-1 {
		return nil, fmt.Errorf("the shape of q is not known")
	}
	theta, amp, err := angles(w, pr, s, shape, ev.Pairs)
	if err != nil {
		return nil, err
	}
	// A fused op turns each pair by one cos and one sin: the second
	// dimension of a pair must see the same ones (it does for any cos/sin
	// a RoPE computes; caches given as inputs can hold anything).
	d := shape[len(shape)-1]
	out2, err := unitProbe(w, pr, s, shape, func(_ int, row []float64) {
		for _, pp := range ev.Pairs {
			row[pp[1]] = 1
		}
	})
	if err != nil {
		return nil, err
	}
	for k, pp := range ev.Pairs {
		for sl := range theta[k] {
			c, sn := amp[k][sl]*math.Cos(theta[k][sl]), amp[k][sl]*math.Sin(theta[k][sl])
			if math.Abs(out2[sl*d+pp[1]]-c) > 1e-5*(1+math.Abs(c)) || math.Abs(out2[sl*d+pp[0]]+sn) > 1e-5*(1+math.Abs(sn)) {
				return nil, fmt.Errorf("the two dimensions of pair %d are turned by different cos/sin (the caches are given as inputs and may hold anything); a fused RotaryEmbedding turns both by one cos and one sin", k)
			}
		}
	}
	stride := 1
	for _, x := range shape[ev.Axis+1 : len(shape)-1] {
		stride *= x
	}
	seq := shape[ev.Axis]
	want := func(k, pos int, sinOf bool) float64 {
		th, a := theta[k][pos*stride], amp[k][pos*stride]
		if sinOf {
			return a * math.Sin(th)
		}
		return a * math.Cos(th)
	}
	// A value [.., seq, width] whose column c holds, at every position,
	// cos (or sin) of pair k.
	find := func(sinOf bool, sign float64) (*graph.Value, []int64, bool) {
		for _, v := range s.Pos {
			vs := w.Shape(v)
			t, err := pr.Value(v)
			if err != nil || !vs.Ranked || t.Rank() < 2 || rewrite.MainName(w, v) == "" {
				continue
			}
			width := t.Shape[t.Rank()-1]
			if t.Shape[t.Rank()-2] != seq {
				continue
			}
			x := t.Float64s()
			cols := make([]int64, half)
			okAll := true
			for k, pp := range ev.Pairs {
				found := -1
				for c := 0; c < width && found < 0; c++ {
					match := true
					for pos := 0; pos < seq && match; pos++ {
						if math.Abs(x[pos*width+c]-sign*want(k, pos, sinOf)) > 1e-5*math.Max(1, math.Abs(x[pos*width+c])) {
							match = false
						}
					}
					if match {
						found = c
					}
				}
				if found < 0 {
					okAll = false
					break
				}
				cols[col(pp)] = int64(found)
			}
			if okAll {
				return v, cols, true
			}
		}
		return nil, nil, false
	}
	cv, cc, ok := find(false, 1)
	if !ok {
		return nil, fmt.Errorf("no value entering the rotation holds the cos of every pair")
	}
	sign := 1.0
	sv, sc, ok := find(true, 1)
	if !ok {
		if sv, sc, ok = find(true, -1); !ok {
			return nil, fmt.Errorf("no value entering the rotation holds the sin of every pair")
		}
		sign = -1
	}
	if sign < 0 {
		return nil, fmt.Errorf("the sin entering the rotation is negated")
	}
	rc := &runtimeCache{cos: rewrite.MainName(w, cv), sin: rewrite.MainName(w, sv), cosCol: cc, sinCol: sc, sinSign: sign}
	cs, ss := w.Shape(cv), w.Shape(sv)
	rc.width = int64(cs.Last())
	if !cs.Last().Known() || cs.Last() != ss.Last() {
		return nil, fmt.Errorf("the cos/sin values have unknown or different widths")
	}
	// Rows: every axis before the last is the batch, the sequence or 1
	// (sizes the graph fixes are matched with q's batch and sequence), in
	// that order.
	qs := w.Shape(s.In)
	seen := 0 // 1: batch, 2: sequence
	for _, d := range cs.Dims[:len(cs.Dims)-1] {
		kind := 0
		switch {
		case d == 1:
			continue
		case d == qs.Dims[ev.Axis] || d.IsSym() && !w.IsBatchSym(d):
			kind = 2
		case d == qs.Dims[0] || d.IsSym():
			kind = 1
		}
		if kind == 0 || kind <= seen {
			return nil, fmt.Errorf("the cos value has shape %s (rows are not [batch,] sequence)", w.ShapeString(cs))
		}
		seen = kind
		rc.batch = rc.batch || kind == 1
	}
	if !work.SameShape(cs, ss) {
		return nil, fmt.Errorf("the cos and sin values have shapes %s and %s", w.ShapeString(cs), w.ShapeString(ss))
	}
	return rc, nil
}

// fuseRotation replaces one rotation by a RotaryEmbedding node.
func fuseRotation(r *rewrite.Rewrite, w *work.Work, t ropeTarget, ev *Evidence, p *Params, dt graph.DataType, cosV, sinV *graph.Value, rt *runtimeCache) error {
	ws := w.Shape(t.work.In)
	rank := ws.Rank()
	var attrs []*graph.Attr
	if p.Layout == "interleaved" {
		attrs = append(attrs, graph.IntAttr("interleaved", 1))
	}
	heads := int64(0)
	x := t.in
	restore := false
	switch {
	case rank == 4 && ev.Axis == 2:
		if d := ws.Dims[1]; d.Known() {
			heads = int64(d)
		}
	case rank == 4 && ev.Axis == 1:
		if d := ws.Dims[2]; d.Known() {
			heads = int64(d)
		} else {
			return fmt.Errorf("%w: q %s has an unknown number of heads", rewrite.ErrRewrite, w.ShapeString(ws))
		}
		x = rewrite.Typed(r.Op1("Reshape", []*graph.Value{t.in, r.VecInt(0, 0, -1)}), dt, 3)
		restore = true
	case rank == 3 && ev.Axis == 1:
		if d := ws.Dims[2]; d.Known() && int(d)%p.HeadDim == 0 {
			heads = int64(d) / int64(p.HeadDim)
		}
		if heads != 1 && ws.Dims[2] != work.Dim(p.HeadDim) && heads == 0 {
			return fmt.Errorf("%w: q %s: the heads of a 3-D q are not known", rewrite.ErrRewrite, w.ShapeString(ws))
		}
	default:
		return fmt.Errorf("%w: q has shape %s with positions along axis %d; RotaryEmbedding takes [batch, heads, seq, head] or [batch, seq, hidden]", rewrite.ErrRewrite, w.ShapeString(ws), ev.Axis)
	}
	if p.RotaryDim < p.HeadDim {
		attrs = append(attrs, graph.IntAttr("rotary_embedding_dim", int64(p.RotaryDim)))
	}
	if heads > 0 && (x != t.in || p.RotaryDim < p.HeadDim) {
		attrs = append(attrs, graph.IntAttr("num_heads", heads))
	}
	onnx := r.Opts.RoPEOp == passes.RoPEOpONNX
	var pos *graph.Value
	var err error
	if rt != nil {
		if cosV, sinV, pos, err = runtimeCaches(r, rt, t, ev, dt, onnx); err != nil {
			return err
		}
	} else if pos, err = positionIDs(r, w, ev.Positions, t, ev.Axis, onnx); err != nil {
		return err
	}
	var y *graph.Value
	if onnx {
		y = r.Op("RotaryEmbedding", "", []*graph.Value{x, cosV, sinV, pos}, 1, attrs...)[0]
	} else {
		y = r.Op("RotaryEmbedding", rewrite.DomainMicrosoft, []*graph.Value{x, pos, cosV, sinV}, 1, attrs...)[0]
	}
	if restore {
		rewrite.Typed(y, dt, 3)
		y = r.Op1("Reshape", []*graph.Value{y, r.ShapeOf(t.in)})
	}
	rewrite.Typed(y, dt, rank)
	if t.out.Type != nil {
		y.Type = t.out.Type.Clone()
	}
	t.out.ReplaceKeepingName(y)
	return nil
}

// positionIDs builds the position_ids input of a RotaryEmbedding from
// where the model reads its positions: [batch, seq] int64, or for
// com.microsoft a one-element first position when the positions are
// consecutive from it.
func positionIDs(r *rewrite.Rewrite, w *work.Work, pos *probe.Positions, t ropeTarget, axis int, onnx bool) (*graph.Value, error) {
	key := fmt.Sprintf("pos|%v|%s|%s|%d|%s|%d", onnx, pos.Value, pos.Start, pos.StartConst, t.in.Name, axis)
	if v, ok := r.Memo[key]; ok {
		return v, nil
	}
	first := func() (*graph.Value, error) {
		return r.BoundValue(w, pos.Start, pos.WorkStart, pos.StartConst, pos.StartIndex)
	}
	// [batch, seq] of q, for Expand.
	bs := func() *graph.Value { return r.DimOf(t.in, 0, int64(axis)) }
	var out *graph.Value
	switch {
	case pos.Value != "" && pos.Batch:
		v, err := r.Lookup(pos.Value)
		if err != nil {
			return nil, err
		}
		v = r.CastInt64(v, w.ElemType(pos.WorkValue))
		if w.Shape(pos.WorkValue).Rank() != 2 {
			v = r.Op1("Reshape", []*graph.Value{v, bs()})
		}
		out = v
	case !onnx && (pos.Value == "" || pos.Ranged):
		v, err := first()
		if err != nil {
			return nil, err
		}
		out = v
	case pos.Value != "":
		v, err := r.Lookup(pos.Value)
		if err != nil {
			return nil, err
		}
		v = r.CastInt64(v, w.ElemType(pos.WorkValue))
		v = r.Op1("Reshape", []*graph.Value{v, r.VecInt(1, -1)})
		out = r.Op1("Expand", []*graph.Value{v, bs()})
	default:
		// ONNX's op wants [batch, seq]: first + 0..S-1, expanded.
		f, err := first()
		if err != nil {
			return nil, err
		}
		s := r.DimOf(t.in, int64(axis))
		lim := r.Op1("Add", []*graph.Value{f, s})
		sq := func(v *graph.Value) *graph.Value {
			return r.Op1("Reshape", []*graph.Value{v, r.Ints([]int64{0})})
		}
		rg := r.Op1("Range", []*graph.Value{sq(f), sq(lim), r.ScalarInt(1)})
		v := r.Op1("Reshape", []*graph.Value{rg, r.VecInt(1, -1)})
		out = r.Op1("Expand", []*graph.Value{v, bs()})
	}
	rewrite.Typed(out, graph.Int64, -1)
	r.Memo[key] = out
	return out, nil
}

// runtimeCaches turns the computed cos/sin values into caches a
// RotaryEmbedding reads: rows of [rows, width] (batch·seq rows, or seq
// rows shared by the batch), the pairs' columns, and position ids that
// number the rows.
func runtimeCaches(r *rewrite.Rewrite, rt *runtimeCache, t ropeTarget, ev *Evidence, dt graph.DataType, onnx bool) (*graph.Value, *graph.Value, *graph.Value, error) {
	key := fmt.Sprintf("rt|%s|%s|%v|%s|%d", rt.cos, rt.sin, onnx, t.in.Name, ev.Axis)
	if v, ok := r.Memo[key+"|cos"]; ok {
		return v, r.Memo[key+"|sin"], r.Memo[key+"|pos"], nil
	}
	cache := func(name string, cols []int64) (*graph.Value, error) {
		v, err := r.Lookup(name)
		if err != nil {
			return nil, err
		}
		rows := r.Op1("Reshape", []*graph.Value{v, r.VecInt(-1, rt.width)})
		contiguous := true
		for i, c := range cols {
			if c != int64(i) {
				contiguous = false
			}
		}
		var out *graph.Value
		if contiguous {
			out = r.Op1("Slice", []*graph.Value{rows, r.VecInt(0), r.VecInt(int64(len(cols))), r.VecInt(1)})
		} else {
			out = r.Op1("Gather", []*graph.Value{rows, r.VecInt(cols...)}, graph.IntAttr("axis", 1))
		}
		return rewrite.Typed(out, dt, 2), nil
	}
	cosV, err := cache(rt.cos, rt.cosCol)
	if err != nil {
		return nil, nil, nil, err
	}
	sinV, err := cache(rt.sin, rt.sinCol)
	if err != nil {
		return nil, nil, nil, err
	}
	bs := r.DimOf(t.in, 0, int64(ev.Axis))
	var pos *graph.Value
	if rt.batch {
		n := r.Op1("ReduceProd", []*graph.Value{bs}, graph.IntAttr("keepdims", 0))
		rg := r.Op1("Range", []*graph.Value{r.ScalarInt(0), n, r.ScalarInt(1)})
		pos = r.Op1("Reshape", []*graph.Value{rg, bs})
	} else {
		s := r.Op1("Reshape", []*graph.Value{r.DimOf(t.in, int64(ev.Axis)), r.Ints([]int64{0})})
		rg := r.Op1("Range", []*graph.Value{r.ScalarInt(0), s, r.ScalarInt(1)})
		pos = r.Op1("Expand", []*graph.Value{r.Op1("Reshape", []*graph.Value{rg, r.VecInt(1, -1)}), bs})
	}
	rewrite.Typed(pos, graph.Int64, 2)
	r.Memo[key+"|cos"], r.Memo[key+"|sin"], r.Memo[key+"|pos"] = cosV, sinV, pos
	return cosV, sinV, pos, nil
}
