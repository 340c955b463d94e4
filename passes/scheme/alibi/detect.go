package alibi

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/scorebias"
	"github.com/onnxpe/onnxpe/passes/work"
	"math"
)

// ALiBiPass finds ALiBi biases added to the attention scores.
var Detect = &passes.Pass[[]*passes.Finding]{
	Name: "alibi",
	Doc: `Find ALiBi: a score bias linear in the key position, with a slope per head.

A bias of the scores (the score_bias pass) linear in the key position with
one slope per head, or falling by it on both sides of the diagonal
(symmetric), is ALiBi: the slopes read exactly from a constant of the
cone when there is one, the positions from the mask's cumulative sum,
the key index, the offset from the last key, or the distance; the
published slope rules give alibi_bias_max.`,
	Requires: []passes.Analyzer{work.Normalize, scorebias.ScoreBias},
	Run: func(c *passes.Context) ([]*passes.Finding, error) {
		w := work.Of(c)
		return scorebias.ClaimBiases(c, func(b *scorebias.Bias) *passes.Finding {
			if b.Slopes == nil {
				return nil
			}
			return alibiFinding(w, b.Block, b.Term, b.View, b.Slopes, b.Symmetric, b.Cone, b.Eps)
		}, nil), nil
	},
}

// ALiBiEvidence is what the ALiBi detector read.
type Evidence struct {
	// Bias is the original value added to the scores.
	Bias string
	// Slopes are the measured slopes (bias per key position), per head.
	Slopes []float64
	// SlopesConst names the constant holding the slopes, when there is one.
	SlopesConst string
}

func alibiFinding(w *work.Work, b *attn.Block, bt attn.BiasTerm, bv scorebias.BiasView, slopes []float64, sym bool, cone []*graph.Node, eps float64) *passes.Finding {
	ev := &Evidence{Bias: w.OrigValue(bt.Value), Slopes: slopes}
	params := &Params{NumHeads: len(slopes), Slopes: slopes}
	var notes []string
	// Exact slopes from a constant holding them.
	if cv, vals := slopeConst(w, cone, slopes, eps); cv != nil {
		params.Slopes = vals
		ev.SlopesConst = w.Name(cv)
	}
	params.Symmetric = sym
	usesCumSum := false
	for _, n := range cone {
		if n.OpType == "CumSum" {
			usesCumSum = true
		}
	}
	lastZero, firstZero, diagZero := true, true, bv.Q > 1
	for h := range slopes {
		for i := 0; i < bv.Q; i++ {
			if x := bv.At(h, i, bv.K-1); !scorebias.Masked(x) && x != 0 {
				lastZero = false
			}
			if x := bv.At(h, i, 0); !scorebias.Masked(x) && x != 0 {
				firstZero = false
			}
			if i < bv.K {
				if x := bv.At(h, i, i); scorebias.Masked(x) || x != 0 {
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
	if tv, rows := scorebias.PositionTableAxis(w, cone); tv != nil {
		params.MaxPositions = passes.Ptr(rows)
	}
	if bm, ok := alibiBiasMax(params.Slopes); ok {
		params.AlibiBiasMax = passes.Ptr(bm)
	}
	f := &passes.Finding{Scheme: Name, Layers: []int{b.Index}, Params: params, Notes: notes, Evidence: ev}
	for _, n := range cone {
		if work.OpKey(n) == "ai.onnxpe.ALiBiBias" {
			f.Fused = true // onnxpe's fused ALiBi op computes the bias
		}
	}
	f.Nodes = w.OrigNames(append([]*graph.Node{bt.Add}, cone...))
	return f
}

// slopeConst finds a constant of the cone holding the slopes (one value
// per head, within float32 rounding) and returns its values.
func slopeConst(w *work.Work, cone []*graph.Node, slopes []float64, eps float64) (*graph.Value, []float64) {
	for _, n := range cone {
		for _, in := range n.Inputs() {
			if in == nil || in.Const == nil || in.Const.Len() != int64(len(slopes)) {
				continue
			}
			t := w.Const(in)
			if t == nil || t.Len() != len(slopes) || !work.IsFloatType(t.DType) {
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
