package attn

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/work"
)

// Block is one attention block: scores Q·Kᵀ (maybe scaled, biased and
// masked) through a Softmax to a product with V, or a fused attention op.
// Blocks are numbered in the model's topological order from 0.
type Block struct {
	Index int
	// Softmax is the normalisation of the scores (nil for a fused op).
	Softmax *graph.Node
	// QK is the product of the scores; Q and K its operands as the graph
	// has them (K maybe transposed).
	QK   *graph.Node
	Q, K *graph.Value
	// AV is the product of the weights with V (nil when not found).
	AV *graph.Node
	V  *graph.Value
	// ScorePath are the nodes between QK and Softmax (additions of bias and
	// mask, scaling, reshapes).
	ScorePath []*graph.Node
	// Bias are the values added to the scores that do not depend on the
	// tokens' content (masks, ALiBi, T5 bias), with the node adding each.
	Bias []BiasTerm
	// Terms are other products of a content value with a value that does
	// not depend on content, added to the scores (Shaw's q·aᵀ).
	Terms []*graph.Node
	// OutTerms are products of the attention weights with a value that
	// does not depend on content (Shaw's weights·a^V).
	OutTerms []*graph.Node
	// Scaled reports whether the scores are multiplied or divided by a
	// constant on the way to the Softmax.
	Scaled bool
	// Fused is the fused attention op (com.microsoft Attention,
	// MultiHeadAttention, GroupQueryAttention, ..., ONNX Attention) when the
	// block is one node. Its Q and K (and V) are then the op's query and key
	// inputs when it takes them projected (nil when it projects them
	// itself or takes them packed), its Bias the additive score biases it
	// takes as inputs, and HeadDim the head size its contract gives (0
	// when unknown).
	Fused   *graph.Node
	HeadDim work.Dim
}

// BiasTerm is a value added to the scores, with the node adding it (nil
// when a fused attention op takes it as an input).
type BiasTerm struct {
	Value *graph.Value
	Add   *graph.Node
}

func (b *Block) String() string {
	if b.Fused != nil {
		return fmt.Sprintf("block %d (%v)", b.Index, b.Fused)
	}
	return fmt.Sprintf("block %d (%v)", b.Index, b.Softmax)
}

// detectGraphs lists g and the graphs nested in it that detectors search
// (every subgraph but those of generation ops).
func DetectGraphsOf(g *graph.Graph) []*graph.Graph {
	out := []*graph.Graph{g}
	for n := range g.All() {
		if work.GenerationOps[work.OpKey(n)] {
			continue
		}
		for _, sg := range n.Subgraphs() {
			out = append(out, DetectGraphsOf(sg)...)
		}
	}
	return out
}

// detectGraphs is detectGraphs of the working copy's main graph, listed
// once (detectors do not change the copy).
func DetectGraphs(w *work.Work) []*graph.Graph {
	if w.Detect == nil {
		w.Detect = DetectGraphsOf(w.M.Graph)
	}
	return w.Detect
}

