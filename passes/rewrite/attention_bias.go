package rewrite

import (
	"errors"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/work"
)

// OpName is the fused attention op --attention fused writes: com.microsoft
// GroupQueryAttention, or with --rope-op onnx Attention of opset 23.
func (r *Rewrite) OpName() string {
	if r.Opts.RoPEOp == passes.RoPEOpONNX {
		return "Attention (opset 23)"
	}
	return "GroupQueryAttention"
}

// FuseBiased fuses, with --attention fused, the blocks whose scores a
// scheme biases by an additive term (ALiBi's, T5's: bias[layer], a value
// of the working copy added to the layer's scores): each block the op
// expresses (ReadAttention, with the bias beside the masks) and the check
// on numbers confirms becomes one op whose mask input (attention_bias,
// attn_mask) is the sum of the bias and the masks, as the model adds
// them. what names the bias in the notes. Blocks left keep the bias as
// the scheme's pass rewrote it, with the reason per layer (layers are the
// finding's). It returns the layers fused.
func (r *Rewrite) FuseBiased(w *work.Work, ch *Change, blocks []*attn.Block, sides map[*attn.Block]*attn.BlockSides,
	layers []int, bias map[int]*graph.Value, what string) ([]int, error) {
	if r.Opts.Attention != passes.AttentionFused {
		return nil, nil
	}
	onnx := r.Opts.RoPEOp == passes.RoPEOpONNX
	if !onnx {
		// GroupQueryAttention is causal only (T5's encoder is not, its
		// decoder's causal mask is inside the bias) and takes heads of a
		// multiple of 8 (the corpus's MPT has 4); no model it would take
		// here runs in ONNX Runtime to check it there.
		ch.Note("attention not fused into GroupQueryAttention: %s is fused with --rope-op onnx only, into Attention of opset 23", what)
		return nil, nil
	}
	for _, l := range layers {
		if _, ok := bias[l]; !ok {
			ch.Note("layer %d: attention not fused into %s: %s added to its scores is not found; the block is kept", l, r.OpName(), what)
		}
	}
	var fused []int
	for _, b := range blocks {
		v, ok := bias[b.Index]
		if !ok || slices.Contains(fused, b.Index) {
			continue
		}
		a, err := ReadAttention(w, b, sides[b], false, onnx, v)
		if err == nil {
			err = a.Check(w, nil)
		}
		if err == nil {
			err = r.Fuse(w, a, nil)
		}
		switch {
		case err == nil:
			fused = append(fused, b.Index)
		case errors.Is(err, ErrRewrite):
			ch.Note("layer %d: attention not fused into %s: %s; the block is kept", b.Index, r.OpName(), Reason(err))
		default:
			return nil, err
		}
	}
	if len(fused) > 0 {
		slices.Sort(fused)
		mask := "attention_bias"
		if onnx {
			mask = "attn_mask"
		}
		ch.Note("layers %v: attention fused into %s (%s added to the masks as its %s)", fused, r.OpName(), what, mask)
	}
	return fused, nil
}
