package rope

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/rewrite"
)

// lowerRoPE lowers RotaryEmbedding and GroupQueryAttention's do_rotary.
func LowerRoPE(r *rewrite.Rewrite, n *graph.Node) (bool, error) {
	switch {
	case n.OpType == "RotaryEmbedding" && (n.Domain == rewrite.DomainMicrosoft || n.Domain == "" || n.Domain == "ai.onnx"):
		return true, unfuseRotary(r, n)
	case n.OpType == "GroupQueryAttention" && n.Domain == rewrite.DomainMicrosoft && n.AttrInt("do_rotary", 0) == 1:
		return true, unfuseGQARotary(r, n)
	}
	return false, nil
}

// rotaryForm is what a fused rotary node says about its rotation.
type rotaryForm struct {
	x, cos, sin, pos *graph.Value
	interleaved      bool
	rd               int64 // 0: the whole head
	heads            int64 // num_heads (3-D inputs)
	ms               bool
}

func rotaryOf(n *graph.Node) (rotaryForm, error) {
	f := rotaryForm{interleaved: n.AttrInt("interleaved", 0) == 1, rd: n.AttrInt("rotary_embedding_dim", 0), heads: n.AttrInt("num_heads", 0)}
	if n.Domain == rewrite.DomainMicrosoft {
		f.ms = true
		f.x, f.pos, f.cos, f.sin = n.Input(0), n.Input(1), n.Input(2), n.Input(3)
		if n.AttrInt("is_packed_batching", 0) != 0 {
			return f, fmt.Errorf("%w: is_packed_batching is set", rewrite.ErrRewrite)
		}
		if s := n.AttrFloat("scale", 1); s != 1 {
			return f, fmt.Errorf("%w: scale %v is set", rewrite.ErrRewrite, s)
		}
	} else {
		f.x, f.cos, f.sin, f.pos = n.Input(0), n.Input(1), n.Input(2), n.Input(3)
	}
	if f.x == nil || f.cos == nil || f.sin == nil {
		return f, fmt.Errorf("%w: the input or a cache is missing", rewrite.ErrRewrite)
	}
	return f, nil
}

// rotate writes the rotation of x (last axis the head) by c and s, shaped
// to broadcast against x's rows; rd is the rotated part (0: all).
func rotate(r *rewrite.Rewrite, x, c, s *graph.Value, rd int64, interleaved bool) *graph.Value {
	last := graph.IntAttr("axis", -1)
	xr, xp := x, (*graph.Value)(nil)
	if rd > 0 {
		xr = r.Op1("Slice", []*graph.Value{x, r.VecInt(0), r.VecInt(rd), r.VecInt(-1)})
		xp = r.Op1("Slice", []*graph.Value{x, r.VecInt(rd), r.VecInt(1 << 62), r.VecInt(-1)})
	}
	combine := func(x1, x2 *graph.Value) (*graph.Value, *graph.Value) {
		y1 := r.Op1("Sub", []*graph.Value{r.Op1("Mul", []*graph.Value{x1, c}), r.Op1("Mul", []*graph.Value{x2, s})})
		y2 := r.Op1("Add", []*graph.Value{r.Op1("Mul", []*graph.Value{x1, s}), r.Op1("Mul", []*graph.Value{x2, c})})
		return y1, y2
	}
	var y *graph.Value
	shape := r.Op1("Shape", []*graph.Value{xr})
	if interleaved {
		lead := r.Op1("Slice", []*graph.Value{shape, r.VecInt(0), r.VecInt(-1), r.VecInt(0)})
		pairs := r.Op1("Concat", []*graph.Value{lead, r.VecInt(-1, 2)}, graph.IntAttr("axis", 0))
		xp2 := r.Op1("Reshape", []*graph.Value{xr, pairs})
		x1 := r.Op1("Gather", []*graph.Value{xp2, r.ScalarInt(0)}, last)
		x2 := r.Op1("Gather", []*graph.Value{xp2, r.ScalarInt(1)}, last)
		y1, y2 := combine(x1, x2)
		st := r.Op1("Concat", []*graph.Value{r.Unsqueeze(y1, -1), r.Unsqueeze(y2, -1)}, last)
		y = r.Op1("Reshape", []*graph.Value{st, shape})
	} else {
		d := r.Op1("Slice", []*graph.Value{shape, r.VecInt(-1), r.VecInt(1 << 62), r.VecInt(0)})
		half := r.Op1("Div", []*graph.Value{d, r.VecInt(2)})
		x1 := r.Op1("Slice", []*graph.Value{xr, r.VecInt(0), half, r.VecInt(-1)})
		x2 := r.Op1("Slice", []*graph.Value{xr, half, r.VecInt(1 << 62), r.VecInt(-1)})
		y1, y2 := combine(x1, x2)
		y = r.Op1("Concat", []*graph.Value{y1, y2}, last)
	}
	if xp != nil {
		y = r.Op1("Concat", []*graph.Value{y, xp}, last)
	}
	return y
}