// Blocks finds the attention blocks of the model.
var Blocks = &passes.Pass[[]*Block]{
	Name: "blocks",
	Doc: `Find the attention blocks, numbered in topological order from 0.

An unfused block is a Softmax whose input comes (through additions,
scaling, masking and reshapes) from a product of two values that both
depend on the tokens' content (Q·Kᵀ as MatMul, Einsum, FusedMatMul or
Gemm), and whose output multiplies such a value (·V). Values added to the
scores that do not depend on content are the block's bias terms (masks,
ALiBi, T5); products of content with position-only values are its extra
terms (Shaw). Fused attention ops (com.microsoft Attention,
MultiHeadAttention, GroupQueryAttention and the like, and ONNX Attention)
are blocks too: their projected query and key inputs are the block's Q
and K (so that detectors of unfused encodings see through them) and their
attention-bias inputs its bias terms. The graphs of generation ops
(BeamSearch and the like) are audited as models of their own; their
blocks take their numbers at the generation op's place.`,
	Requires: []passes.Analyzer{work.Normalize, Generation},
	Run: func(c *passes.Context) ([]*Block, error) {
		w := work.Of(c)
		var out []*Block
		for _, g := range DetectGraphs(w) {
			for n := range g.All() {
				switch {
				case work.FusedAttentionOps[work.OpKey(n)]:
					out = append(out, fusedBlock(w, n))
				case n.OpType == "Softmax" && work.IsONNX(n):
					if b := unfusedBlock(w, c, n); b != nil {
						out = append(out, b)
					}
				}
			}
		}
		// Number the blocks in an order that follows what the graph
		// computes (canonicalOrder), the sub-audits' blocks at their op's
		// place.
		subs := passes.Result(c, Generation)
		at := map[*graph.Node][]any{}
		var nodes []*graph.Node
		add := func(n *graph.Node, x any) {
			if at[n] == nil {
				nodes = append(nodes, n)
			}
			at[n] = append(at[n], x)
		}
		slices.SortStableFunc(out, func(a, b *Block) int { return w.Pos(a.Node()) - w.Pos(b.Node()) })
		for _, b := range out {
			add(b.Node(), b)
		}
		for _, s := range subs {
			add(s.Node, s)
		}
		i := 0
		for _, n := range canonicalOrder(w, nodes) {
			for _, x := range at[n] {
				switch x := x.(type) {
				case *Block:
					x.Index = i
					i++
				case *SubAudit:
					x.Base = i
					i += len(x.Report.Layers)
				}
			}
		}
		slices.SortStableFunc(out, func(a, b *Block) int { return a.Index - b.Index })
		return out, nil
	},
}

// fusedBlock is the block of a fused attention op n: its projected q, k
// and v inputs (when it takes them unpacked), its additive biases and the
// head size.
func fusedBlock(w *work.Work, n *graph.Node) *Block {
	b := &Block{Fused: n}
	spec, ok := work.FusedSpecs[work.OpKey(n)]
	if !ok {
		return b
	}
	in := func(i int) *graph.Value {
		if i < 0 || i >= len(n.Inputs()) {
			return nil
		}
		return n.Input(i)
	}
	q, k := in(spec.Q), in(spec.K)
	qs, ks := w.Shape(q), w.Shape(k)
	if q != nil && k != nil && w.IsAct(q) && w.IsAct(k) && (qs.Rank() == 3 || qs.Rank() == 4) && (ks.Rank() == 3 || ks.Rank() == 4) {
		b.Q, b.K, b.V = q, k, in(spec.V)
		switch {
		case qs.Rank() == 4:
			b.HeadDim = qs.Last()
		case spec.Heads != "" && qs.Last().Known():
			if h := n.AttrInt(spec.Heads, 0); h > 0 && int64(qs.Last())%h == 0 {
				b.HeadDim = work.Dim(int64(qs.Last()) / h)
			}
		}
	}
	for _, i := range spec.Bias {
		v := in(i)
		if v == nil || !work.IsFloatType(w.ElemType(v)) || w.IsAct(v) || w.IsConst(v) && allZero(w.Const(v)) {
			continue
		}
		b.Bias = append(b.Bias, BiasTerm{Value: v})
	}
	return b
}

func allZero(t *kernels.Tensor) bool {
	if t == nil {
		return false
	}
	for _, x := range t.Float64s() {
		if x != 0 {
			return false
		}
	}
	return true
}

func (b *Block) Node() *graph.Node {
	if b.Fused != nil {
		return b.Fused
	}
	return b.Softmax
}

func isMatMulLike(n *graph.Node) bool {
	switch n.OpType {
	case "MatMul", "Einsum", "Gemm":
		return work.IsONNX(n)
	case "FusedMatMul":
		return n.Domain == "com.microsoft"
	}
	return false
}

