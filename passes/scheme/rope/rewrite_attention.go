package rope

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/work"
)

// attentionBlocks are the model's attention blocks and their sides, for
// the fusion of whole blocks (--attention fused).
type attentionBlocks struct {
	byLayer map[int]*attn.Block
	sides   map[*attn.Block]*attn.BlockSides
}

// attentionOf is the blocks to fuse whole, nil unless --attention fused.
func attentionOf(c *passes.Context, r *rewrite.Rewrite) *attentionBlocks {
	if r.Opts.Attention != passes.AttentionFused {
		return nil
	}
	ab := &attentionBlocks{byLayer: map[int]*attn.Block{}, sides: passes.Result(c, attn.Sides)}
	for _, b := range passes.Result(c, attn.Blocks) {
		ab.byLayer[b.Index] = b
	}
	return ab
}

// fuse makes every block of f whose attention GroupQueryAttention (or,
// with --rope-op onnx, Attention of opset 23) expresses one such node (do_rotary with the caches cosV, sinV; q and k
// read before the rotation): each block is read (attention.go), checked
// on numbers against the model, and only then fused. It returns the
// layers fused; the others keep their blocks and have their rotations
// fused as without the option, with the reason noted per block.
func (ab *attentionBlocks) fuse(r *rewrite.Rewrite, w *work.Work, f *passes.Finding, ch *rewrite.Change, targets []ropeTarget,
	cosV, sinV *graph.Value, computed bool) (map[int]bool, error) {
	ev := f.Evidence.(*Evidence)
	p := f.Params.(*Params)
	done := map[int]bool{}
	var fused []int
	how := map[string]bool{}
	op := "GroupQueryAttention"
	if r.Opts.RoPEOp == passes.RoPEOpONNX {
		op = "Attention (opset 23)"
	}
	for _, layer := range layersOf(targets) {
		rot, err := ab.fuseBlock(r, w, ev, p, layer, targetsOf(targets, layer), cosV, sinV, computed)
		switch {
		case err == nil:
			done[layer] = true
			fused = append(fused, layer)
			if rot.Positions == nil {
				how["do_rotary"] = true
			} else {
				how["q and k rows turned before it by RotaryEmbedding at the model's position_ids"] = true
			}
		case errors.Is(err, rewrite.ErrRewrite):
			ch.Note("layer %d: attention not fused into %s: %s; its rotations are fused into RotaryEmbedding", layer, op, rewrite.Reason(err))
		default:
			return nil, err
		}
	}
	if len(fused) > 0 {
		hows := slices.Sorted(maps.Keys(how))
		ch.Note("layers %v: attention fused into %s (%s, %s)", fused, op, strings.Join(hows, "; "), layoutNote(p))
	}
	return done, nil
}

func layoutNote(p *Params) string {
	s := "half_split"
	if p.Layout == "interleaved" {
		s = "interleaved"
	}
	if p.RotaryDim < p.HeadDim {
		s += fmt.Sprintf(", rotary_dim %d of %d", p.RotaryDim, p.HeadDim)
	}
	return s
}

func layersOf(ts []ropeTarget) []int {
	var out []int
	for _, t := range ts {
		if !slices.Contains(out, t.layer) {
			out = append(out, t.layer)
		}
	}
	return out
}

func targetsOf(ts []ropeTarget, layer int) []ropeTarget {
	var out []ropeTarget
	for _, t := range ts {
		if t.layer == layer {
			out = append(out, t)
		}
	}
	return out
}