// unfuseRotary lowers one RotaryEmbedding node.
func unfuseRotary(r *rewrite.Rewrite, n *graph.Node) error {
	f, err := rotaryOf(n)
	if err != nil {
		return err
	}
	rank := r.Rank(f.x)
	offset := false
	if f.ms {
		pr := r.Rank(f.pos)
		if pr < 0 && f.pos.Const != nil {
			pr = len(f.pos.Const.Dims())
		}
		if pr < 0 {
			return fmt.Errorf("%w: the rank of position_ids %q is not known (a (batch, seq) tensor or a one-element offset)", rewrite.ErrRewrite, f.pos.Name)
		}
		offset = pr <= 1
	}
	out := n.Output(0)
	dt := rewrite.ElemType(f.x)
	switch rank {
	case 4:
		// [B, heads, S, head]: cos/sin rows [B|1, S, w] -> [B|1, 1, S, w].
		seq := r.DimOf(f.x, 2)
		c := r.Unsqueeze(r.RowsAt(f.cos, f.pos, seq, offset), 1)
		s := r.Unsqueeze(r.RowsAt(f.sin, f.pos, seq, offset), 1)
		y := rotate(r, f.x, c, s, f.rd, f.interleaved)
		rewrite.Typed(y, dt, 4)
		out.ReplaceKeepingName(y)
	case 3:
		// [B, S, hidden]: heads split off, rotated, joined again.
		var split *graph.Value
		switch {
		case f.heads > 0:
			split = r.VecInt(0, 0, f.heads, -1)
		case f.rd == 0 && rewrite.Width(f.cos) > 0:
			split = r.VecInt(0, 0, -1, 2*rewrite.Width(f.cos))
		default:
			return fmt.Errorf("%w: a 3-D input without num_heads", rewrite.ErrRewrite)
		}
		seq := r.DimOf(f.x, 1)
		x4 := r.Op1("Reshape", []*graph.Value{f.x, split})
		c := r.Unsqueeze(r.RowsAt(f.cos, f.pos, seq, offset), 2)
		s := r.Unsqueeze(r.RowsAt(f.sin, f.pos, seq, offset), 2)
		y := r.Op1("Reshape", []*graph.Value{rotate(r, x4, c, s, f.rd, f.interleaved), r.ShapeOf(f.x)})
		rewrite.Typed(y, dt, 3)
		out.ReplaceKeepingName(y)
	default:
		return fmt.Errorf("%w: the input %q has rank %d (not 3 or 4, or unknown)", rewrite.ErrRewrite, f.x.Name, rank)
	}
	return nil
}

