package t5

import (
	"fmt"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/scorebias"
	"github.com/onnxpe/onnxpe/passes/work"
)

// relPosBiases reads the RelativePositionBias ops on the blocks' bias
// inputs (T5's bucketed bias, fused), with the gates reading them.
func relPosBiases(w *work.Work, c *passes.Context, blocks []*attn.Block) []*passes.Finding {
	rpbBlocks := map[*graph.Node][]*attn.Block{}
	var rpbs []*graph.Node
	gatedBy := map[*graph.Node]*graph.Node{} // RelativePositionBias -> the gate reading it
	for _, b := range blocks {
		seen := map[*graph.Node]bool{}
		for _, v := range scorebias.BiasInputs(b) {
			for _, n := range work.ProducersUpTo(v, 64) {
				if seen[n] {
					continue
				}
				switch work.OpKey(n) {
				case "com.microsoft.RelativePositionBias":
					seen[n] = true
					if rpbBlocks[n] == nil {
						rpbs = append(rpbs, n)
					}
					rpbBlocks[n] = append(rpbBlocks[n], b)
				case "com.microsoft.GatedRelativePositionBias":
					seen[n] = true
					for _, m := range work.ProducersUpTo(n.Input(2), 64) {
						if work.OpKey(m) == "com.microsoft.RelativePositionBias" {
							gatedBy[m] = n
						}
					}
				}
			}
		}
	}
	var out []*passes.Finding
	for _, n := range rpbs {
		out = append(out, relPosBias(w, c, n, rpbBlocks[n], gatedBy[n]))
	}
	return out
}

// relPosBias reads com.microsoft RelativePositionBias: T5's bucketed bias
// of a [num_buckets, num_heads] table, buckets by max_distance and
// is_bidirectional.
func relPosBias(w *work.Work, c *passes.Context, n *graph.Node, bs []*attn.Block, gate *graph.Node) *passes.Finding {
	ts := w.Shape(n.Input(0))
	p := &Params{Bidirectional: passes.Ptr(n.AttrInt("is_bidirectional", 0) == 1), SharedAcrossLayers: len(bs) > 1}
	var notes []string
	if ts.Rank() == 2 && ts.Dims[0].Known() && ts.Dims[1].Known() {
		p.NumBuckets, p.NumHeads = passes.Ptr(int(ts.Dims[0])), int(ts.Dims[1])
	} else {
		notes = append(notes, "num_buckets, num_heads: the shape of the bias table is not known")
	}
	if a := n.Attr("max_distance"); a != nil {
		p.MaxDistance = passes.Ptr(int(a.Int()))
	} else {
		notes = append(notes, "max_distance: the op has no max_distance attribute")
	}
	f := &passes.Finding{Scheme: Name, Fused: true, Params: p, Notes: notes}
	for _, b := range bs {
		f.Layers = append(f.Layers, b.Index)
		p.ScaledScores = p.ScaledScores || attn.ScaledScores(w, b)
	}
	f.Layers = passes.SortedUnique(f.Layers)
	nodes := append([]*graph.Node{n}, w.Cone(n.Inputs()...)...)
	if gate != nil {
		nodes = append(nodes, gate)
		f.Notes = append(f.Notes, fmt.Sprintf("the bias is gated per token by the query (%s)", work.OpName(gate)))
	}
	f.Nodes = w.OrigNames(nodes)
	ev := &Evidence{Bias: w.OrigValue(n.Output(0)), Table: w.Name(n.Input(0))}
	if p.MaxDistance != nil && p.NumBuckets != nil {
		const S = 512
		ev.MaxRel = S - 1
		for k := -(S - 1); k <= S-1; k++ {
			ev.BucketMap = append(ev.BucketMap, t5BucketOf(k, *p.NumBuckets, *p.MaxDistance, *p.Bidirectional))
		}
		ev.MaxDistances = []int{*p.MaxDistance}
	}
	f.Evidence = ev
	return f
}

// t5BucketOf is kernels.T5Bucket on ints.
func t5BucketOf(rel, nb, md int, bidir bool) int {
	return int(kernels.T5Bucket(int64(rel), int64(nb), int64(md), bidir))
}
