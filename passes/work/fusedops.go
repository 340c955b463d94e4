package work

import (
	"github.com/onnxpe/onnxpe/graph"
)

// FusedAttentionOps are the fused attention ops counted as blocks, by
// "domain.op" ("" for the ONNX domain).
var FusedAttentionOps = map[string]bool{
	"com.microsoft.Attention": true, "com.microsoft.MultiHeadAttention": true,
	"com.microsoft.GroupQueryAttention": true, "com.microsoft.DecoderMaskedMultiHeadAttention": true,
	"com.microsoft.DecoderMaskedSelfAttention": true, "com.microsoft.PackedAttention": true,
	"com.microsoft.PackedMultiHeadAttention": true, "com.microsoft.SparseAttention": true,
	"com.microsoft.LongformerAttention": true, "com.microsoft.QAttention": true,
	"com.microsoft.PagedAttention": true, "com.microsoft.DecoderAttention": true,
	"com.microsoft.QOrderedAttention": true, "com.microsoft.RemovePadding": false,
	".Attention": true, "ai.onnx.preview.FlexAttention": true,
}

// FusedSpec says where a fused attention op takes its operands: the input
// indexes of the projected query, key and value (-1 when the op projects
// them itself), of the additive score biases, and the attributes holding
// its numbers of query and key/value heads.
type FusedSpec struct {
	Q, K, V            int
	Bias               []int
	Heads, KVHeads     string
	Rotary             bool // a do_rotary attribute may rotate q and k inside the op
	CosCache, SinCache int  // inputs of the cos/sin caches of do_rotary (-1: none)
	PosIDs             int  // input of position_ids for do_rotary (-1: none)
}

// FusedSpecs are the operand positions of the fused attention ops, from
// their contracts (ONNX's Attention 23/24 and FlexAttention; ONNX
// Runtime's ContribOperators.md).
var FusedSpecs = map[string]FusedSpec{
	".Attention":                                    {Q: 0, K: 1, V: 2, Bias: []int{3}, Heads: "q_num_heads", KVHeads: "kv_num_heads", CosCache: -1, SinCache: -1, PosIDs: -1},
	"ai.onnx.preview.FlexAttention":                 {Q: 0, K: 1, V: 2, CosCache: -1, SinCache: -1, PosIDs: -1},
	"com.microsoft.Attention":                       {Q: -1, K: -1, V: -1, Bias: []int{5}, Heads: "num_heads", Rotary: true, CosCache: -1, SinCache: -1, PosIDs: -1},
	"com.microsoft.MultiHeadAttention":              {Q: 0, K: 1, V: 2, Bias: []int{5}, Heads: "num_heads", CosCache: -1, SinCache: -1, PosIDs: -1},
	"com.microsoft.GroupQueryAttention":             {Q: 0, K: 1, V: 2, Bias: []int{10}, Heads: "num_heads", KVHeads: "kv_num_heads", Rotary: true, CosCache: 7, SinCache: 8, PosIDs: 9},
	"com.microsoft.SparseAttention":                 {Q: 0, K: 1, V: 2, Heads: "num_heads", KVHeads: "kv_num_heads", Rotary: true, CosCache: 9, SinCache: 10, PosIDs: -1},
	"com.microsoft.PagedAttention":                  {Q: 0, K: 1, V: 2, Heads: "num_heads", KVHeads: "kv_num_heads", Rotary: true, CosCache: 8, SinCache: 9, PosIDs: -1},
	"com.microsoft.PackedMultiHeadAttention":        {Q: 0, K: 1, V: 2, Bias: []int{6}, Heads: "num_heads", CosCache: -1, SinCache: -1, PosIDs: -1},
	"com.microsoft.DecoderMaskedMultiHeadAttention": {Q: 0, K: 1, V: 2, Bias: []int{4}, Heads: "num_heads", Rotary: true, CosCache: -1, SinCache: -1, PosIDs: -1},
	"com.microsoft.DecoderMaskedSelfAttention":      {Q: -1, K: -1, V: -1, Bias: []int{5}, Heads: "num_heads", Rotary: true, CosCache: -1, SinCache: -1, PosIDs: -1},
	"com.microsoft.PackedAttention":                 {Q: -1, K: -1, V: -1, Bias: []int{5}, Heads: "num_heads", CosCache: -1, SinCache: -1, PosIDs: -1},
	"com.microsoft.LongformerAttention":             {Q: -1, K: -1, V: -1, Heads: "num_heads", CosCache: -1, SinCache: -1, PosIDs: -1},
	"com.microsoft.QAttention":                      {Q: -1, K: -1, V: -1, Heads: "num_heads", CosCache: -1, SinCache: -1, PosIDs: -1},
	"com.microsoft.DecoderAttention":                {Q: -1, K: -1, V: -1, Heads: "num_heads", CosCache: -1, SinCache: -1, PosIDs: -1},
	"com.microsoft.QOrderedAttention":               {Q: -1, K: -1, V: -1, Heads: "num_heads", CosCache: -1, SinCache: -1, PosIDs: -1},
}

// GenerationOps are the ops that run graphs of their attributes as a
// model in a loop (ONNX Runtime's text generation). Their graphs are
// audited as models of their own (the generation pass); the blocks of the
// model's own graphs leave them out.
var GenerationOps = map[string]bool{
	"com.microsoft.BeamSearch": true, "com.microsoft.GreedySearch": true,
	"com.microsoft.WhisperBeamSearch": true, "com.microsoft.Sampling": true,
}

func OpKey(n *graph.Node) string {
	d := n.Domain
	if d == "ai.onnx" {
		d = ""
	}
	return d + "." + n.OpType
}

// ---------------------------------------------------------------------
// Rotations

func IsRotaryOp(n *graph.Node) bool {
	return n.OpType == "RotaryEmbedding" && (IsONNX(n) || n.Domain == "com.microsoft")
}

func ProducerOf(v *graph.Value) *graph.Node {
	if v == nil {
		return nil
	}
	return v.Producer()
}

// ---------------------------------------------------------------------
// helpers shared by the fused detectors

// producersUpTo walks back from v through any ops (not into subgraphs),
// breadth first, and returns the nodes met, at most limit.
func ProducersUpTo(v *graph.Value, limit int) []*graph.Node {
	var out []*graph.Node
	seen := map[*graph.Node]bool{}
	queue := []*graph.Value{v}
	for len(queue) > 0 && len(out) < limit {
		x := queue[0]
		queue = queue[1:]
		if x == nil {
			continue
		}
		n := x.Producer()
		if n == nil || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
		queue = append(queue, n.Inputs()...)
	}
	return out
}

func OpName(n *graph.Node) string {
	if n.Domain == "" || n.Domain == "ai.onnx" {
		return n.OpType
	}
	return n.Domain + "." + n.OpType
}