// unfuseGQARotary moves GroupQueryAttention's rotary out of the op.
func unfuseGQARotary(r *rewrite.Rewrite, n *graph.Node) error {
	query, key := n.Input(0), n.Input(1)
	cos, sin := n.Input(7), n.Input(8)
	seqlens, total := n.Input(5), n.Input(6)
	if cos == nil || sin == nil || seqlens == nil || total == nil {
		return fmt.Errorf("%w: do_rotary without cos/sin caches, seqlens_k or total_sequence_length", rewrite.ErrRewrite)
	}
	nq, nkv := n.AttrInt("num_heads", 0), n.AttrInt("kv_num_heads", 0)
	if nq <= 0 || nkv <= 0 {
		return fmt.Errorf("%w: num_heads %d, kv_num_heads %d", rewrite.ErrRewrite, nq, nkv)
	}
	il := n.AttrInt("rotary_interleaved", 0) == 1
	rd := int64(0)
	if w := rewrite.Width(cos); w > 0 {
		rd = 2 * w
	} else {
		return fmt.Errorf("%w: the width of cos_cache %q is not known", rewrite.ErrRewrite, cos.Name)
	}
	// Positions [B, S]: 0..S-1 on the first prompt (S = total), from
	// position_ids[0, 0] when the op has them (ONNX Runtime reads one
	// first position there), then the op's position_ids, or
	// seqlens_k+1-S+s after a past.
	seq := r.DimOf(query, 1)
	sn := r.Op1("Reshape", []*graph.Value{seq, r.Ints([]int64{0})})
	ar := r.Op1("Range", []*graph.Value{r.ScalarInt(0), sn, r.ScalarInt(1)})
	tot := r.Op1("Cast", []*graph.Value{total}, graph.IntAttr("to", int64(graph.Int64)))
	first := r.Op1("Equal", []*graph.Value{r.Op1("Reshape", []*graph.Value{tot, r.Ints([]int64{0})}), sn})
	var later, prompt *graph.Value
	if p := n.Input(9); p != nil {
		later = r.CastInt64(p, rewrite.ElemType(p))
		start := r.Op1("Gather", []*graph.Value{r.Op1("Reshape", []*graph.Value{later, r.VecInt(-1)}), r.VecInt(0)}, graph.IntAttr("axis", 0))
		prompt = r.Op1("Expand", []*graph.Value{r.Op1("Add", []*graph.Value{r.Unsqueeze(ar, 0), start}), r.Op1("Shape", []*graph.Value{later})})
	} else {
		sl := r.Op1("Cast", []*graph.Value{seqlens}, graph.IntAttr("to", int64(graph.Int64)))
		off := r.Op1("Sub", []*graph.Value{r.Op1("Add", []*graph.Value{sl, r.ScalarInt(1)}), sn})
		later = r.Op1("Add", []*graph.Value{r.Unsqueeze(off, 1), r.Unsqueeze(ar, 0)})
		prompt = r.Op1("Expand", []*graph.Value{r.Unsqueeze(ar, 0), r.Op1("Shape", []*graph.Value{later})})
	}
	pos := r.Op1("Where", []*graph.Value{first, prompt, later})
	c := r.Unsqueeze(r.Op1("Gather", []*graph.Value{cos, pos}, graph.IntAttr("axis", 0)), 2)
	s := r.Unsqueeze(r.Op1("Gather", []*graph.Value{sin, pos}, graph.IntAttr("axis", 0)), 2)
	rot := func(x *graph.Value, heads int64) *graph.Value {
		x4 := r.Op1("Reshape", []*graph.Value{x, r.VecInt(0, 0, heads, -1)})
		return r.Op1("Reshape", []*graph.Value{rotate(r, x4, c, s, rd, il), r.ShapeOf(x)})
	}
	if key == nil {
		// Packed QKV: rotate the q and k heads, keep v.
		h := rewrite.Width(query)
		if h <= 0 || h%(nq+2*nkv) != 0 {
			return fmt.Errorf("%w: the packed QKV width of %q is not known", rewrite.ErrRewrite, query.Name)
		}
		hd := h / (nq + 2*nkv)
		parts := r.Op("Split", "", []*graph.Value{query, r.VecInt(nq*hd, nkv*hd, nkv*hd)}, 3, graph.IntAttr("axis", -1))
		if r.Opset() < 13 {
			parts = r.Op("Split", "", []*graph.Value{query}, 3, graph.IntAttr("axis", -1), graph.IntsAttr("split", nq*hd, nkv*hd, nkv*hd))
		}
		q := r.Op1("Concat", []*graph.Value{rot(parts[0], nq), rot(parts[1], nkv), parts[2]}, graph.IntAttr("axis", -1))
		n.SetInput(0, q)
	} else {
		n.SetInput(0, rot(query, nq))
		n.SetInput(1, rot(key, nkv))
	}
	n.SetInput(7, nil)
	n.SetInput(8, nil)
	n.SetAttr(graph.IntAttr("do_rotary", 0))
	return nil
}