// scoreOps are the ops the score path may pass through between Q·Kᵀ and
// the Softmax.
var scoreOps = map[string]bool{"Add": true, "Sub": true, "Mul": true, "Div": true, "Where": true, "Cast": true,
	"Reshape": true, "Transpose": true, "Unsqueeze": true, "Squeeze": true, "Expand": true, "Slice": true,
	"Tanh": true, "Clip": true, "Max": true, "Min": true, "Identity": true, "Sum": true, "Neg": true,
	// The modulus of complex scores (complex-valued attention: |q·k*|).
	"Sqrt": true}

func unfusedBlock(w *work.Work, c *passes.Context, sm *graph.Node) *Block {
	b := &Block{Softmax: sm}
	at := w.OrigName(sm)
	if !w.IsAct(sm.Input(0)) {
		c.Miss("block", at, "Softmax input does not depend on the tokens (not attention)", 0)
		return nil
	}
	seen := map[*graph.Node]bool{}
	queue := []*graph.Value{sm.Input(0)}
	for len(queue) > 0 && len(seen) < 64 {
		v := queue[0]
		queue = queue[1:]
		n := v.Producer()
		if n == nil || seen[n] {
			continue
		}
		seen[n] = true
		if isMatMulLike(n) && len(n.Inputs()) >= 2 {
			a, bb := n.Input(0), n.Input(1)
			switch {
			case w.IsAct(a) && w.IsAct(bb):
				if b.QK == nil {
					b.QK, b.Q, b.K = n, a, bb
				}
			case w.IsAct(a) || w.IsAct(bb):
				// A product of content with a constant is a projection (the
				// logits of a classifier); with a position-only value, a
				// relative term.
				other := bb
				if !w.IsAct(a) {
					other = a
				}
				if !w.IsConst(other) && w.Roles.Of[other] != work.RoleParam {
					b.Terms = append(b.Terms, n)
				}
			}
			continue
		}
		if !scoreOps[n.OpType] || !work.IsONNX(n) {
			continue
		}
		b.ScorePath = append(b.ScorePath, n)
		for i, x := range n.Inputs() {
			if x == nil {
				continue
			}
			switch {
			case w.IsAct(x):
				queue = append(queue, x)
			case (n.OpType == "Add" || n.OpType == "Sub" || n.OpType == "Sum") && (!w.IsConst(x) || w.Shape(x).Rank() >= 2):
				// Position-side values and constant matrices (a bias the
				// fixed shapes of the model let normalisation fold).
				b.Bias = append(b.Bias, BiasTerm{Value: x, Add: n})
			case n.OpType == "Where" && i > 0 && !w.IsConst(x):
				b.Bias = append(b.Bias, BiasTerm{Value: x, Add: n})
			case (n.OpType == "Mul" || n.OpType == "Div") && w.IsConst(x):
				b.Scaled = true
			}
		}
	}
	if b.QK == nil {
		c.Miss("block", at, "no product of two content values (Q·Kᵀ) before the Softmax", 1)
		return nil
	}
	findAV(w, b)
	return b
}

// avOps are the ops between the Softmax and the product with V.
var avOps = map[string]bool{"Cast": true, "Dropout": true, "Where": true, "Mul": true, "Reshape": true,
	"Expand": true, "Transpose": true, "Slice": true, "Identity": true, "Unsqueeze": true, "Squeeze": true, "Div": true}

func findAV(w *work.Work, b *Block) {
	seen := map[*graph.Node]bool{}
	queue := []*graph.Value{b.Softmax.Output(0)}
	for len(queue) > 0 && len(seen) < 32 {
		v := queue[0]
		queue = queue[1:]
		for _, u := range v.Uses() {
			n := u.Node
			if seen[n] {
				continue
			}
			seen[n] = true
			if isMatMulLike(n) && len(n.Inputs()) >= 2 {
				other := n.Input(1 - min(u.Index, 1))
				if w.IsAct(other) {
					if b.AV == nil {
						b.AV, b.V = n, other
					}
				} else if other != nil && !w.IsConst(other) {
					b.OutTerms = append(b.OutTerms, n)
				}
				continue
			}
			if avOps[n.OpType] && work.IsONNX(n) {
				queue = append(queue, n.Outputs()...)
			}
		}
	}
}
