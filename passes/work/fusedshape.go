package work

import (
	"github.com/onnxpe/onnxpe/graph"
)

// inferFused sets the shapes of the outputs of fused attention and
// position ops from their contracts (ONNX's Attention and FlexAttention,
// ONNX Runtime's ContribOperators.md), so that the blocks after them keep
// shapes the probes can bind. It reports whether it knew the op; outputs
// it cannot work out keep their declared shapes.
func (w *Work) inferFused(n *graph.Node, set func(int, Shape), in func(int) Shape) bool {
	declared := func() {
		for i, o := range n.Outputs() {
			set(i, w.declaredShape(o.Type))
		}
	}
	mul := func(a, b Dim) Dim {
		if a.Known() && b.Known() {
			return a * b
		}
		return w.Syms.fresh()
	}
	div := func(a Dim, b int64) (Dim, bool) {
		if a.Known() && b > 0 && int64(a)%b == 0 {
			return Dim(int64(a) / b), true
		}
		return 0, false
	}
	heads := func(attr string) int64 { return n.AttrInt(attr, 0) }
	switch OpKey(n) {
	case ".Attention":
		q, k, v := in(0), in(1), in(2)
		declared()
		switch {
		case q.Rank() == 4 && v.Rank() == 4:
			set(0, ranked(q.Dims[0], q.Dims[1], q.Dims[2], v.Dims[3]))
		case q.Rank() == 3 && v.Rank() == 3:
			vh, ok := div(v.Last(), heads("kv_num_heads"))
			if !ok {
				return true
			}
			set(0, ranked(q.Dims[0], q.Dims[1], mul(Dim(heads("q_num_heads")), vh)))
		}
		_ = k
	case "ai.onnx.preview.FlexAttention":
		q, k, v := in(0), in(1), in(2)
		declared()
		if q.Rank() == 4 && v.Rank() == 4 {
			set(0, ranked(q.Dims[0], q.Dims[1], q.Dims[2], v.Dims[3]))
		}
		// The modifier graphs read the scores (batch, heads, query, key):
		// their input takes those sizes, before the graphs are folded.
		if q.Rank() == 4 && k.Rank() == 4 {
			for _, name := range []string{"score_mod", "mask_mod", "prob_mod"} {
				if a := n.Attr(name); a != nil && a.Graph != nil && len(a.Graph.Inputs) == 1 {
					w.shapes.set(a.Graph.Inputs[0], ranked(q.Dims[0], q.Dims[1], q.Dims[2], k.Dims[2]))
				}
			}
		}
	case "com.microsoft.MultiHeadAttention", "com.microsoft.PackedMultiHeadAttention":
		q, v := in(0), in(2)
		declared()
		nh := Dim(heads("num_heads"))
		switch {
		case q.Rank() == 5: // packed QKV (B, S, N, 3, H)
			set(0, ranked(q.Dims[0], q.Dims[1], mul(q.Dims[2], q.Dims[4])))
		case q.Rank() == 3 && v.Rank() == 3:
			set(0, ranked(q.Dims[0], q.Dims[1], v.Dims[2]))
		case q.Rank() == 3 && v.Rank() == 4:
			set(0, ranked(q.Dims[0], q.Dims[1], mul(nh, v.Dims[3])))
		case q.Rank() == 3 && in(1).Rank() == 5: // packed KV: Dv = D
			set(0, q)
		case q.Rank() == 2: // packed tokens (T, D)
			set(0, q)
		}
	case "com.microsoft.GroupQueryAttention", "com.microsoft.SparseAttention", "com.microsoft.PagedAttention":
		q := in(0)
		declared()
		nq, nkv := heads("num_heads"), heads("kv_num_heads")
		if q.Rank() != 3 && q.Rank() != 2 {
			return true
		}
		hid := q.Last()
		if len(n.Inputs()) < 2 || n.Input(1) == nil { // packed QKV
			if h, ok := div(hid, nq+2*nkv); ok {
				hid = mul(Dim(nq), h)
			} else {
				hid = w.Syms.fresh()
			}
		}
		d := append([]Dim{}, q.Dims...)
		d[len(d)-1] = hid
		set(0, ranked(d...))
	case "com.microsoft.Attention", "com.microsoft.DecoderMaskedSelfAttention", "com.microsoft.PackedAttention",
		"com.microsoft.QAttention", "com.microsoft.LongformerAttention":
		x, wt := in(0), in(1)
		declared()
		if x.Rank() < 2 || wt.Rank() != 2 {
			return true
		}
		vh := w.Syms.fresh()
		if sz := n.AttrInts("qkv_hidden_sizes"); len(sz) == 3 {
			vh = Dim(sz[2])
		} else if d, ok := div(wt.Dims[1], 3); ok {
			vh = d
		}
		d := append([]Dim{}, x.Dims...)
		d[len(d)-1] = vh
		set(0, ranked(d...))
	case "com.microsoft.DecoderMaskedMultiHeadAttention":
		q, v := in(0), in(2)
		declared()
		switch {
		case q.Rank() == 3 && v.Rank() == 3:
			set(0, ranked(q.Dims[0], q.Dims[1], v.Dims[2]))
		case q.Rank() == 3:
			set(0, q)
		}
	case "com.microsoft.EmbedLayerNormalization":
		ids, word := in(0), in(2)
		declared()
		if ids.Rank() == 2 && word.Rank() == 2 {
			x := ranked(ids.Dims[0], ids.Dims[1], word.Dims[1])
			set(0, x)
			set(1, ranked(ids.Dims[0]))
			set(2, x)
		}
	case "com.microsoft.RelativePositionBias", "ai.onnxpe.ALiBiBias":
		t := in(0)
		declared()
		nh := t.Last()
		if OpKey(n) == "ai.onnxpe.ALiBiBias" {
			if t.Rank() != 1 {
				return true
			}
		} else if t.Rank() != 2 {
			return true
		}
		ql, qok := w.Partial(n.Input(1))
		kl, kok := w.Partial(n.Input(2))
		qd, kd := w.Syms.fresh(), w.Syms.fresh()
		if qok && len(ql) == 1 {
			qd = ql[0]
		}
		if kok && len(kl) == 1 {
			kd = kl[0]
		}
		set(0, ranked(1, nh, qd, kd))
	case "com.microsoft.GatedRelativePositionBias":
		q, rel := in(0), in(2)
		declared()
		if q.Rank() == 3 && rel.Rank() == 4 {
			set(0, ranked(q.Dims[0], rel.Dims[1], rel.Dims[2], rel.Dims[3]))
		}
	case "com.microsoft.MatMulNBits":
		// A (..., K) times the quantized (N, K) weight: (..., N).
		a := in(0)
		declared()
		if nn := n.AttrInt("N", 0); a.Rank() >= 1 && nn > 0 {
			d := append([]Dim{}, a.Dims...)
			d[len(d)-1] = Dim(nn)
			set(0, ranked(d...))
		}
	default:
		return false
	}
	return true
}
