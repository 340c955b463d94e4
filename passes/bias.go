package passes

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// BiasView reads an evaluated attention bias (or a [.., query, key]
// value) as [head][query][key]: the last three axes, axes of size 1
// broadcast, leading axes (the batch) at index 0. The detectors read
// biases with it and codegen its golden vectors.
type BiasView struct {
	h, q, k int
	v       []float64
}

// Dims are the heads, queries and keys of the view.
func (b BiasView) Dims() (heads, queries, keys int) { return b.h, b.q, b.k }

// NewBiasView views t; false for a scalar.
func NewBiasView(t *kernels.Tensor) (BiasView, bool) {
	r := t.Rank()
	if r < 1 {
		return BiasView{}, false
	}
	dims := []int{1, 1, 1}
	for i := 0; i < min(3, r); i++ {
		dims[2-i] = t.Shape[r-1-i]
	}
	// Leading axes beyond three (the batch) are read at index 0.
	return BiasView{h: dims[0], q: dims[1], k: dims[2], v: t.Float64s()[:dims[0]*dims[1]*dims[2]]}, true
}

// At is the entry of head h, query i, key j.
func (b BiasView) At(h, i, j int) float64 {
	if b.h == 1 {
		h = 0
	}
	if b.q == 1 {
		i = 0
	}
	return b.v[(h*b.q+i)*b.k+j]
}

// Masked reports whether a bias entry masks its key out (the model's
// causal or padding mask added to the same value): below -1e4, infinite
// or NaN.
func Masked(x float64) bool { return x < -1e4 || math.IsInf(x, 0) || math.IsNaN(x) }

// ALiBiEvidence is what the ALiBi detector read.
type ALiBiEvidence struct {
	// Bias is the original value added to the scores.
	Bias string
	// Slopes are the measured slopes (bias per key position), per head.
	Slopes []float64
	// SlopesConst names the constant holding the slopes, when there is one.
	SlopesConst string
}

// T5Evidence is what the T5 detector read.
type T5Evidence struct {
	// Bias is the original value added to the scores; Table the bias table
	// [num_buckets, heads]; Buckets the bucket value; Distance the matrix
	// of relative positions the buckets are computed from ("" when no
	// node of the cone is one position vector minus another).
	Bias, Table, Buckets, Distance string
	// BucketMap is the bucket of every relative position key - query from
	// -MaxRel to MaxRel (index n + MaxRel).
	BucketMap []int
	MaxRel    int
	// MaxDistances are all max_distance values reproducing the map.
	MaxDistances []int
	// Weights are the table's values, [num_buckets][heads].
	Weights [][]float64
	// LogRatio is the constant the bucket function divides the log of
	// large distances by (log(max_distance / max_exact), in the graph's
	// float type), and LogRatioFrom the value holding it; "" when no
	// constant of the cone is one.
	LogRatio     float64
	LogRatioFrom string
}

// Bias is a value added to a block's scores that does not depend on the
// tokens' content and does more than mask, evaluated on a probe as
// [head, query, key], with what its values show: the slope per head of a
// bias linear in the key position (ALiBi claims those), or that it is a
// function of key - query (T5 claims those that gather a bucket table).
type Bias struct {
	Block *Block
	Term  BiasTerm
	// View is the evaluated bias; Cone the nodes computing it; Readers the
	// blocks reading each bias value (T5 shares one); At where a near-miss
	// is reported.
	View    BiasView
	Cone    []*graph.Node
	Readers map[*graph.Value][]int
	At      string
	// Eps is the relative rounding of the bias's element type.
	Eps float64
	// Slopes (one per head) when the bias is linear in the key position,
	// falling on both sides of the diagonal when Symmetric; Toeplitz when
	// it is a function of key - query.
	Slopes    []float64
	Symmetric bool
	Toeplitz  bool
	// ScoreMod is the FlexAttention op whose score_mod graph adds the bias;
	// Gate the GatedRelativePositionBias gating a bias computed in the
	// graph. Both nil for a value added to the scores.
	ScoreMod, Gate *graph.Node
}

// ScoreBias evaluates the position biases added to the attention scores.
var ScoreBias = &Pass{
	Name: "score_bias",
	Doc: `Evaluate the biases added to the attention scores that do not depend on content.

Each value added to a block's scores that does not depend on content is
evaluated on probe positions as [head, query, key]. Entries of -inf or
the type's minimum are masking and left out; a bias of zeros is only a
mask. The values say what the bias is a function of: linear in the key
position with a slope per head (the alibi pass claims those), or of
key - query (the t5 pass claims those that gather a bucket table). The
bias FlexAttention's score_mod graph adds (evaluated on zero scores) and
a bias a GatedRelativePositionBias gates are read the same way.`,
	Requires: []*Pass{Normalize, Blocks},
	Run:      runScoreBias,
}

