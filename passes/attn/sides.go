package attn

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/work"
	"slices"
)

// Sides finds, for every unfused block, what reaches its Q and K operands.
var Sides = &passes.Pass[map[*Block]*BlockSides]{
	Name: "sides",
	Doc: `Walk back from both operands of every block's Q·Kᵀ to the projected q and k.

Fused attention ops that take q and k projected are walked back from
those inputs. Layout changes, constant scales, the repeat of grouped KV
heads, the concatenation with a KV cache and a weightless row norm are
skipped; what
remains between the projection and the scores is the side's region, with
the values that do not depend on content entering it (cos/sin, a
temperature). A region with no such value means no positional change.`,
	Requires: []passes.Analyzer{work.Normalize, Blocks},
	Run: func(c *passes.Context) (map[*Block]*BlockSides, error) {
		w := work.Of(c)
		out := map[*Block]*BlockSides{}
		for _, b := range passes.Result(c, Blocks) {
			if b.Q == nil || b.K == nil {
				continue // a fused op that projects q and k itself
			}
			bs := &BlockSides{}
			hd := w.Shape(b.Q).Last()
			if b.HeadDim != 0 {
				hd = b.HeadDim
			}
			bs.Q, bs.QWhy = findSide(w, b.Q, hd)
			bs.K, bs.KWhy = findSide(w, b.K, hd)
			if bs.QWhy != "" {
				c.Miss("rope", w.OrigName(b.Node()), bs.QWhy, 0)
			}
			out[b] = bs
		}
		return out, nil
	},
}

// BlockSides are the two sides of a block.
type BlockSides struct {
	Q, K       *Side
	QWhy, KWhy string
}

// side is what reaches one operand of Q·Kᵀ: the content value In (q or k
// as projected), the value Out the scores read after any position-dependent
// change (rotation, temperature), the nodes between them, and the values
// that do not depend on content entering those nodes (cos/sin, scales).
type Side struct {
	Operand *graph.Value
	In, Out *graph.Value
	Nodes   []*graph.Node
	Pos     []*graph.Value
	// Norm is "l2_after_rope" when Out is normalised without a weight
	// before the scores read it.
	Norm string
	// Skipped are the nodes between Out and the operand (transposes,
	// reshapes, the repeat of GQA, a constant scale, the norm).
	Skipped []*graph.Node
	// Cache is a KV-cache input concatenated with the new keys.
	Cache *graph.Value
}

// RegionOf walks back from v as from a score operand whose contracted
// axis is hd: the region of a position-dependent change of a tensor that
// is not a block's q or k (a rotation in a fragment without attention).
func RegionOf(w *work.Work, v *graph.Value, hd work.Dim) (*Side, string) {
	return findSide(w, v, hd)
}

// findSide walks back from a score operand; hd is the head dimension (the
// contracted axis of the scores).
func findSide(w *work.Work, operand *graph.Value, hd work.Dim) (*Side, string) {
	s := &Side{Operand: operand}
	v := operand
	// 1. Skip layout changes, constant scales, a weightless norm and the
	// concatenation with a KV cache.
	for steps := 0; steps < 32; steps++ {
		n := v.Producer()
		if n == nil {
			break
		}
		if !work.IsONNX(n) {
			break
		}
		if x, nodes, kind := rowNorm(w, v); x != nil {
			s.Norm = kind
			s.Skipped = append(s.Skipped, nodes...)
			v = x
			continue
		}
		acts := w.ActInputs(n)
		if len(acts) == 1 && work.LayoutOps[n.OpType] && acts[0] == 0 &&
			(w.Shape(n.Input(0)).Last() == hd || w.Shape(v).Last() != hd) {
			s.Skipped = append(s.Skipped, n)
			v = n.Input(0)
			continue
		}
		if len(acts) == 1 && (n.OpType == "Mul" || n.OpType == "Div" && acts[0] == 0) && w.IsConst(n.Input(1-acts[0])) &&
			!w.FixedPositionTable(n.Input(1-acts[0])) {
			// A constant scale (not a table of one per position, which
			// normalisation folds from a temperature of fixed shapes).
			s.Skipped = append(s.Skipped, n)
			v = n.Input(acts[0])
			continue
		}
		if n.OpType == "Concat" && len(acts) == 2 {
			// past ++ new along the sequence: follow the new part.
			a, b := n.Input(acts[0]), n.Input(acts[1])
			if w.CacheInput(a) {
				s.Cache, v = a, b
				s.Skipped = append(s.Skipped, n)
				continue
			}
		}
		if n.OpType == "TensorScatter" && len(acts) == 2 && acts[0] == 0 && acts[1] == 1 && w.CacheInput(n.Input(0)) {
			// A static KV cache (opset 24): the new keys written into the
			// cache given as input: follow the new keys.
			s.Cache, v = n.Input(0), n.Input(1)
			s.Skipped = append(s.Skipped, n)
			continue
		}
		break
	}
	s.Out = v
	// 2. Walk back to the single content value everything between comes
	// from.
	frontier := []*graph.Value{v}
	inRegion := map[*graph.Node]bool{}
	mixing := false
	for steps := 0; steps < 256; steps++ {
		if len(frontier) == 1 && mixing {
			s.In = frontier[0]
			break
		}
		// The latest-computed value first.
		k := 0
		for i, f := range frontier {
			if w.PosOf(f) > w.PosOf(frontier[k]) {
				k = i
			}
		}
		x := frontier[k]
		n := x.Producer()
		if n == nil || IsProjection(w, n) || len(n.Subgraphs()) > 0 {
			if len(frontier) == 1 {
				s.In = x
			}
			break
		}
		frontier = slices.DeleteFunc(frontier, func(f *graph.Value) bool { return f.Producer() == n })
		inRegion[n] = true
		if work.IsRotaryOp(n) {
			// A fused rotation changes q with the position even when its
			// positions are a constant (the offset 0 of com.microsoft's op).
			mixing = true
		}
		s.Nodes = append(s.Nodes, n)
		for i, in := range n.Inputs() {
			switch {
			case in == nil:
			case w.IsAct(in):
				if !slices.Contains(frontier, in) {
					frontier = append(frontier, in)
				}
			case work.ShapeOperand(n, i):
			case w.IsWeight(in) && w.Shape(in).Rank() <= 1:
				// A bias or scale over the features (an exporter's weight
				// input), not something that varies with the position.
			case !w.IsConst(in), n.OpType == "Mul" && w.FixedPositionTable(in):
				mixing = true
				if !slices.Contains(s.Pos, in) {
					s.Pos = append(s.Pos, in)
				}
			}
		}
	}
	if s.In == nil {
		return nil, fmt.Sprintf("the content inputs of the scores' operand %s do not come from one value", w.Name(operand))
	}
	if !mixing {
		s.Nodes = nil
	} else {
		packedPart(w, s)
		// Move q back through layout changes to a value of the rotated
		// value's shape (a rotation of pairs may reshape q to
		// [..., d/2, 2] first).
		for steps := 0; steps < 8 && !work.SameShape(w.Shape(s.In), w.Shape(s.Out)); steps++ {
			n := s.In.Producer()
			if n == nil || !work.LayoutOps[n.OpType] || !work.IsONNX(n) || len(w.ActInputs(n)) != 1 || w.ActInputs(n)[0] != 0 {
				break
			}
			s.Nodes = append(s.Nodes, n)
			s.In = n.Input(0)
		}
	}
	slices.SortFunc(s.Nodes, func(a, b *graph.Node) int { return w.Pos(a) - w.Pos(b) })
	return s, ""
}

