package rope

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/work"
)

// RewriteMRoPE stores the cos and sin of multimodal RoPE.
var RewriteMRoPE = &passes.Pass[*rewrite.Change]{
	Name: "rewrite_mrope",
	Doc: `Replace the cos and sin of multimodal RoPE by tables gathered at the position ids.

M-RoPE's [streams, batch, seq] position ids turn every frequency on
every stream before the sections are taken; the cos and sin of positions
0..N-1 (N is --max-positions, else 4096) are what the model computes
(evaluated with the positions replaced, the same on every stream), and
one Gather per table at the position ids gives the [streams, batch, seq,
dim] values the model computed. The sections stay as the model takes
them. (RotaryEmbedding turns every pair with one position: M-RoPE is not
fused.)`,
	Requires: []passes.Analyzer{work.Normalize, Detect, rewrite.Edit},
	Run: func(c *passes.Context) (*rewrite.Change, error) {
		r := rewrite.Of(c)
		return r.Findings(c, rewrite.Findings{Pass: "rewrite_mrope", Scheme: Name, Detect: Detect,
			Want: func(f *passes.Finding) bool { p, ok := f.Params.(*Params); return ok && p.MultimodalSections != nil },
			Do:   func(w *work.Work, f *passes.Finding, _ *rewrite.Change) error { return mrope(r, w, f) }})
	},
}

// mrope stores the cos and sin of a multimodal rotation.
func mrope(r *rewrite.Rewrite, w *work.Work, f *passes.Finding) error {
	ev, ok := f.Evidence.(*Evidence)
	if !ok || ev.Synthetic || len(ev.Blocks) == 0 {
		return fmt.Errorf("%w: no measured rotation", rewrite.ErrRewrite)
	}
	var pos []*graph.Value
	for _, b := range ev.Blocks {
		for _, name := range append(append([]string(nil), b.Q.Pos...), b.K.Pos...) {
			if v := rewrite.WorkValue(w, name); v != nil {
				pos = append(pos, v)
			}
		}
	}
	// The Cos and Sin reading angles of the positions input alone.
	var in *graph.Value
	var trig []*graph.Node
	for _, n := range w.Cone(pos...) {
		for _, x := range n.Inputs() {
			if x != nil && x.Producer() == nil && w.Role(x) == work.RolePositions {
				in = x
			}
		}
		if n.OpType == "Cos" || n.OpType == "Sin" {
			trig = append(trig, n)
		}
	}
	if in == nil || len(trig) == 0 || w.Shape(in).Rank() != 3 || !w.Shape(in).Dims[0].Known() {
		return fmt.Errorf("%w: the cos and sin are not computed from [streams, batch, seq] position ids", rewrite.ErrRewrite)
	}
	streams := int(w.Shape(in).Dims[0])
	n := r.MaxPositions()
	vals := make([]float64, streams*n)
	for i := range vals {
		vals[i] = float64(i % n)
	}
	cut := probe.FromFloat64Any(w.ElemType(in), []int{streams, 1, n}, vals)
	for _, tn := range trig {
		pr := probe.NewProbe(w, 1, n, 0)
		pr.Budget = 1 << 20
		pr.SetCuts(map[*graph.Value]*kernels.Tensor{in: cut})
		t, err := pr.Value(tn.Output(0))
		if err != nil {
			return fmt.Errorf("%w: evaluating %s at positions 0..%d: %v", rewrite.ErrRewrite, tn.OpType, n-1, err)
		}
		if t.Rank() != 4 || t.Shape[0] != streams || t.Shape[2] != n {
			return fmt.Errorf("%w: %s at %d positions has shape %v", rewrite.ErrRewrite, tn.OpType, n, t.Shape)
		}
		x := t.Float64s()
		d := t.Shape[3]
		per := len(x) / streams
		for s := 1; s < streams; s++ {
			for i := 0; i < per; i++ {
				if math.Abs(x[s*per+i]-x[i]) > 0 {
					return fmt.Errorf("%w: the streams' %s differ at equal positions", rewrite.ErrRewrite, tn.OpType)
				}
			}
		}
		dt := w.ElemType(tn.Output(0))
		tab, err := r.Table("onnxpe_mrope_"+map[string]string{"Cos": "cos", "Sin": "sin"}[tn.OpType], dt, []int64{int64(n), int64(d)}, x[:per])
		if err != nil {
			return err
		}
		om, err := r.Lookup(rewrite.MainName(w, tn.Output(0)))
		if err != nil {
			return err
		}
		im, err := r.Lookup(rewrite.MainName(w, in))
		if err != nil {
			return err
		}
		om.ReplaceKeepingName(rewrite.Typed(r.Op1("Gather", []*graph.Value{tab, r.CastInt64(im, w.ElemType(in))}, graph.IntAttr("axis", 0)), dt, 4))
	}
	return nil
}