func runScoreBias(c *Context) (any, error) {
	w := c.Work()
	blocks := c.ResultOf[Blocks].([]*Block)
	// Blocks reading each bias value (T5 shares it).
	readers := map[*graph.Value][]int{}
	for _, b := range blocks {
		for _, bt := range b.Bias {
			readers[bt.Value] = append(readers[bt.Value], b.Index)
		}
	}
	var out []*Bias
	// One probe for every bias: layers sharing a mask compute it once.
	p := w.NewProbe(1, 16, 0)
	for _, b := range blocks {
		for _, bt := range b.Bias {
			if bias := w.evalBias(c, p, b, bt, readers); bias != nil {
				out = append(out, bias)
			}
		}
	}
	return append(out, w.fusedBiases(c, blocks)...), nil
}

// claimBiases turns the biases claim accepts into findings: those added to
// the scores first (merged when their params are the same), then those of
// score_mod graphs and gates (merged when their notes are the same too),
// then the findings of fused ops (fused, in their order).
func claimBiases(c *Context, claim func(b *Bias) *Finding, fused []*Finding) []*Finding {
	w := c.Work()
	var out, flex, gated []*Finding
	alike := func(g, f *Finding) bool { return g.Fused == f.Fused && slices.Equal(g.Notes, f.Notes) }
	for _, b := range c.ResultOf[ScoreBias].([]*Bias) {
		f := claim(b)
		switch {
		case f == nil:
		case b.ScoreMod != nil:
			f.Fused = true
			f.Nodes = w.origNames([]*graph.Node{b.ScoreMod})
			f.Notes = append(f.Notes, "the bias is added by the score_mod graph of "+opName(b.ScoreMod))
			flex = append(flex, f)
		case b.Gate != nil:
			f.Notes = append(f.Notes, fmt.Sprintf("the bias is gated per token by the query (%s)", opName(b.Gate)))
			f.Nodes = w.sortOrig(append(f.Nodes, w.origNames([]*graph.Node{b.Gate})...))
			gated = append(gated, f)
		default:
			out = w.mergeFinding(out, f, nil)
		}
	}
	// The findings of fused ops in the order the fused detector found
	// them: the score_mod biases, the fused ops, then the gated biases.
	var merged []*Finding
	for _, f := range slices.Concat(flex, fused, gated) {
		if f.Layers == nil {
			f.Layers = []int{}
		}
		merged = w.mergeFinding(merged, f, alike)
	}
	return append(out, merged...)
}

func (w *Work) evalBias(c *Context, p *Probe, b *Block, bt BiasTerm, readers map[*graph.Value][]int) *Bias {
	at := w.OrigName(bt.Add)
	if bt.Add == nil {
		at = w.OrigName(b.node()) // a bias input of a fused attention op
	}
	t, err := p.Value(bt.Value)
	if err != nil {
		c.Miss("score_bias", at, "the bias could not be evaluated: "+err.Error(), 0)
		return nil
	}
	if p.Synthetic(bt.Value) {
		c.Miss("score_bias", at, "the bias comes from parameters given as inputs", 0)
		return nil
	}
	return w.readBias(c, b, bt, t, w.cone(bt.Value), readers, at)
}

// readBias reads an evaluated bias t added to b's scores (heads, query and
// key on its last three axes): what its values are a function of, or
// neither (a near-miss at at). cone are the nodes computing it.
func (w *Work) readBias(c *Context, b *Block, bt BiasTerm, t *kernels.Tensor, cone []*graph.Node, readers map[*graph.Value][]int, at string) *Bias {
	bv, ok := NewBiasView(t)
	if !ok || bv.k < 3 {
		return nil
	}
	heads := w.scoreHeads(b, bv.h)
	zero := true
	for _, x := range bv.v {
		if !Masked(x) && x != 0 {
			zero = false
		}
	}
	if zero {
		c.Miss("score_bias", at, "the bias only masks (zeros and -inf)", 1)
		return nil
	}
	eps := 1e-7
	switch t.DType {
	case graph.Float16:
		eps = 1.0 / 1024
	case graph.BFloat16:
		eps = 1.0 / 128
	}
	bias := &Bias{Block: b, Term: bt, View: bv, Cone: cone, Readers: readers, At: at, Eps: eps}
	if slopes, sym, ok := alibiSlopes(bv, heads, eps); ok {
		bias.Slopes, bias.Symmetric = slopes, sym
		return bias
	}
	if bias.Toeplitz = toeplitz(bv); !bias.Toeplitz {
		c.Miss("score_bias", at, "the bias is neither linear in the key position (ALiBi) nor a function of key - query (relative)", 2)
		return nil
	}
	return bias
}

