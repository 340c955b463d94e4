package attn

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/work"
)

// scoreTerm is a term added to a block's scores besides Q·Kᵀ: a product of
// a content value with a value that does not depend on content, reached
// from the score path through layout changes, a relative shift (padding,
// reshapes, slices), a gather of its columns by positions and constant
// scales. Transformer-XL's and XLNet's (q + v)·R and DeBERTa's
// content-to-position and position-to-content terms are such terms; the
// block's own Terms (products added as they are) are Shaw's.
type ScoreTerm struct {
	// Prod is the product; Content and Pos its operands. Pos may be a
	// constant normalisation folded (a stored table projected by a
	// layer's weights, all of it constant at fixed sizes); a constant
	// stored as it is, a weight, makes the product a projection.
	Prod         *graph.Node
	Content, Pos *graph.Value
	// Path are the nodes between the product and the score path, from the
	// score path down.
	Path []*graph.Node
	// Gather is the node reading the product's columns by positions
	// (GatherElements, Gather), nil when there is none; Index its indices.
	Gather *graph.Node
	Index  *graph.Value
	// Scale is the constant the term is divided by (1 when none).
	Scale float64
}

// termOps are the ops a score term may pass through on its way to the
// scores.
var termOps = map[string]bool{"Reshape": true, "Transpose": true, "Slice": true, "Unsqueeze": true, "Squeeze": true,
	"Expand": true, "Cast": true, "Identity": true, "Concat": true, "Gather": true, "GatherElements": true,
	"Mul": true, "Div": true, "Add": true, "Sum": true, "Flatten": true}

// scoreTerms lists the extra terms of an unfused block's scores, each
// product once.
func ScoreTerms(w *work.Work, b *Block) []ScoreTerm {
	if b.QK == nil || b.Softmax == nil {
		return nil
	}
	// The walk starts at the additions of the score path and does not
	// cross another one (which is a start of its own).
	adds := map[*graph.Node]bool{}
	for _, n := range b.ScorePath {
		if n.OpType == "Add" || n.OpType == "Sub" || n.OpType == "Sum" {
			adds[n] = true
		}
	}
	var out []ScoreTerm
	seen := map[*graph.Node]bool{}
	for _, n := range b.ScorePath {
		if !adds[n] {
			continue
		}
		for _, x := range n.Inputs() {
			if x == nil || !w.IsAct(x) {
				continue
			}
			for _, t := range termsBack(w, b, adds, x, nil, 1, 0) {
				if !seen[t.Prod] {
					seen[t.Prod] = true
					out = append(out, t)
				}
			}
		}
	}
	return out
}

func termsBack(w *work.Work, b *Block, adds map[*graph.Node]bool, v *graph.Value, path []*graph.Node, scale float64, depth int) []ScoreTerm {
	n := v.Producer()
	if n == nil || depth > 24 || !work.IsONNX(n) && n.OpType != "FusedMatMul" {
		return nil
	}
	if n == b.QK || adds[n] {
		return nil
	}
	if isMatMulLike(n) && len(n.Inputs()) >= 2 {
		acts := w.ActInputs(n)
		if len(acts) != 1 || len(path) == 0 {
			return nil
		}
		other := n.Input(1 - min(acts[0], 1))
		if other == nil || w.Roles.Of[other] == work.RoleParam || w.IsConst(other) && w.FoldedFrom(other) == nil {
			return nil // a projection of content by weights
		}
		t := ScoreTerm{Prod: n, Content: n.Input(acts[0]), Pos: other, Path: path, Scale: scale}
		for _, p := range path {
			if (p.OpType == "GatherElements" || p.OpType == "Gather") && t.Gather == nil {
				t.Gather, t.Index = p, p.Input(1)
			}
		}
		return []ScoreTerm{t}
	}
	if !termOps[n.OpType] {
		return nil
	}
	acts := w.ActInputs(n)
	path = append(append([]*graph.Node(nil), path...), n)
	switch n.OpType {
	case "Add", "Sum":
		var out []ScoreTerm
		for _, i := range acts {
			out = append(out, termsBack(w, b, adds, n.Input(i), path, scale, depth+1)...)
		}
		return out
	case "Gather", "GatherElements":
		if len(acts) != 1 || acts[0] != 0 {
			return nil
		}
	case "Mul", "Div":
		if len(acts) != 1 {
			return nil
		}
		c := w.Const(n.Input(1 - acts[0]))
		if c == nil || c.Len() != 1 {
			return nil
		}
		x := c.Float64s()[0]
		switch {
		case n.OpType == "Div" && acts[0] == 0:
			scale *= x
		case n.OpType == "Mul" && x != 0:
			scale /= x
		default:
			return nil
		}
	case "Concat":
		if len(acts) != 1 {
			return nil
		}
	default:
		if len(acts) != 1 || acts[0] != 0 {
			return nil
		}
	}
	return termsBack(w, b, adds, n.Input(acts[0]), path, scale, depth+1)
}

// opRoot follows v back through layout ops (content only changing shape)
// to the value they start from.
func OpRoot(w *work.Work, v *graph.Value) *graph.Value {
	for steps := 0; steps < 16 && v != nil; steps++ {
		n := v.Producer()
		if n == nil || !work.IsONNX(n) || !work.LayoutOps[n.OpType] && n.OpType != "Transpose" {
			return v
		}
		v = n.Input(0)
	}
	return v
}

// distanceOperand is the 1-D value of distances the angles multiply by
// constant frequencies (through layout ops), or nil.
func DistanceOperand(w *work.Work, angles *graph.Value) *graph.Value {
	n := angles.Producer()
	if n == nil || len(n.Inputs()) != 2 {
		return nil
	}
	var x *graph.Value
	for _, in := range n.Inputs() {
		if !w.IsConst(in) {
			if x != nil {
				return nil
			}
			x = in
		}
	}
	for steps := 0; steps < 6 && x != nil; steps++ {
		if w.Shape(x).Rank() == 1 {
			return x
		}
		p := x.Producer()
		if p == nil || !work.LayoutOps[p.OpType] {
			return nil
		}
		x = p.Input(0)
	}
	return nil
}
