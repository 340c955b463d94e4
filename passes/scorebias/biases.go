package scorebias

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
	"math"
	"slices"
)

// BiasView reads an evaluated attention bias (or a [.., query, key]
// value) as [head][query][key]: the last three axes, axes of size 1
// broadcast, leading axes (the batch) at index 0. The detectors read
// biases with it and codegen its golden vectors.
type BiasView struct {
	h, Q, K int
	v       []float64
}

// Dims are the heads, queries and keys of the view.
func (b BiasView) Dims() (heads, queries, keys int) { return b.h, b.Q, b.K }

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
	return BiasView{h: dims[0], Q: dims[1], K: dims[2], v: t.Float64s()[:dims[0]*dims[1]*dims[2]]}, true
}

// At is the entry of head h, query i, key j.
func (b BiasView) At(h, i, j int) float64 {
	if b.h == 1 {
		h = 0
	}
	if b.Q == 1 {
		i = 0
	}
	return b.v[(h*b.Q+i)*b.K+j]
}

// Masked reports whether a bias entry masks its key out (the model's
// causal or padding mask added to the same value): below -1e4, infinite
// or NaN.
func Masked(x float64) bool { return x < -1e4 || math.IsInf(x, 0) || math.IsNaN(x) }

// Bias is a value added to a block's scores that does not depend on the
// tokens' content and does more than mask, evaluated on a probe as
// [head, query, key], with what its values show: the slope per head of a
// bias linear in the key position (ALiBi claims those), or that it is a
// function of key - query (T5 claims those that gather a bucket table).
type Bias struct {
	Block *attn.Block
	Term  attn.BiasTerm
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
var ScoreBias = &passes.Pass[[]*Bias]{
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
	Requires: []passes.Analyzer{work.Normalize, attn.Blocks},
	Run:      runScoreBias,
}

func runScoreBias(c *passes.Context) ([]*Bias, error) {
	w := work.Of(c)
	blocks := passes.Result(c, attn.Blocks)
	// Blocks reading each bias value (T5 shares it).
	readers := map[*graph.Value][]int{}
	for _, b := range blocks {
		for _, bt := range b.Bias {
			readers[bt.Value] = append(readers[bt.Value], b.Index)
		}
	}
	var out []*Bias
	// One probe for every bias: layers sharing a mask compute it once.
	p := probe.NewProbe(w, 1, 16, 0)
	for _, b := range blocks {
		for _, bt := range b.Bias {
			if bias := evalBias(w, c, p, b, bt, readers); bias != nil {
				out = append(out, bias)
			}
		}
	}
	return append(out, fusedBiases(w, c, blocks)...), nil
}

// Sharers are the blocks whose bias reads v in its cone: the layers that
// share a bias table, also where each adds its own masks to the bias
// before its scores (a rewrite fused into attention ops does).
func Sharers(c *passes.Context, v *graph.Value) []int {
	var out []int
	for _, b := range passes.Result(c, ScoreBias) {
		for _, n := range b.Cone {
			if slices.Contains(n.Inputs(), v) {
				out = append(out, b.Block.Index)
				break
			}
		}
	}
	return passes.SortedUnique(out)
}

// claimBiases turns the biases claim accepts into findings: those added to
// the scores or given to a fused op first (merged when their params and
// fused are the same), then those of
// score_mod graphs and gates (merged when their notes are the same too),
// then the findings of fused ops (fused, in their order).
func ClaimBiases(c *passes.Context, claim func(b *Bias) *passes.Finding, fused []*passes.Finding) []*passes.Finding {
	w := work.Of(c)
	var out, flex, gated []*passes.Finding
	alike := func(g, f *passes.Finding) bool { return g.Fused == f.Fused && slices.Equal(g.Notes, f.Notes) }
	for _, b := range passes.Result(c, ScoreBias) {
		f := claim(b)
		switch {
		case f == nil:
		case b.ScoreMod != nil:
			f.Fused = true
			f.Nodes = w.OrigNames([]*graph.Node{b.ScoreMod})
			f.Notes = append(f.Notes, "the bias is added by the score_mod graph of "+work.OpName(b.ScoreMod))
			flex = append(flex, f)
		case b.Gate != nil:
			f.Notes = append(f.Notes, fmt.Sprintf("the bias is gated per token by the query (%s)", work.OpName(b.Gate)))
			f.Nodes = w.SortOrig(append(f.Nodes, w.OrigNames([]*graph.Node{b.Gate})...))
			gated = append(gated, f)
		default:
			// A bias given to a fused attention op as its bias or mask
			// input is applied by the op: fused, though the graph still
			// computes it (a rewrite with --attention fused writes it so).
			f.Fused = b.Term.Add == nil && b.Block.Fused != nil
			out = w.MergeFinding(out, f, func(g, f *passes.Finding) bool { return g.Fused == f.Fused })
		}
	}
	// The findings of fused ops in the order the fused detector found
	// them: the score_mod biases, the fused ops, then the gated biases.
	var merged []*passes.Finding
	for _, f := range slices.Concat(flex, fused, gated) {
		if f.Layers == nil {
			f.Layers = []int{}
		}
		merged = w.MergeFinding(merged, f, alike)
	}
	return append(out, merged...)
}

func evalBias(w *work.Work, c *passes.Context, p *probe.Probe, b *attn.Block, bt attn.BiasTerm, readers map[*graph.Value][]int) *Bias {
	at := w.OrigName(bt.Add)
	if bt.Add == nil {
		at = w.OrigName(b.Node()) // a bias input of a fused attention op
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
	return readBias(w, c, b, bt, t, w.Cone(bt.Value), readers, at)
}

// readBias reads an evaluated bias t added to b's scores (heads, query and
// key on its last three axes): what its values are a function of, or
// neither (a near-miss at at). cone are the nodes computing it.
func readBias(w *work.Work, c *passes.Context, b *attn.Block, bt attn.BiasTerm, t *kernels.Tensor, cone []*graph.Node, readers map[*graph.Value][]int, at string) *Bias {
	bv, ok := NewBiasView(t)
	if !ok || bv.K < 3 {
		return nil
	}
	heads := scoreHeads(w, b, bv.h)
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
	if slopes, sym, ok := alibiSlopes(bv, max(heads, bv.h), eps); ok {
		bias.Slopes, bias.Symmetric = perHead(slopes, heads), sym
		return bias
	}
	if bias.Toeplitz = toeplitz(bv); !bias.Toeplitz {
		c.Miss("score_bias", at, "the bias is neither linear in the key position (ALiBi) nor a function of key - query (relative)", 2)
		return nil
	}
	return bias
}

// perHead is the slopes of the first heads rows when the bias's rows are
// [batch·heads] (BLOOM's layout; the batch a pinned shape fixes) and
// every batch repeats them; else slopes as they are.
func perHead(slopes []float64, heads int) []float64 {
	if heads < 1 || len(slopes) <= heads || len(slopes)%heads != 0 {
		return slopes
	}
	for r, s := range slopes[heads:] {
		if m := slopes[r%heads]; math.Abs(s-m) > 1e-5*math.Max(1e-12, math.Abs(m)) {
			return slopes
		}
	}
	return slopes[:heads]
}

// scoreHeads is the number of heads of a block's scores: the block's own
// when its scores say it and the bias's head axis is a multiple of it
// (batch·heads), else the bias's own head axis when it has one.
func scoreHeads(w *work.Work, b *attn.Block, biasHeads int) int {
	h := blockHeads(w, b)
	switch {
	case biasHeads > 1 && h > 0 && biasHeads%h == 0:
		return h
	case biasHeads > 1 || h == 0:
		return biasHeads
	}
	return h
}

// blockHeads is the number of heads of a block's scores, 0 when its
// shapes do not say: a fused op's query or attribute, or the head axis of
// the 4-D scores (at the product or at the Softmax, where a [batch·heads,
// q, k] product is viewed as [batch, heads, q, k]).
func blockHeads(w *work.Work, b *attn.Block) int {
	if b.Fused != nil && b.Q != nil {
		// A fused op's heads: its 4-D query's, or the attribute's.
		if s := w.Shape(b.Q); s.Rank() == 4 && s.Dims[1].Known() {
			return int(s.Dims[1])
		}
		if spec, ok := work.FusedSpecs[work.OpKey(b.Fused)]; ok && spec.Heads != "" {
			if h := b.Fused.AttrInt(spec.Heads, 0); h > 0 {
				return int(h)
			}
		}
	}
	for _, v := range []*graph.Value{qkOut(b), smIn(b)} {
		if v == nil {
			continue
		}
		if s := w.Shape(v); s.Rank() == 4 && s.Dims[1].Known() {
			return int(s.Dims[1])
		}
	}
	return 0
}

func qkOut(b *attn.Block) *graph.Value {
	if b.QK == nil {
		return nil
	}
	return b.QK.Output(0)
}

func smIn(b *attn.Block) *graph.Value {
	if b.Softmax == nil {
		return nil
	}
	return b.Softmax.Input(0)
}

// alibiSlopes checks that every row of every head is linear in the key
// position over its unmasked entries, with one slope per head (causal
// ALiBi), or falls by the same slope on both sides of the diagonal
// (symmetric ALiBi, -m·|i-j|); eps is the relative rounding of the bias's
// type.
func alibiSlopes(bv BiasView, heads int, eps float64) ([]float64, bool, bool) {
	for _, sym := range []bool{false, true} {
		if sym && bv.Q < 2 {
			break
		}
		slopes := make([]float64, heads)
		ok, nonzero := true, false
		for h := 0; h < heads && ok; h++ {
			slope := math.NaN()
			for i := 0; i < bv.Q && ok; i++ {
				for j := 0; j+1 < bv.K; j++ {
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
	if bv.Q < 2 {
		return false
	}
	varies := false
	for h := 0; h < bv.h; h++ {
		for i := 0; i+1 < bv.Q; i++ {
			for j := 0; j+1 < bv.K; j++ {
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

// positionTableAxis is positionTable with the size of the axis that a
// Slice or Gather reads directly from the constant.
func PositionTableAxis(w *work.Work, cone []*graph.Node) (*graph.Value, int) {
	for _, n := range cone {
		v := n.Input(0)
		if v == nil || !w.IsConst(v) || !work.IsFloatType(v.Const.DataType()) || v.Const.Len() < 2 {
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
				axes, ok = w.IntsOf(ax)
			}
			if dynamic && ok && len(axes) == 1 {
				return v, int(dims[work.NormAxis(axes[0], len(dims))])
			}
		case "Gather":
			if !w.IsConst(n.Input(1)) {
				return v, int(dims[work.NormAxis(n.AttrInt("axis", 0), len(dims))])
			}
		}
	}
	return probe.PositionTable(w, cone)
}