// scoreHeads is the number of heads of a block's scores (the bias's own
// head axis when it has one).
func (w *Work) scoreHeads(b *Block, biasHeads int) int {
	if biasHeads > 1 {
		return biasHeads
	}
	if b.Fused != nil && b.Q != nil {
		// A fused op's heads: its 4-D query's, or the attribute's.
		if s := w.Shape(b.Q); s.Rank() == 4 && s.Dims[1].Known() {
			return int(s.Dims[1])
		}
		if spec, ok := FusedSpecs[opKey(b.Fused)]; ok && spec.Heads != "" {
			if h := b.Fused.AttrInt(spec.Heads, 0); h > 0 {
				return int(h)
			}
		}
	}
	if b.QK != nil {
		s := w.Shape(b.QK.Output(0))
		if s.Rank() == 4 && s.Dims[1].Known() {
			return int(s.Dims[1])
		}
	}
	return biasHeads
}

// alibiSlopes checks that every row of every head is linear in the key
// position over its unmasked entries, with one slope per head (causal
// ALiBi), or falls by the same slope on both sides of the diagonal
// (symmetric ALiBi, -m·|i-j|); eps is the relative rounding of the bias's
// type.
func alibiSlopes(bv BiasView, heads int, eps float64) ([]float64, bool, bool) {
	for _, sym := range []bool{false, true} {
		if sym && bv.q < 2 {
			break
		}
		slopes := make([]float64, heads)
		ok, nonzero := true, false
		for h := 0; h < heads && ok; h++ {
			slope := math.NaN()
			for i := 0; i < bv.q && ok; i++ {
				for j := 0; j+1 < bv.k; j++ {
					a, c := bv.At(h, i, j), bv.At(h, i, j+1)
					if Masked(a) || Masked(c) {
						continue
					}
					d := c - a
					if sym && j >= i {
						d = -d // beyond the diagonal the bias falls
					}
					switch {
					case math.IsNaN(slope):
						slope = d
					case math.Abs(d-slope) > 1e-5*math.Max(1, math.Abs(slope))+2*eps*math.Max(math.Abs(a), math.Abs(c)):
						ok = false
					}
				}
			}
			if math.IsNaN(slope) {
				ok = false
			}
			slopes[h] = slope
			if slope != 0 {
				nonzero = true
			}
		}
		if ok && nonzero {
			return slopes, sym, true
		}
	}
	return nil, false, false
}

// toeplitz reports whether the bias depends only on key - query.
func toeplitz(bv BiasView) bool {
	if bv.q < 2 {
		return false
	}
	varies := false
	for h := 0; h < bv.h; h++ {
		for i := 0; i+1 < bv.q; i++ {
			for j := 0; j+1 < bv.k; j++ {
				a, c := bv.At(h, i, j), bv.At(h, i+1, j+1)
				if Masked(a) || Masked(c) {
					continue
				}
				if math.Abs(a-c) > 1e-6*math.Max(1, math.Abs(a)) {
					return false
				}
				if !Masked(bv.At(h, i, j+1)) && bv.At(h, i, j+1) != a {
					varies = true
				}
			}
		}
	}
	return varies
}

