package passes

import (
	"errors"
	"fmt"

	"github.com/onnxpe/onnxpe/graph"
)

// Unfuse lowers the fused positional-encoding ops to primitive ops.
var Unfuse = &Pass{
	Name: "unfuse",
	Doc: `Lower fused positional-encoding ops to primitive ONNX ops.

RotaryEmbedding (com.microsoft and the opset-23 op) becomes a Gather of
the cos/sin caches at the positions (position_ids, the com.microsoft
offset form, or caches given per token) and the rotation written out:
the halves (or the even and odd elements) multiplied by cos and sin and
added, the dimensions beyond rotary_embedding_dim passed through.
GroupQueryAttention's do_rotary becomes the same rotation of q and k
before the op (positions 0..S-1 on the first prompt, after each
sequence's past otherwise, or its position_ids), the op keeping its
attention. ALiBiBias becomes slope·(j - (key_length-1)) (or
-slope·|i - j|) from a Range. For runtimes without the fused ops.`,
	Requires: []*Pass{Edit},
	Run: func(c *Context) (any, error) {
		r := c.rewrite()
		ch := r.begin("unfuse", "")
		defer r.end(ch)
		for _, n := range r.M.Graph.Nodes() {
			for _, lower := range lowerers {
				done, err := lower(r, n)
				if err != nil {
					if errors.Is(err, ErrRewrite) {
						ch.Skipped = append(ch.Skipped, fmt.Sprintf("%s (%s): %s", nodeName(n), n.OpType, reason(err)))
						break
					}
					return ch, err
				}
				if done {
					break
				}
			}
		}
		return ch, nil
	},
}

// lowerers lower the fused ops of each scheme: false when n is none of
// theirs.
var lowerers = []func(r *Rewrite, n *graph.Node) (bool, error){lowerRoPE, lowerALiBi}

// lowerRoPE lowers RotaryEmbedding and GroupQueryAttention's do_rotary.
func lowerRoPE(r *Rewrite, n *graph.Node) (bool, error) {
	switch {
	case n.OpType == "RotaryEmbedding" && (n.Domain == DomainMicrosoft || n.Domain == "" || n.Domain == "ai.onnx"):
		return true, r.unfuseRotary(n)
	case n.OpType == "GroupQueryAttention" && n.Domain == DomainMicrosoft && n.AttrInt("do_rotary", 0) == 1:
		return true, r.unfuseGQARotary(n)
	}
	return false, nil
}