// packedPart handles q and k rotated as one tensor: concatenated along
// an axis, rotated once, split back along the same axis. The side's content
// is then its own part of the concatenation (the input of the Concat at
// the index of the Split's output the side reads), not the packed value,
// so that a probe of q is a probe of q alone.
func packedPart(w *work.Work, s *Side) {
	if work.SameShape(w.Shape(s.In), w.Shape(s.Out)) {
		return
	}
	c, sp := s.In.Producer(), s.Out.Producer()
	if c == nil || sp == nil || c.OpType != "Concat" || sp.OpType != "Split" || !work.IsONNX(c) || !work.IsONNX(sp) || !slices.Contains(s.Nodes, sp) {
		return
	}
	r := w.Shape(s.In).Rank()
	axis, sizes, ok := w.SplitSizes(sp)
	if !ok || r < 1 || work.NormAxis(int64(axis), r) != work.NormAxis(c.AttrInt("axis", 0), r) || len(sizes) != len(c.Inputs()) {
		return
	}
	idx := slices.Index(sp.Outputs(), s.Out)
	if idx < 0 {
		return
	}
	ax := work.NormAxis(int64(axis), r)
	for i, in := range c.Inputs() {
		sh := w.Shape(in)
		if in == nil || sh.Rank() != r || !sh.Dims[ax].Known() || int64(sh.Dims[ax]) != sizes[i] {
			return // the parts are not the split's sizes
		}
	}
	if part := c.Input(idx); w.IsAct(part) {
		s.Nodes = append(s.Nodes, c)
		s.In = part
	}
}

// IsProjection reports whether n multiplies content by weights (a linear
// layer, a convolution), or normalises it with learned weights: where the
// walk back from the scores stops.
func IsProjection(w *work.Work, n *graph.Node) bool {
	if n.OpType == "Gather" {
		return !w.IsAct(n.Input(0)) // an embedding lookup, not a slice of content
	}
	switch n.OpType {
	case "MatMul", "Gemm", "Einsum", "FusedMatMul", "Conv", "MatMulInteger", "MatMulNBits", "QLinearMatMul",
		"LayerNormalization", "SimplifiedLayerNormalization", "SkipLayerNormalization",
		"SkipSimplifiedLayerNormalization", "RMSNormalization", "EmbedLayerNormalization":
		return true
	}
	return false
}

// rowNorm matches a normalisation of each row of v's producer by a
// statistic of the row itself without a weight: x·rsqrt(mean(x²)+eps),
// x/sqrt(sum(x²)), x/ReduceL2(x). It returns x, the nodes and the kind.
func rowNorm(w *work.Work, v *graph.Value) (*graph.Value, []*graph.Node, string) {
	n := v.Producer()
	if n == nil || (n.OpType != "Mul" && n.OpType != "Div") {
		return nil, nil, ""
	}
	for xi := 0; xi < 2; xi++ {
		if n.OpType == "Div" && xi == 1 {
			break
		}
		x, stat := n.Input(xi), n.Input(1-xi)
		if x == nil || stat == nil || !w.IsAct(x) || !w.IsAct(stat) {
			continue
		}
		if w.Shape(stat).Last() != 1 {
			continue
		}
		// The statistic must come from x alone through reductions and
		// scalar arithmetic.
		nodes := []*graph.Node{n}
		ok, reduced := w.StatOf(stat, x, &nodes, 0)
		if ok && reduced {
			return x, nodes, "l2_after_rope"
		}
	}
	return nil, nil, ""
}
