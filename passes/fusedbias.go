package passes

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// biasInputs are the values a block adds to its scores: the bias terms of
// an unfused block, the attention-bias inputs of a fused op (also one that
// depends on the query, such as a gated bias).
func biasInputs(b *Block) []*graph.Value {
	var out []*graph.Value
	if b.Fused == nil {
		for _, bt := range b.Bias {
			out = append(out, bt.Value)
		}
		return out
	}
	spec := FusedSpecs[opKey(b.Fused)]
	for _, i := range spec.Bias {
		if i < len(b.Fused.Inputs()) && b.Fused.Input(i) != nil {
			out = append(out, b.Fused.Input(i))
		}
	}
	return out
}

// scaledScores reports whether a block scales its scores (T5 does not).
func (w *Work) scaledScores(b *Block) bool {
	if b.Fused == nil {
		return b.Scaled
	}
	if a := b.Fused.Attr("scale"); a != nil {
		return a.Float() != 1
	}
	return true // 1/sqrt(head size) by default
}

// fusedBiases are the biases fused attention ops add without a bias term
// of the graph: FlexAttention's score_mod, and a GatedRelativePositionBias
// over a bias the graph computes.
func (w *Work) fusedBiases(c *Context, blocks []*Block) []*Bias {
	var flex, gates []*Bias
	for _, b := range blocks {
		seen := map[*graph.Node]bool{}
		for _, v := range biasInputs(b) {
			for _, n := range producersUpTo(v, 64) {
				if opKey(n) != "com.microsoft.GatedRelativePositionBias" || seen[n] {
					continue
				}
				seen[n] = true
				if w.gatesFusedBias(n) {
					continue
				}
				// A gate over a bias computed in the graph: read that bias
				// as an unfused one.
				rel := n.Input(2)
				if bias := w.evalBias(c, w.NewProbe(1, 16, 0), b, BiasTerm{Value: rel}, map[*graph.Value][]int{rel: {b.Index}}); bias != nil {
					bias.Gate = n
					gates = append(gates, bias)
				}
			}
		}
		if b.Fused != nil && opKey(b.Fused) == "ai.onnx.preview.FlexAttention" {
			if bias := w.flexScoreMod(c, b); bias != nil {
				flex = append(flex, bias)
			}
		}
	}
	return append(flex, gates...)
}

// gatesFusedBias reports whether a GatedRelativePositionBias gates the
// output of a RelativePositionBias.
func (w *Work) gatesFusedBias(gate *graph.Node) bool {
	for _, m := range producersUpTo(gate.Input(2), 64) {
		if opKey(m) == "com.microsoft.RelativePositionBias" {
			return true
		}
	}
	return false
}

// relPosBiases reads the RelativePositionBias ops on the blocks' bias
// inputs (T5's bucketed bias, fused), with the gates reading them.
func (w *Work) relPosBiases(c *Context, blocks []*Block) []*Finding {
	rpbBlocks := map[*graph.Node][]*Block{}
	var rpbs []*graph.Node
	gatedBy := map[*graph.Node]*graph.Node{} // RelativePositionBias -> the gate reading it
	for _, b := range blocks {
		seen := map[*graph.Node]bool{}
		for _, v := range biasInputs(b) {
			for _, n := range producersUpTo(v, 64) {
				if seen[n] {
					continue
				}
				switch opKey(n) {
				case "com.microsoft.RelativePositionBias":
					seen[n] = true
					if rpbBlocks[n] == nil {
						rpbs = append(rpbs, n)
					}
					rpbBlocks[n] = append(rpbBlocks[n], b)
				case "com.microsoft.GatedRelativePositionBias":
					seen[n] = true
					for _, m := range producersUpTo(n.Input(2), 64) {
						if opKey(m) == "com.microsoft.RelativePositionBias" {
							gatedBy[m] = n
						}
					}
				}
			}
		}
	}
	var out []*Finding
	for _, n := range rpbs {
		out = append(out, w.relPosBias(c, n, rpbBlocks[n], gatedBy[n]))
	}
	return out
}

// relPosBias reads com.microsoft RelativePositionBias: T5's bucketed bias
// of a [num_buckets, num_heads] table, buckets by max_distance and
// is_bidirectional.
func (w *Work) relPosBias(c *Context, n *graph.Node, bs []*Block, gate *graph.Node) *Finding {
	ts := w.Shape(n.Input(0))
	p := &T5Params{Bidirectional: n.AttrInt("is_bidirectional", 0) == 1, SharedAcrossLayers: len(bs) > 1}
	var notes []string
	if ts.Rank() == 2 && ts.Dims[0].Known() && ts.Dims[1].Known() {
		p.NumBuckets, p.NumHeads = int(ts.Dims[0]), int(ts.Dims[1])
	} else {
		notes = append(notes, "num_buckets, num_heads: the shape of the bias table is not known")
	}
	if a := n.Attr("max_distance"); a != nil {
		p.MaxDistance = ptr(int(a.Int()))
	} else {
		notes = append(notes, "max_distance: the op has no max_distance attribute")
	}
	f := &Finding{Scheme: T5RelativeBias, Fused: true, Params: p, Notes: notes}
	for _, b := range bs {
		f.Layers = append(f.Layers, b.Index)
		p.ScaledScores = p.ScaledScores || w.scaledScores(b)
	}
	f.Layers = sortedUnique(f.Layers)
	nodes := append([]*graph.Node{n}, w.cone(n.Inputs()...)...)
	if gate != nil {
		nodes = append(nodes, gate)
		f.Notes = append(f.Notes, fmt.Sprintf("the bias is gated per token by the query (%s)", opName(gate)))
	}
	f.Nodes = w.origNames(nodes)
	ev := &T5Evidence{Bias: w.OrigValue(n.Output(0)), Table: w.name(n.Input(0))}
	if p.MaxDistance != nil && p.NumBuckets > 0 {
		const S = 512
		ev.MaxRel = S - 1
		for k := -(S - 1); k <= S-1; k++ {
			ev.BucketMap = append(ev.BucketMap, t5BucketOf(k, p.NumBuckets, *p.MaxDistance, p.Bidirectional))
		}
		ev.MaxDistances = []int{*p.MaxDistance}
	}
	f.Evidence = ev
	return f
}

// t5BucketOf is T5's bucket of relative position rel = key - query (the
// logarithm in float32, as PyTorch and ONNX Runtime compute it).
func t5BucketOf(rel, nb, md int, bidir bool) int {
	bucket := 0
	n := rel
	if bidir {
		nb /= 2
		if rel > 0 {
			bucket += nb
		}
		if n < 0 {
			n = -n
		}
	} else {
		n = -min(rel, 0)
	}
	exact := nb / 2
	if n < exact || exact == 0 {
		return bucket + n
	}
	x := float32(math.Log(float64(float32(n)/float32(exact)))) / float32(math.Log(float64(md)/float64(exact))) * float32(nb-exact)
	return bucket + min(exact+int(x), nb-1)
}

// flexScoreMod reads the score_mod graph of FlexAttention as a bias: the
// graph evaluated on zero scores gives the bias it adds, when it adds one
// (the same graph on scores of one must give the bias plus one).
func (w *Work) flexScoreMod(c *Context, b *Block) *Bias {
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
	p := w.NewProbe(1, 16, 0)
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
		t := fromFloat64Any(w.ElemType(scores), shape, v)
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
	bias := w.readBias(c, b, BiasTerm{Value: out}, t0, g.Nodes(), map[*graph.Value][]int{out: {b.Index}}, at)
	if bias != nil {
		bias.ScoreMod = n
	}
	return bias
}