func (w *Work) alibiFinding(b *Block, bt BiasTerm, bv BiasView, slopes []float64, sym bool, cone []*graph.Node, eps float64) *Finding {
	ev := &ALiBiEvidence{Bias: w.OrigValue(bt.Value), Slopes: slopes}
	params := &ALiBiParams{NumHeads: len(slopes), Slopes: slopes}
	var notes []string
	// Exact slopes from a constant holding them.
	if cv, vals := w.slopeConst(cone, slopes, eps); cv != nil {
		params.Slopes = vals
		ev.SlopesConst = w.name(cv)
	}
	params.Symmetric = sym
	usesCumSum := false
	for _, n := range cone {
		if n.OpType == "CumSum" {
			usesCumSum = true
		}
	}
	lastZero, firstZero, diagZero := true, true, bv.q > 1
	for h := range slopes {
		for i := 0; i < bv.q; i++ {
			if x := bv.At(h, i, bv.k-1); !Masked(x) && x != 0 {
				lastZero = false
			}
			if x := bv.At(h, i, 0); !Masked(x) && x != 0 {
				firstZero = false
			}
			if i < bv.k {
				if x := bv.At(h, i, i); Masked(x) || x != 0 {
					diagZero = false
				}
			}
		}
	}
	switch {
	case usesCumSum:
		params.Positions = "attention_mask_cumsum"
	case diagZero:
		params.Positions = "relative"
	case lastZero:
		params.Positions = "key_offset_from_end"
	case firstZero:
		params.Positions = "key_index"
	default:
		params.Positions = "relative"
		notes = append(notes, "positions: the bias is zero at neither the first key, the last key nor the diagonal")
	}
	if tv, rows := w.positionTableAxis(cone); tv != nil {
		params.MaxPositions = ptr(rows)
	}
	if bm, ok := alibiBiasMax(params.Slopes); ok {
		params.AlibiBiasMax = ptr(bm)
	}
	f := &Finding{Scheme: ALiBi, Layers: []int{b.Index}, Params: params, Notes: notes, Evidence: ev}
	for _, n := range cone {
		if opKey(n) == "ai.onnxpe.ALiBiBias" {
			f.Fused = true // onnxpe's fused ALiBi op computes the bias
		}
	}
	f.Nodes = w.origNames(append([]*graph.Node{bt.Add}, cone...))
	return f
}

// slopeConst finds a constant of the cone holding the slopes (one value
// per head, within float32 rounding) and returns its values.
func (w *Work) slopeConst(cone []*graph.Node, slopes []float64, eps float64) (*graph.Value, []float64) {
	for _, n := range cone {
		for _, in := range n.Inputs() {
			if in == nil || in.Const == nil || in.Const.Len() != int64(len(slopes)) {
				continue
			}
			t := w.Const(in)
			if t == nil || t.Len() != len(slopes) || !isFloatType(t.DType) {
				continue
			}
			v := t.Float64s()
			ok := true
			for i := range v {
				if math.Abs(v[i]-slopes[i]) > (1e-6+2*eps)*math.Abs(slopes[i])+1e-12 {
					ok = false
				}
			}
			if ok {
				return in, v
			}
		}
	}
	return nil, nil
}

// alibiBiasMax reads b from slopes 2^(-b·(h+1)/n): BLOOM's and MPT's rules
// for head counts that are not powers of two.
func alibiBiasMax(slopes []float64) (float64, bool) {
	n := len(slopes)
	if n == 0 || slopes[0] <= 0 {
		return 0, false
	}
	cp := 1
	for cp*2 <= n {
		cp *= 2
	}
	match := func(want []float64) bool {
		for i := range want {
			if math.Abs(want[i]-slopes[i]) > 1e-6*want[i] {
				return false
			}
		}
		return true
	}
	for _, np := range []int{cp, 2 * cp} {
		b := math.Round(-math.Log2(slopes[0]) * float64(np))
		if b <= 0 {
			continue
		}
		// BLOOM: the closest power of two, then odd powers of the finer base.
		bloom := make([]float64, 0, n)
		for i := 1; i <= cp; i++ {
			bloom = append(bloom, math.Pow(2, -b*float64(i)/float64(cp)))
		}
		for i := 0; len(bloom) < n; i++ {
			bloom = append(bloom, math.Pow(2, -b*float64(2*i+1)/float64(2*cp)))
		}
		if np == cp && match(bloom) {
			return b, true
		}
		// MPT: n' = the next power of two, odd ones first when n' != n.
		np2 := 1
		for np2 < n {
			np2 *= 2
		}
		all := make([]float64, np2)
		for i := range all {
			all[i] = math.Pow(2, -b*float64(i+1)/float64(np2))
		}
		mpt := all
		if np2 != n {
			mpt = nil
			for i := 1; i < np2; i += 2 {
				mpt = append(mpt, all[i])
			}
			for i := 0; i < np2; i += 2 {
				mpt = append(mpt, all[i])
			}
			mpt = mpt[:n]
		}
		if match(mpt) {
			return b, true
		}
	}
	return 0, false
}