// fuseBlock reads, checks and fuses one block.
func (ab *attentionBlocks) fuseBlock(r *rewrite.Rewrite, w *work.Work, ev *Evidence, p *Params, layer int, ts []ropeTarget,
	cosV, sinV *graph.Value, computed bool) (*rewrite.Rotary, error) {
	b := ab.byLayer[layer]
	switch {
	case computed || cosV == nil:
		return nil, fmt.Errorf("%w: the cos/sin depend on more than the positions (%s): the op reads caches by position", rewrite.ErrRewrite, ev.PositionsWhy)
	case b == nil || len(ts) != 2:
		return nil, fmt.Errorf("%w: the block does not rotate both q and k", rewrite.ErrRewrite)
	case ev.Positions == nil:
		return nil, fmt.Errorf("%w: where the positions are read is not known", rewrite.ErrRewrite)
	}
	a, err := rewrite.ReadAttention(w, b, ab.sides[b], true, r.Opts.RoPEOp == passes.RoPEOpONNX)
	if err != nil {
		return nil, err
	}
	if a.Q != ts[0].work.In && a.Q != ts[1].work.In || a.K != ts[0].work.In && a.K != ts[1].work.In {
		return nil, fmt.Errorf("%w: the rotations are not those of the block's q and k", rewrite.ErrRewrite)
	}
	rot, err := gqaRotary(r, w, ev, p, ts, cosV, sinV, a.PastK != nil, a.ONNX)
	if err != nil {
		return nil, err
	}
	if r.Opts.AddKVCache && a.PastK == nil && rot.Positions != nil && (ev.Positions.Value == "" || ev.Positions.Ranged) {
		// With a cache the new tokens sit after the past: positions the
		// graph counts from 0 become the cache's length onwards; others
		// it computes (from a constant start) are refused.
		if !ownPositions(ev.Positions, p, false) {
			return nil, fmt.Errorf("%w: a KV cache cannot be added: the positions are computed in the graph from another start than 0; they must be given (position_ids) or counted from 0", rewrite.ErrRewrite)
		}
		rot.FromCache = true
	}
	if err := a.Check(w, rot); err != nil {
		return nil, err
	}
	return rot, r.Fuse(w, a, rot)
}

// gqaRotary is the op's rotary: the finding's caches, layout and positions
// (always position_ids for the opset-23 Attention, onnx, which does not
// rotate).
func gqaRotary(r *rewrite.Rewrite, w *work.Work, ev *Evidence, p *Params, ts []ropeTarget, cosV, sinV *graph.Value, cached, onnx bool) (*rewrite.Rotary, error) {
	if p.RotaryDim%2 != 0 || p.RotaryDim > p.HeadDim {
		return nil, fmt.Errorf("%w: rotary_dim %d of head %d", rewrite.ErrRewrite, p.RotaryDim, p.HeadDim)
	}
	cs, err := kernels.FromGraph(cosV.Const)
	if err != nil {
		return nil, err
	}
	sn, err := kernels.FromGraph(sinV.Const)
	if err != nil {
		return nil, err
	}
	rot := &rewrite.Rotary{Interleaved: p.Layout == "interleaved", RotaryDim: p.RotaryDim, HeadDim: p.HeadDim, Cos: cs, Sin: sn, CosV: cosV, SinV: sinV}
	// ONNX Runtime's GroupQueryAttention rotates by caches of a multiple
	// of 8 columns only (rotary_dim/2; it refuses others when it runs):
	// other rotations turn q and k before it by RotaryEmbedding.
	if !onnx && ownPositions(ev.Positions, p, cached) && (p.RotaryDim/2)%8 == 0 {
		return rot, nil
	}
	q := ts[0] // batch and sequence of the block's q or k: the same
	rot.Positions = func(pr *probe.Probe) ([]float64, error) { return probe.PositionsIn(w, pr, ev.Positions) }
	rot.PositionIDs = func() (*graph.Value, error) { return positionIDs(r, w, ev.Positions, q, ev.Axis, true) }
	return rot, nil
}

// ownPositions reports whether the rotation's positions are those the op
// counts itself: from the length of the KV cache, or 0..S-1 in a model
// without one. The block's check confirms it.
func ownPositions(pos *probe.Positions, p *Params, cached bool) bool {
	if p.PositionSource == "past_length" {
		return cached
	}
	return !cached && (pos.Value == "" || pos.Ranged) && pos.Start == "" && pos.StartConst == 0
}