// RewriteAxial stores the cos and sin that axial 2-D RoPE computes from a
// fixed patch grid.
var RewriteAxial = &passes.Pass[*rewrite.Change]{
	Name: "rewrite_axial_rope",
	Doc: `Replace the cos and sin that axial 2-D RoPE computes from a fixed patch grid by constants.

A ViT of fixed image size computes the rows and columns of its patch
grid (t / cols and t % cols, or a meshgrid of two Ranges), their angles
and the cos and sin the rotation reads from shapes and weights alone:
each such value is the model's own subgraph evaluated with the kernels
(normalisation folds it), stored as a constant over the grid's cells,
and what computed it is removed. The grid is the image's: --max-positions
does not apply. Cos and sin the model already stores are left.`,
	Requires: []passes.Analyzer{work.Normalize, Detect, rewrite.Edit},
	Run: func(c *passes.Context) (*rewrite.Change, error) {
		r := rewrite.Of(c)
		return r.Findings(c, rewrite.Findings{Pass: "rewrite_axial_rope", Scheme: Name, Detect: Detect,
			Want: func(f *passes.Finding) bool { p, ok := f.Params.(*Params); return ok && p.Axes == 2 },
			Do:   func(w *work.Work, f *passes.Finding, ch *rewrite.Change) error { return axial(r, w, f, ch) }})
	},
}

// computesTrig reports whether one of nodes is a Sin or Cos.
func computesTrig(nodes []*graph.Node) bool {
	for _, n := range nodes {
		if n.OpType == "Sin" || n.OpType == "Cos" {
			return true
		}
	}
	return false
}

// axial stores the cos and sin of a rotation over a fixed grid.
func axial(r *rewrite.Rewrite, w *work.Work, f *passes.Finding, ch *rewrite.Change) error {
	ev, ok := f.Evidence.(*Evidence)
	p := f.Params.(*Params)
	if !ok || ev.Synthetic || len(ev.Blocks) == 0 {
		return fmt.Errorf("%w: no measured rotation over a grid", rewrite.ErrRewrite)
	}
	if len(p.Grid) != 2 {
		return fmt.Errorf("%w: grid null: the patch grid follows the image's size, so its cos and sin are computed for every call; there is no fixed grid whose cos and sin could be stored", rewrite.ErrRewrite)
	}
	// The values entering the rotations that the graph computes with Sin
	// or Cos; indices computed from shapes (the q[:, :, 1:] assignment of
	// an export) are not cos and sin.
	var vals []*graph.Value
	seen := map[string]bool{}
	for _, b := range ev.Blocks {
		for _, s := range []*attn.Side{b.Q.side, b.K.side} {
			if s == nil {
				continue
			}
			for _, v := range s.Pos {
				switch {
				case !w.IsConst(v):
					if computesTrig(w.Cone(v)) {
						return fmt.Errorf("%w: the cos and sin follow the image's size (%s is computed for every call): no fixed grid to store", rewrite.ErrRewrite, w.Name(v))
					}
				case computesTrig(w.FoldedNodes(v)):
					if name := rewrite.MainName(w, v); name != "" && !seen[name] {
						seen[name] = true
						vals = append(vals, v)
					}
				}
			}
		}
	}
	if len(vals) == 0 {
		return fmt.Errorf("%w: the cos and sin of the %d x %d grid are stored already (nothing computes them)", rewrite.ErrRewrite, p.Grid[0], p.Grid[1])
	}
	for _, v := range vals {
		gt, err := w.Const(v).ToGraph("onnxpe_axial_rope")
		if err != nil {
			return err
		}
		c, err := r.AddConst(gt)
		if err != nil {
			return err
		}
		vm, err := r.Lookup(rewrite.MainName(w, v))
		if err != nil {
			return err
		}
		vm.ReplaceKeepingName(c)
	}
	note := fmt.Sprintf("rope (layers %v): the %d x %d grid is the image's: the cos and sin of its cells are stored (%d constants)", f.Layers, p.Grid[0], p.Grid[1], len(vals))
	if r.Opts.MaxPositions > 0 {
		note += "; --max-positions does not apply"
	}
	ch.Note("%s", note)
	return nil
}