// positionTableAxis is positionTable with the size of the axis that a
// Slice or Gather reads directly from the constant.
func (w *Work) positionTableAxis(cone []*graph.Node) (*graph.Value, int) {
	for _, n := range cone {
		v := n.Input(0)
		if v == nil || !w.IsConst(v) || !isFloatType(v.Const.DataType()) || v.Const.Len() < 2 {
			continue
		}
		dims := v.Const.Dims()
		switch n.OpType {
		case "Slice":
			_, _, axes, _, ok := w.SliceParams(n)
			dynamic := false
			for _, in := range n.Inputs()[1:] {
				if in != nil && !w.IsConst(in) {
					dynamic = true
				}
			}
			if ax := n.Input(3); ax != nil {
				axes, ok = w.intsOf(ax)
			}
			if dynamic && ok && len(axes) == 1 {
				return v, int(dims[normAxis(axes[0], len(dims))])
			}
		case "Gather":
			if !w.IsConst(n.Input(1)) {
				return v, int(dims[normAxis(n.AttrInt("axis", 0), len(dims))])
			}
		}
	}
	return w.positionTable(cone)
}

// t5Finding reads a T5 bucket bias: the [buckets, heads] table gathered by
// a bucket index computed from positions.
func (w *Work) t5Finding(b *Block, bt BiasTerm, cone []*graph.Node, readers map[*graph.Value][]int) (*Finding, string) {
	var gather *graph.Node
	for _, n := range cone {
		if n.OpType == "Gather" && w.IsConst(n.Input(0)) && len(n.Input(0).Const.Dims()) == 2 && !w.IsConst(n.Input(1)) && isIntType(w.ElemType(n.Input(1))) {
			gather = n
		}
	}
	if gather == nil {
		return nil, "the relative bias does not gather a [buckets, heads] table by an index"
	}
	table := gather.Input(0)
	nb, heads := int(table.Const.Dims()[0]), int(table.Const.Dims()[1])
	const S = 512
	p := w.NewProbe(1, S, 0)
	t, err := p.Value(gather.Input(1))
	if err != nil {
		return nil, "the bucket index could not be evaluated: " + err.Error()
	}
	bv, ok := NewBiasView(t)
	if !ok || bv.q != S || bv.k < S {
		return nil, fmt.Sprintf("the bucket index is not [query, key] (%v)", t.Shape)
	}
	// With a KV cache given as input the keys are the cached ones and then
	// the new: query i is at position off + i (a decoder's
	// Range(past, past + S) against Range(0, past + S)). The map is read
	// over the new keys, at the same distances as without a cache.
	off := bv.k - S
	bm := make([]int, 2*S-1) // n + S-1
	for i := range bm {
		bm[i] = -1
	}
	for i := 0; i < S; i++ {
		for j := 0; j < S; j++ {
			x := int(bv.At(0, i, off+j))
			k := j - i + S - 1
			if bm[k] >= 0 && bm[k] != x {
				return nil, "the bucket index is not a function of key - query"
			}
			bm[k] = x
		}
	}
	bidir := bm[S] >= nb/2 // n = +1
	half := nb
	if bidir {
		half = nb / 2
	}
	maxExact := half / 2
	var mds []int
	for md := maxExact + 1; md <= 1<<14; md++ {
		if t5Reproduces(bm, S, nb, bidir, md) {
			mds = append(mds, md)
		}
	}
	if len(mds) == 0 {
		// A table with a row per relative position (onnxpe rewrite's
		// form, or any export that precomputed the bias): the buckets are
		// the groups of relative positions that read equal rows.
		if tb, tnb, tbidir, tmds, ok := w.t5FromRows(table, bm, S); ok {
			bm, nb, bidir, mds = tb, tnb, tbidir, tmds
		}
	}
	if len(mds) == 0 {
		return nil, "the bucket map is not T5's (no max_distance reproduces it)"
	}
	params := &T5Params{NumBuckets: nb, Bidirectional: bidir, NumHeads: heads, ScaledScores: b.Scaled}
	var notes []string
	switch {
	case len(mds) == 1:
		params.MaxDistance = ptr(mds[0])
	case mds[len(mds)-1] == 1<<14:
		notes = append(notes, fmt.Sprintf("max_distance: every value from %d on reproduces the buckets of distances below %d", mds[0], S))
	default:
		md := mds[0]
		for _, x := range mds {
			if x&(x-1) == 0 {
				md = x // a power of two, as configurations use
				break
			}
		}
		params.MaxDistance = ptr(md)
		notes = append(notes, fmt.Sprintf("max_distance: %d to %d give the same buckets for distances below %d; reported %d", mds[0], mds[len(mds)-1], S, md))
	}
	users := readers[bt.Value]
	params.SharedAcrossLayers = len(users) > 1
	ev := &T5Evidence{Bias: w.OrigValue(bt.Value), Table: w.name(table), Buckets: w.name(gather.Input(1)), BucketMap: bm, MaxRel: S - 1, MaxDistances: mds, Weights: w.tableValues(table)}
	if d := w.distanceIn(cone); d != nil {
		ev.Distance = w.name(d)
	}
	if params.MaxDistance != nil {
		ev.LogRatio, ev.LogRatioFrom = w.logRatio(cone, math.Log(float64(*params.MaxDistance)/float64(maxExact)))
	}
	f := &Finding{Scheme: T5RelativeBias, Layers: users, Params: params, Notes: notes, Evidence: ev}
	if !slices.Contains(f.Layers, b.Index) {
		f.Layers = append(f.Layers, b.Index)
	}
	f.Nodes = w.origNames(append([]*graph.Node{bt.Add}, cone...))
	return f, ""
}