// lowerALiBi lowers onnxpe's ALiBiBias.
func lowerALiBi(r *Rewrite, n *graph.Node) (bool, error) {
	if n.OpType == "ALiBiBias" && n.Domain == DomainOnnxpe {
		return true, r.unfuseALiBi(n)
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
	if n.Domain == DomainMicrosoft {
		f.ms = true
		f.x, f.pos, f.cos, f.sin = n.Input(0), n.Input(1), n.Input(2), n.Input(3)
		if n.AttrInt("is_packed_batching", 0) != 0 {
			return f, fmt.Errorf("%w: is_packed_batching is set", ErrRewrite)
		}
		if s := n.AttrFloat("scale", 1); s != 1 {
			return f, fmt.Errorf("%w: scale %v is set", ErrRewrite, s)
		}
	} else {
		f.x, f.cos, f.sin, f.pos = n.Input(0), n.Input(1), n.Input(2), n.Input(3)
	}
	if f.x == nil || f.cos == nil || f.sin == nil {
		return f, fmt.Errorf("%w: the input or a cache is missing", ErrRewrite)
	}
	return f, nil
}

// elemType is the declared element type of v (Undefined when unknown).
func elemType(v *graph.Value) graph.DataType {
	if v == nil {
		return graph.Undefined
	}
	if v.Const != nil {
		return v.Const.DataType()
	}
	if v.Type != nil {
		return v.Type.ElemType()
	}
	if p := v.Producer(); p != nil && (p.OpType == "Cast") {
		return graph.DataType(p.AttrInt("to", 0))
	}
	return graph.Undefined
}

// width is the last dimension of v when the model states it.
func width(v *graph.Value) int64 {
	var dims []graph.Dim
	switch {
	case v.Const != nil:
		d := v.Const.Dims()
		if len(d) > 0 {
			return d[len(d)-1]
		}
		return -1
	case v.Type != nil:
		var ok bool
		if dims, ok = v.Type.Shape(); !ok || len(dims) == 0 {
			return -1
		}
	default:
		return -1
	}
	if d := dims[len(dims)-1]; d.Known {
		return d.Value
	}
	return -1
}

// rowsAt gathers the rows of a cache at the positions pos: [B, S, w] for
// positions [B, S]; for the com.microsoft offset form (one element)
// offset+0..S-1, [1, S, w]; the cache itself when there are no positions
// (it is already [B, S, w]).
func (r *Rewrite) rowsAt(cache, pos *graph.Value, seq *graph.Value, offset bool) *graph.Value {
	switch {
	case pos == nil:
		return cache
	case offset:
		first := r.op1("Reshape", []*graph.Value{r.castInt64(pos, elemType(pos)), r.ints([]int64{0})})
		s := r.op1("Reshape", []*graph.Value{seq, r.ints([]int64{0})})
		rg := r.op1("Range", []*graph.Value{first, r.op1("Add", []*graph.Value{first, s}), r.scalarInt(1)})
		return r.unsqueeze(r.op1("Gather", []*graph.Value{cache, rg}, graph.IntAttr("axis", 0)), 0)
	default:
		return r.op1("Gather", []*graph.Value{cache, r.castInt64(pos, elemType(pos))}, graph.IntAttr("axis", 0))
	}
}

// rotate writes the rotation of x (last axis the head) by c and s, shaped
// to broadcast against x's rows; rd is the rotated part (0: all).
func (r *Rewrite) rotate(x, c, s *graph.Value, rd int64, interleaved bool) *graph.Value {
	last := graph.IntAttr("axis", -1)
	xr, xp := x, (*graph.Value)(nil)
	if rd > 0 {
		xr = r.op1("Slice", []*graph.Value{x, r.vecInt(0), r.vecInt(rd), r.vecInt(-1)})
		xp = r.op1("Slice", []*graph.Value{x, r.vecInt(rd), r.vecInt(1 << 62), r.vecInt(-1)})
	}
	combine := func(x1, x2 *graph.Value) (*graph.Value, *graph.Value) {
		y1 := r.op1("Sub", []*graph.Value{r.op1("Mul", []*graph.Value{x1, c}), r.op1("Mul", []*graph.Value{x2, s})})
		y2 := r.op1("Add", []*graph.Value{r.op1("Mul", []*graph.Value{x1, s}), r.op1("Mul", []*graph.Value{x2, c})})
		return y1, y2
	}
	var y *graph.Value
	shape := r.op1("Shape", []*graph.Value{xr})
	if interleaved {
		lead := r.op1("Slice", []*graph.Value{shape, r.vecInt(0), r.vecInt(-1), r.vecInt(0)})
		pairs := r.op1("Concat", []*graph.Value{lead, r.vecInt(-1, 2)}, graph.IntAttr("axis", 0))
		xp2 := r.op1("Reshape", []*graph.Value{xr, pairs})
		x1 := r.op1("Gather", []*graph.Value{xp2, r.scalarInt(0)}, last)
		x2 := r.op1("Gather", []*graph.Value{xp2, r.scalarInt(1)}, last)
		y1, y2 := combine(x1, x2)
		st := r.op1("Concat", []*graph.Value{r.unsqueeze(y1, -1), r.unsqueeze(y2, -1)}, last)
		y = r.op1("Reshape", []*graph.Value{st, shape})
	} else {
		d := r.op1("Slice", []*graph.Value{shape, r.vecInt(-1), r.vecInt(1 << 62), r.vecInt(0)})
		half := r.op1("Div", []*graph.Value{d, r.vecInt(2)})
		x1 := r.op1("Slice", []*graph.Value{xr, r.vecInt(0), half, r.vecInt(-1)})
		x2 := r.op1("Slice", []*graph.Value{xr, half, r.vecInt(1 << 62), r.vecInt(-1)})
		y1, y2 := combine(x1, x2)
		y = r.op1("Concat", []*graph.Value{y1, y2}, last)
	}
	if xp != nil {
		y = r.op1("Concat", []*graph.Value{y, xp}, last)
	}
	return y
}

// unfuseRotary lowers one RotaryEmbedding node.
func (r *Rewrite) unfuseRotary(n *graph.Node) error {
	f, err := rotaryOf(n)
	if err != nil {
		return err
	}
	rank := r.rank(f.x)
	offset := false
	if f.ms {
		pr := r.rank(f.pos)
		if pr < 0 && f.pos.Const != nil {
			pr = len(f.pos.Const.Dims())
		}
		if pr < 0 {
			return fmt.Errorf("%w: the rank of position_ids %q is not known (a (batch, seq) tensor or a one-element offset)", ErrRewrite, f.pos.Name)
		}
		offset = pr <= 1
	}
	out := n.Output(0)
	dt := elemType(f.x)
	switch rank {
	case 4:
		// [B, heads, S, head]: cos/sin rows [B|1, S, w] -> [B|1, 1, S, w].
		seq := r.dimOf(f.x, 2)
		c := r.unsqueeze(r.rowsAt(f.cos, f.pos, seq, offset), 1)
		s := r.unsqueeze(r.rowsAt(f.sin, f.pos, seq, offset), 1)
		y := r.rotate(f.x, c, s, f.rd, f.interleaved)
		typed(y, dt, 4)
		out.ReplaceKeepingName(y)
	case 3:
		// [B, S, hidden]: heads split off, rotated, joined again.
		var split *graph.Value
		switch {
		case f.heads > 0:
			split = r.vecInt(0, 0, f.heads, -1)
		case f.rd == 0 && width(f.cos) > 0:
			split = r.vecInt(0, 0, -1, 2*width(f.cos))
		default:
			return fmt.Errorf("%w: a 3-D input without num_heads", ErrRewrite)
		}
		seq := r.dimOf(f.x, 1)
		x4 := r.op1("Reshape", []*graph.Value{f.x, split})
		c := r.unsqueeze(r.rowsAt(f.cos, f.pos, seq, offset), 2)
		s := r.unsqueeze(r.rowsAt(f.sin, f.pos, seq, offset), 2)
		y := r.op1("Reshape", []*graph.Value{r.rotate(x4, c, s, f.rd, f.interleaved), r.shapeOf(f.x)})
		typed(y, dt, 3)
		out.ReplaceKeepingName(y)
	default:
		return fmt.Errorf("%w: the input %q has rank %d (not 3 or 4, or unknown)", ErrRewrite, f.x.Name, rank)
	}
	return nil
}

// unfuseGQARotary moves GroupQueryAttention's rotary out of the op.
func (r *Rewrite) unfuseGQARotary(n *graph.Node) error {
	query, key := n.Input(0), n.Input(1)
	cos, sin := n.Input(7), n.Input(8)
	seqlens, total := n.Input(5), n.Input(6)
	if cos == nil || sin == nil || seqlens == nil || total == nil {
		return fmt.Errorf("%w: do_rotary without cos/sin caches, seqlens_k or total_sequence_length", ErrRewrite)
	}
	nq, nkv := n.AttrInt("num_heads", 0), n.AttrInt("kv_num_heads", 0)
	if nq <= 0 || nkv <= 0 {
		return fmt.Errorf("%w: num_heads %d, kv_num_heads %d", ErrRewrite, nq, nkv)
	}
	il := n.AttrInt("rotary_interleaved", 0) == 1
	rd := int64(0)
	if w := width(cos); w > 0 {
		rd = 2 * w
	} else {
		return fmt.Errorf("%w: the width of cos_cache %q is not known", ErrRewrite, cos.Name)
	}
	// Positions [B, S]: the op's position_ids, else 0..S-1 on the first
	// prompt (S = total) and seqlens_k+1-S+s after a past.
	seq := r.dimOf(query, 1)
	var pos *graph.Value
	if p := n.Input(9); p != nil {
		pos = r.castInt64(p, elemType(p))
	} else {
		s := r.op1("Reshape", []*graph.Value{seq, r.ints([]int64{0})})
		ar := r.op1("Range", []*graph.Value{r.scalarInt(0), s, r.scalarInt(1)})
		sl := r.op1("Cast", []*graph.Value{seqlens}, graph.IntAttr("to", int64(graph.Int64)))
		off := r.op1("Sub", []*graph.Value{r.op1("Add", []*graph.Value{sl, r.scalarInt(1)}), s})
		decode := r.op1("Add", []*graph.Value{r.unsqueeze(off, 1), r.unsqueeze(ar, 0)})
		tot := r.op1("Cast", []*graph.Value{total}, graph.IntAttr("to", int64(graph.Int64)))
		first := r.op1("Equal", []*graph.Value{r.op1("Reshape", []*graph.Value{tot, r.ints([]int64{0})}), s})
		prompt := r.op1("Expand", []*graph.Value{r.unsqueeze(ar, 0), r.op1("Shape", []*graph.Value{decode})})
		pos = r.op1("Where", []*graph.Value{first, prompt, decode})
	}
	c := r.unsqueeze(r.op1("Gather", []*graph.Value{cos, pos}, graph.IntAttr("axis", 0)), 2)
	s := r.unsqueeze(r.op1("Gather", []*graph.Value{sin, pos}, graph.IntAttr("axis", 0)), 2)
	rot := func(x *graph.Value, heads int64) *graph.Value {
		x4 := r.op1("Reshape", []*graph.Value{x, r.vecInt(0, 0, heads, -1)})
		return r.op1("Reshape", []*graph.Value{r.rotate(x4, c, s, rd, il), r.shapeOf(x)})
	}
	if key == nil {
		// Packed QKV: rotate the q and k heads, keep v.
		h := width(query)
		if h <= 0 || h%(nq+2*nkv) != 0 {
			return fmt.Errorf("%w: the packed QKV width of %q is not known", ErrRewrite, query.Name)
		}
		hd := h / (nq + 2*nkv)
		parts := r.op("Split", "", []*graph.Value{query, r.vecInt(nq*hd, nkv*hd, nkv*hd)}, 3, graph.IntAttr("axis", -1))
		if r.opset() < 13 {
			parts = r.op("Split", "", []*graph.Value{query}, 3, graph.IntAttr("axis", -1), graph.IntsAttr("split", nq*hd, nkv*hd, nkv*hd))
		}
		q := r.op1("Concat", []*graph.Value{rot(parts[0], nq), rot(parts[1], nkv), parts[2]}, graph.IntAttr("axis", -1))
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

// unfuseALiBi lowers one ALiBiBias node: [1, heads, q, k].
func (r *Rewrite) unfuseALiBi(n *graph.Node) error {
	slopes, ql, kl := n.Input(0), n.Input(1), n.Input(2)
	dt := elemType(slopes)
	if !dt.IsFloat() {
		return fmt.Errorf("%w: the type of the slopes %q is not known", ErrRewrite, slopes.Name)
	}
	k := r.op1("Reshape", []*graph.Value{r.castInt64(kl, elemType(kl)), r.ints([]int64{0})})
	q := r.op1("Reshape", []*graph.Value{r.castInt64(ql, elemType(ql)), r.ints([]int64{0})})
	cast := func(v *graph.Value) *graph.Value {
		return r.op1("Cast", []*graph.Value{v}, graph.IntAttr("to", int64(dt)))
	}
	sl := r.op1("Reshape", []*graph.Value{slopes, r.vecInt(1, -1, 1, 1)})
	j := r.op1("Range", []*graph.Value{r.scalarInt(0), k, r.scalarInt(1)})
	var bias *graph.Value
	if n.AttrInt("symmetric", 0) == 1 {
		// -slope·|pos_i - j|, pos_i = k - q + i.
		i := r.op1("Range", []*graph.Value{r.op1("Sub", []*graph.Value{k, q}), k, r.scalarInt(1)})
		d := r.op1("Abs", []*graph.Value{r.op1("Sub", []*graph.Value{r.unsqueeze(i, 1), r.unsqueeze(j, 0)})})
		bias = r.op1("Neg", []*graph.Value{r.op1("Mul", []*graph.Value{sl, r.unsqueeze(cast(d), 0, 1)})})
	} else {
		// slope·(j - (k - 1)), the same for every query row.
		d := r.op1("Sub", []*graph.Value{j, r.op1("Sub", []*graph.Value{k, r.scalarInt(1)})})
		row := r.op1("Mul", []*graph.Value{sl, r.unsqueeze(cast(d), 0, 1, 2)})
		full := r.op1("Concat", []*graph.Value{r.vecInt(1), r.op1("Shape", []*graph.Value{slopes}), r.op1("Reshape", []*graph.Value{q, r.vecInt(1)}), r.op1("Reshape", []*graph.Value{k, r.vecInt(1)})}, graph.IntAttr("axis", 0))
		bias = r.op1("Expand", []*graph.Value{row, full})
	}
	typed(bias, dt, 4)
	n.Output(0).ReplaceKeepingName(bias)
	return nil
}

// convertRotary replaces a RotaryEmbedding node of one domain by the
// other's: the inputs in the other order, the positions in the form the
// other takes ((batch, seq) for the ONNX op; the com.microsoft op needs
// position_ids, so caches given per token become rows numbered by
// them), the attributes both share.
func (r *Rewrite) convertRotary(n *graph.Node, toONNX bool) error {
	f, err := rotaryOf(n)
	if err != nil {
		return err
	}
	rank := r.rank(f.x)
	if rank != 3 && rank != 4 {
		return fmt.Errorf("%w: the input %q has rank %d (not 3 or 4, or unknown)", ErrRewrite, f.x.Name, rank)
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
	bs := r.dimOf(f.x, 0, seqAxis)
	var y *graph.Value
	if toONNX {
		pos := f.pos
		pr := r.rank(pos)
		if pr < 0 && pos.Const != nil {
			pr = len(pos.Const.Dims())
		}
		switch {
		case pr < 0:
			return fmt.Errorf("%w: the rank of position_ids %q is not known (a (batch, seq) tensor or a one-element offset)", ErrRewrite, pos.Name)
		case pr <= 1:
			// The offset form: offset + 0..S-1 for every row.
			first := r.op1("Reshape", []*graph.Value{r.castInt64(pos, elemType(pos)), r.ints([]int64{0})})
			s := r.op1("Reshape", []*graph.Value{r.dimOf(f.x, seqAxis), r.ints([]int64{0})})
			rg := r.op1("Range", []*graph.Value{first, r.op1("Add", []*graph.Value{first, s}), r.scalarInt(1)})
			pos = r.op1("Expand", []*graph.Value{r.unsqueeze(rg, 0), bs})
		default:
			pos = r.castInt64(pos, elemType(pos))
		}
		y = r.op("RotaryEmbedding", "", []*graph.Value{f.x, f.cos, f.sin, pos}, 1, attrs...)[0]
	} else {
		cos, sin, pos := f.cos, f.sin, f.pos
		if pos == nil {
			// Caches (batch, seq, w): rows b·S+s.
			w := width(cos)
			if w <= 0 {
				return fmt.Errorf("%w: the width of the caches %q is not known", ErrRewrite, cos.Name)
			}
			cos = r.op1("Reshape", []*graph.Value{cos, r.vecInt(-1, w)})
			sin = r.op1("Reshape", []*graph.Value{sin, r.vecInt(-1, w)})
			n := r.op1("ReduceProd", []*graph.Value{bs}, graph.IntAttr("keepdims", 0))
			pos = r.op1("Reshape", []*graph.Value{r.op1("Range", []*graph.Value{r.scalarInt(0), n, r.scalarInt(1)}), bs})
		}
		if f.rd > 0 && f.heads == 0 && rank == 3 {
			return fmt.Errorf("%w: com.microsoft RotaryEmbedding needs num_heads with rotary_embedding_dim on a 3-D input", ErrRewrite)
		}
		y = r.op("RotaryEmbedding", DomainMicrosoft, []*graph.Value{f.x, r.castInt64(pos, elemType(pos)), cos, sin}, 1, attrs...)[0]
	}
	typed(y, elemType(f.x), rank)
	n.Output(0).ReplaceKeepingName(y)
	return nil
}