// convertRotary replaces a RotaryEmbedding node of one domain by the
// other's: the inputs in the other order, the positions in the form the
// other takes ((batch, seq) for the ONNX op; the com.microsoft op needs
// position_ids, so caches given per token become rows numbered by
// them), the attributes both share.
func convertRotary(r *rewrite.Rewrite, n *graph.Node, toONNX bool) error {
	f, err := rotaryOf(n)
	if err != nil {
		return err
	}
	rank := r.Rank(f.x)
	if rank != 3 && rank != 4 {
		return fmt.Errorf("%w: the input %q has rank %d (not 3 or 4, or unknown)", rewrite.ErrRewrite, f.x.Name, rank)
	}
	seqAxis := int64(1)
	if rank == 4 {
		seqAxis = 2
	}
	var attrs []*graph.Attr
	if f.interleaved {
		attrs = append(attrs, graph.IntAttr("interleaved", 1))
	}
	if f.rd > 0 {
		attrs = append(attrs, graph.IntAttr("rotary_embedding_dim", f.rd))
	}
	if f.heads > 0 {
		attrs = append(attrs, graph.IntAttr("num_heads", f.heads))
	}
	bs := r.DimOf(f.x, 0, seqAxis)
	var y *graph.Value
	if toONNX {
		pos := f.pos
		pr := r.Rank(pos)
		if pr < 0 && pos.Const != nil {
			pr = len(pos.Const.Dims())
		}
		switch {
		case pr < 0:
			return fmt.Errorf("%w: the rank of position_ids %q is not known (a (batch, seq) tensor or a one-element offset)", rewrite.ErrRewrite, pos.Name)
		case pr <= 1:
			// The offset form: offset + 0..S-1 for every row.
			first := r.Op1("Reshape", []*graph.Value{r.CastInt64(pos, rewrite.ElemType(pos)), r.Ints([]int64{0})})
			s := r.Op1("Reshape", []*graph.Value{r.DimOf(f.x, seqAxis), r.Ints([]int64{0})})
			rg := r.Op1("Range", []*graph.Value{first, r.Op1("Add", []*graph.Value{first, s}), r.ScalarInt(1)})
			pos = r.Op1("Expand", []*graph.Value{r.Unsqueeze(rg, 0), bs})
		default:
			pos = r.CastInt64(pos, rewrite.ElemType(pos))
		}
		y = r.Op("RotaryEmbedding", "", []*graph.Value{f.x, f.cos, f.sin, pos}, 1, attrs...)[0]
	} else {
		cos, sin, pos := f.cos, f.sin, f.pos
		if pos == nil {
			// Caches (batch, seq, w): rows b·S+s.
			w := rewrite.Width(cos)
			if w <= 0 {
				return fmt.Errorf("%w: the width of the caches %q is not known", rewrite.ErrRewrite, cos.Name)
			}
			cos = r.Op1("Reshape", []*graph.Value{cos, r.VecInt(-1, w)})
			sin = r.Op1("Reshape", []*graph.Value{sin, r.VecInt(-1, w)})
			n := r.Op1("ReduceProd", []*graph.Value{bs}, graph.IntAttr("keepdims", 0))
			pos = r.Op1("Reshape", []*graph.Value{r.Op1("Range", []*graph.Value{r.ScalarInt(0), n, r.ScalarInt(1)}), bs})
		}
		if f.rd > 0 && f.heads == 0 && rank == 3 {
			return fmt.Errorf("%w: com.microsoft RotaryEmbedding needs num_heads with rotary_embedding_dim on a 3-D input", rewrite.ErrRewrite)
		}
		y = r.Op("RotaryEmbedding", rewrite.DomainMicrosoft, []*graph.Value{f.x, r.CastInt64(pos, rewrite.ElemType(pos)), cos, sin}, 1, attrs...)[0]
	}
	rewrite.Typed(y, rewrite.ElemType(f.x), rank)
	n.Output(0).ReplaceKeepingName(y)
	return nil
}