// logRatio finds the scalar float constant of the cone that is want
// (within float32 rounding).
func (w *Work) logRatio(cone []*graph.Node, want float64) (float64, string) {
	for _, n := range cone {
		for _, in := range n.Inputs() {
			if in == nil || !w.IsConst(in) || !isFloatType(w.ElemType(in)) {
				continue
			}
			if t := w.Const(in); t != nil && t.Len() == 1 {
				if v := t.Float64s()[0]; math.Abs(v-want) <= 1e-6*want {
					return v, w.name(in)
				}
			}
		}
	}
	return 0, ""
}

// t5FromRows reads T5's buckets from a table gathered at a row per
// relative position: relative positions whose rows are equal share a
// bucket. It returns the bucket map in T5's numbering, the number of
// buckets, the direction and the max_distance values whose buckets group
// the relative positions the same way.
func (w *Work) t5FromRows(table *graph.Value, rowOf []int, S int) ([]int, int, bool, []int, bool) {
	t := w.Const(table)
	if t == nil || t.Rank() != 2 {
		return nil, 0, false, nil, false
	}
	width := t.Shape[1]
	vals := t.Float64s()
	group := make([]int, len(rowOf))
	ids := map[string]int{}
	for k, row := range rowOf {
		if row < 0 || (row+1)*width > len(vals) {
			return nil, 0, false, nil, false
		}
		key := fmt.Sprint(vals[row*width : (row+1)*width])
		id, ok := ids[key]
		if !ok {
			id = len(ids)
			ids[key] = id
		}
		group[k] = id
	}
	ng := len(ids)
	if ng < 2 || ng >= len(rowOf) {
		return nil, 0, false, nil, false
	}
	// The same partition: a bijection between groups and buckets.
	same := func(tb []int) bool {
		gb, bg := map[int]int{}, map[int]int{}
		for k, g := range group {
			b := tb[k]
			if x, ok := gb[g]; ok && x != b {
				return false
			}
			if x, ok := bg[b]; ok && x != g {
				return false
			}
			gb[g], bg[b] = b, g
		}
		return true
	}
	// Bidirectional maps never reach the first bucket of the positive
	// side (relative position +0): there is one bucket more than groups.
	for _, c := range []struct {
		bidir bool
		nb    int
	}{{true, ng + 1}, {true, ng}, {false, ng}} {
		if c.bidir && c.nb%2 != 0 {
			continue
		}
		half := c.nb
		if c.bidir {
			half = c.nb / 2
		}
		var mds []int
		var first []int
		for md := half/2 + 1; md <= 1<<14; md++ {
			tb := t5Map(S, c.nb, c.bidir, md)
			if same(tb) {
				if first == nil {
					first = tb
				}
				mds = append(mds, md)
			}
		}
		if len(mds) > 0 {
			return first, c.nb, c.bidir, mds, true
		}
	}
	return nil, 0, false, nil, false
}

// t5Map is Hugging Face's _relative_position_bucket of every relative
// position -(S-1)..S-1 (index n + S-1), in float32 as PyTorch computes it.
func t5Map(S, nb int, bidir bool, md int) []int {
	out := make([]int, 2*S-1)
	for k := range out {
		out[k] = t5BucketOf(k-(S-1), nb, md, bidir)
	}
	return out
}

// t5Reproduces evaluates Hugging Face's _relative_position_bucket (in
// float32, as PyTorch does) for every relative position of the map.
func t5Reproduces(bm []int, S, nb int, bidir bool, md int) bool {
	for k, want := range bm {
		if t5BucketOf(k-(S-1), nb, md, bidir) != want {
			return false
		}
	}
	return true
}
