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
)

// biasInputs are the values a block adds to its scores: the bias terms of
// an unfused block, the attention-bias inputs of a fused op (also one that
// depends on the query, such as a gated bias).
func BiasInputs(b *attn.Block) []*graph.Value {
	var out []*graph.Value
	if b.Fused == nil {
		for _, bt := range b.Bias {
			out = append(out, bt.Value)
		}
		return out
	}
	spec := work.FusedSpecs[work.OpKey(b.Fused)]
	for _, i := range spec.Bias {
		if i < len(b.Fused.Inputs()) && b.Fused.Input(i) != nil {
			out = append(out, b.Fused.Input(i))
		}
	}
	return out
}

// fusedBiases are the biases fused attention ops add without a bias term
// of the graph: FlexAttention's score_mod, and a GatedRelativePositionBias
// over a bias the graph computes.
func fusedBiases(w *work.Work, c *passes.Context, blocks []*attn.Block) []*Bias {
	var flex, gates []*Bias
	for _, b := range blocks {
		seen := map[*graph.Node]bool{}
		for _, v := range BiasInputs(b) {
			for _, n := range work.ProducersUpTo(v, 64) {
				if work.OpKey(n) != "com.microsoft.GatedRelativePositionBias" || seen[n] {
					continue
				}
				seen[n] = true
				if gatesFusedBias(w, n) {
					continue
				}
				// A gate over a bias computed in the graph: read that bias
				// as an unfused one.
				rel := n.Input(2)
				if bias := evalBias(w, c, probe.NewProbe(w, 1, 16, 0), b, attn.BiasTerm{Value: rel}, map[*graph.Value][]int{rel: {b.Index}}); bias != nil {
					bias.Gate = n
					gates = append(gates, bias)
				}
			}
		}
		if b.Fused != nil && work.OpKey(b.Fused) == "ai.onnx.preview.FlexAttention" {
			if bias := flexScoreMod(w, c, b); bias != nil {
				flex = append(flex, bias)
			}
		}
	}
	return append(flex, gates...)
}

// gatesFusedBias reports whether a GatedRelativePositionBias gates the
// output of a RelativePositionBias.
func gatesFusedBias(w *work.Work, gate *graph.Node) bool {
	for _, m := range work.ProducersUpTo(gate.Input(2), 64) {
		if work.OpKey(m) == "com.microsoft.RelativePositionBias" {
			return true
		}
	}
	return false
}

// flexScoreMod reads the score_mod graph of FlexAttention as a bias: the
// graph evaluated on zero scores gives the bias it adds, when it adds one
// (the same graph on scores of one must give the bias plus one).
func flexScoreMod(w *work.Work, c *passes.Context, b *attn.Block) *Bias {
	n := b.Fused
	at := w.OrigName(n)
	a := n.Attr("score_mod")
	if a == nil || a.Graph == nil {
		return nil
	}
	g := a.Graph
	if len(g.Inputs) != 1 || len(g.Outputs) != 1 {
		c.Miss("fused", at, fmt.Sprintf("score_mod takes %d inputs (the one-input form, the scores, is read)", len(g.Inputs)), 0)
		return nil
	}
	scores, out := g.Inputs[0], g.Outputs[0]
	p := probe.NewProbe(w, 1, 16, 0)
	shape, ok := p.BindShape(w.Shape(scores))
	if !ok || len(shape) != 4 {
		c.Miss("fused", at, "the shape of the scores score_mod reads is not known", 0)
		return nil
	}
	size := 1
	for _, d := range shape {
		size *= d
	}
	eval := func(x float64) (*kernels.Tensor, error) {
		v := make([]float64, size)
		for i := range v {
			v[i] = x
		}
		t := probe.FromFloat64Any(w.ElemType(scores), shape, v)
		if t == nil {
			return nil, fmt.Errorf("scores of element type %v cannot be probed", w.ElemType(scores))
		}
		p.SetCuts(map[*graph.Value]*kernels.Tensor{scores: t})
		return p.Value(out)
	}
	t0, err := eval(0)
	if err != nil {
		c.Miss("fused", at, "score_mod could not be evaluated: "+err.Error(), 1)
		return nil
	}
	t1, err := eval(1)
	if err != nil || t1.Len() != t0.Len() {
		c.Miss("fused", at, "score_mod could not be evaluated on scores of one", 1)
		return nil
	}
	v0, v1 := t0.Float64s(), t1.Float64s()
	for i := range v0 {
		if Masked(v0[i]) {
			continue
		}
		if math.Abs(v1[i]-v0[i]-1) > 1e-4 {
			c.Miss("fused", at, "score_mod does not add a bias to the scores (it changes them otherwise)", 2)
			return nil
		}
	}
	bias := readBias(w, c, b, attn.BiasTerm{Value: out}, t0, g.Nodes(), map[*graph.Value][]int{out: {b.Index}}, at)
	if bias != nil {
		bias.ScoreMod = n
	}
	return bias
}
