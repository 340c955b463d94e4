package passes

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// Rewrites of the family (issue 14): what depends only on positions
// becomes a constant sized by --max-positions, computed by the model's own
// subgraph with the positions replaced, and read back where the model
// computed it.

// RewriteRelSin stores the relative sinusoid of Transformer-XL and XLNet.
var RewriteRelSin = &Pass{
	Name: "rewrite_relative_sinusoidal",
	Doc: `Replace the relative sinusoid (sin and cos of distance·frequency) by a table gathered at the distances.

The sinusoid of every distance -N..N (N is --max-positions, else 4096) is
what the model's own subgraph computes from the distances (evaluated with
the kernels, the distances replaced): a constant [2N+1, dim] table,
gathered at distance + N where the model computed sin and cos. The
distances themselves (a Range, clamp_len's Clip) stay in the graph.`,
	Requires: []*Pass{Normalize, RelativeSinusoidalPass, Edit},
	Run: func(c *Context) (any, error) {
		r := c.rewrite()
		return r.findingsPass(c, "rewrite_relative_sinusoidal", RelativeSinusoidal, RelativeSinusoidalPass, nil,
			func(w *Work, f *Finding, _ *Change) error { return r.relSin(w, f) })
	},
}

// RewriteDisentangled stores DeBERTa's bucket function.
var RewriteDisentangled = &Pass{
	Name: "rewrite_disentangled",
	Doc: `Replace DeBERTa's log-bucket computation by a table gathered at q - k.

The relative position of every distance q - k from -(N-1) to N-1 (N is
--max-positions, else 4096) is what the model's own bucket function gives
(evaluated with the distances replaced): a constant table of 2N-1
entries gathered at q - k + N-1 where the model computed signs,
logarithms and ceilings. Relative positions that are not bucketed
(DeBERTa v2 with position_buckets <= 0: q - k clamped into the relative
table) are left, with that reason: a Clip is as cheap as a Gather.`,
	Requires: []*Pass{Normalize, DisentangledPass, Edit},
	Run: func(c *Context) (any, error) {
		r := c.rewrite()
		return r.findingsPass(c, "rewrite_disentangled", Disentangled, DisentangledPass, nil,
			func(w *Work, f *Finding, _ *Change) error { return r.disentangled(w, f) })
	},
}

// RewriteMRoPE stores the cos and sin of multimodal RoPE.
var RewriteMRoPE = &Pass{
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
	Requires: []*Pass{Normalize, RoPE, Edit},
	Run: func(c *Context) (any, error) {
		r := c.rewrite()
		return r.findingsPass(c, "rewrite_mrope", RoPEScheme, RoPE,
			func(f *Finding) bool {
				p, ok := f.Params.(*RoPEParams)
				return ok && !f.Fused && p.MultimodalSections != nil
			},
			func(w *Work, f *Finding, _ *Change) error { return r.mrope(w, f) })
	},
}

// findingsPass runs the rewrite do on every finding of det that want accepts
// (nil: every one): a finding do refuses (ErrRewrite) is skipped with the
// reason, any other error stops the pass.
func (r *Rewrite) findingsPass(c *Context, pass, scheme string, det *Pass, want func(*Finding) bool, do func(*Work, *Finding, *Change) error) (*Change, error) {
	w := c.Work()
	ch := r.begin(pass, scheme)
	defer r.end(ch)
	for _, f := range c.ResultOf[det].([]*Finding) {
		if want != nil && !want(f) {
			continue
		}
		if err := do(w, f, ch); err != nil {
			if errors.Is(err, ErrRewrite) {
				ch.skip(f, "%s", reason(err))
				continue
			}
			return ch, err
		}
		ch.Layers = append(ch.Layers, f.Layers...)
	}
	return ch, nil
}

func (r *Rewrite) maxPositions() int {
	if r.opts.MaxPositions > 0 {
		return r.opts.MaxPositions
	}
	return DefaultMaxPositions
}

// relSin stores one relative sinusoid.
func (r *Rewrite) relSin(w *Work, f *Finding) error {
	ev, ok := f.Evidence.(*RelSinEvidence)
	if !ok {
		return fmt.Errorf("%w: no relative sinusoid evidence", ErrRewrite)
	}
	if ev.Angles == "" {
		return fmt.Errorf("%w: the sinusoid is already a stored table", ErrRewrite)
	}
	angles, table := w.workValue(ev.Angles), w.workValue(ev.Table)
	if angles == nil || table == nil {
		return fmt.Errorf("%w: the sinusoid is not one value of the model", ErrRewrite)
	}
	dist := w.distanceOperand(angles)
	if dist == nil {
		return fmt.Errorf("%w: the angles are not distances times constant frequencies", ErrRewrite)
	}
	n := r.maxPositions()
	vals := make([]float64, 2*n+1)
	for i := range vals {
		vals[i] = float64(i - n)
	}
	cut := fromFloat64Any(w.ElemType(dist), []int{2*n + 1}, vals)
	if cut == nil {
		return fmt.Errorf("%w: distances of type %v", ErrRewrite, w.ElemType(dist))
	}
	pr := w.NewProbe(1, 2*n+1, 0)
	pr.Budget = 1 << 20
	pr.SetCuts(map[*graph.Value]*kernels.Tensor{dist: cut})
	t, err := pr.Value(table)
	if err != nil {
		return fmt.Errorf("%w: evaluating the sinusoid at distances ±%d: %v", ErrRewrite, n, err)
	}
	if t.Rank() != 2 || t.Shape[0] != 2*n+1 {
		return fmt.Errorf("%w: the sinusoid at %d distances has shape %v", ErrRewrite, 2*n+1, t.Shape)
	}
	dt := w.ElemType(table)
	tab, err := r.table("onnxpe_relative_sinusoid", dt, []int64{int64(2*n + 1), int64(t.Shape[1])}, t.Float64s())
	if err != nil {
		return err
	}
	tm, err := r.lookup(w.mainName(table))
	if err != nil {
		return err
	}
	dm, err := r.lookup(w.mainName(dist))
	if err != nil {
		return err
	}
	idx := r.op1("Add", []*graph.Value{r.castInt64(dm, w.ElemType(dist)), r.scalarInt(int64(n))})
	tm.ReplaceKeepingName(typed(r.op1("Gather", []*graph.Value{tab, idx}, graph.IntAttr("axis", 0)), dt, 2))
	return nil
}

// distanceOperand is the 1-D value of distances the angles multiply by
// constant frequencies (through layout ops), or nil.
func (w *Work) distanceOperand(angles *graph.Value) *graph.Value {
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
		if p == nil || !layoutOps[p.OpType] {
			return nil
		}
		x = p.Input(0)
	}
	return nil
}

// disentangled stores DeBERTa's bucket function.
func (r *Rewrite) disentangled(w *Work, f *Finding) error {
	ev, ok := f.Evidence.(*DisentangledEvidence)
	p, ok2 := f.Params.(*DisentangledParams)
	if !ok || !ok2 {
		return fmt.Errorf("%w: no disentangled evidence", ErrRewrite)
	}
	if p.PositionBuckets == nil {
		return fmt.Errorf("%w: position_buckets null: the relative positions are q - k clamped into the relative table (no logarithmic buckets), a Range, a Sub and a Clip per term that a table gathered at q - k would only replace by a Gather; nothing to store", ErrRewrite)
	}
	rel := w.workValue(ev.Relative)
	if rel == nil {
		return fmt.Errorf("%w: the relative positions %q are not a value of the model", ErrRewrite, ev.Relative)
	}
	bucket := func(d int) int { return ev.Buckets[d+ev.MaxDist] }
	// The distances q - k and the bucket function's output, read by value
	// at a length long enough for the logarithmic buckets.
	L := min(max(64, 4*ev.Span), ev.MaxDist+1)
	pr := w.NewProbe(1, L, 0)
	var dist, out *graph.Value
	for _, n := range w.cone(rel) {
		for _, o := range n.Outputs() {
			if w.OrigValue(o) == "" {
				continue
			}
			t, err := pr.Value(o)
			if err != nil || t.Len() != L*L {
				continue
			}
			x := t.Float64s()
			isDist, isBucket := true, true
			for i := 0; i < L && (isDist || isBucket); i++ {
				for j := 0; j < L; j++ {
					if x[i*L+j] != float64(i-j) {
						isDist = false
					}
					if x[i*L+j] != float64(bucket(i-j)) {
						isBucket = false
					}
				}
			}
			switch {
			case isDist && dist == nil && t.Rank() == 2 && w.ElemType(o).IsInt():
				dist = o
			case isBucket && !isDist && out == nil && dist != nil && t.Rank() == 2:
				out = o // the first bucketed value: the function's output
			}
		}
	}
	if dist == nil || out == nil {
		return fmt.Errorf("%w: no values hold q - k and its bucket", ErrRewrite)
	}
	n := r.maxPositions()
	row := make([]int64, 2*n-1)
	for i := range row {
		row[i] = int64(i - (n - 1))
	}
	cut := kernels.FromSlice([]int{1, 2*n - 1}, row)
	if dt := w.ElemType(dist); dt != graph.Int64 {
		cut = castInts(cut, dt)
	}
	pr = w.NewProbe(1, 2*n-1, 0)
	pr.Budget = 1 << 20
	pr.SetCuts(map[*graph.Value]*kernels.Tensor{dist: cut})
	t, err := pr.Value(out)
	if err != nil || t.Len() != 2*n-1 {
		return fmt.Errorf("%w: evaluating the buckets at distances ±%d: %v", ErrRewrite, n-1, err)
	}
	dt := w.ElemType(out)
	tab, err := r.table("onnxpe_relative_buckets", dt, []int64{int64(2*n - 1)}, t.Float64s())
	if err != nil {
		return err
	}
	om, err := r.lookup(w.mainName(out))
	if err != nil {
		return err
	}
	dm, err := r.lookup(w.mainName(dist))
	if err != nil {
		return err
	}
	idx := r.op1("Add", []*graph.Value{r.castInt64(dm, w.ElemType(dist)), r.scalarInt(int64(n - 1))})
	om.ReplaceKeepingName(typed(r.op1("Gather", []*graph.Value{tab, idx}, graph.IntAttr("axis", 0)), dt, 2))
	return nil
}

// mrope stores the cos and sin of a multimodal rotation.
func (r *Rewrite) mrope(w *Work, f *Finding) error {
	ev, ok := f.Evidence.(*RoPEEvidence)
	if !ok || ev.Synthetic || len(ev.Blocks) == 0 {
		return fmt.Errorf("%w: no measured rotation", ErrRewrite)
	}
	var pos []*graph.Value
	for _, b := range ev.Blocks {
		for _, name := range append(append([]string(nil), b.Q.Pos...), b.K.Pos...) {
			if v := w.workValue(name); v != nil {
				pos = append(pos, v)
			}
		}
	}
	// The Cos and Sin reading angles of the positions input alone.
	var in *graph.Value
	var trig []*graph.Node
	for _, n := range w.cone(pos...) {
		for _, x := range n.Inputs() {
			if x != nil && x.Producer() == nil && w.Role(x) == RolePositions {
				in = x
			}
		}
		if n.OpType == "Cos" || n.OpType == "Sin" {
			trig = append(trig, n)
		}
	}
	if in == nil || len(trig) == 0 || w.Shape(in).Rank() != 3 || !w.Shape(in).Dims[0].Known() {
		return fmt.Errorf("%w: the cos and sin are not computed from [streams, batch, seq] position ids", ErrRewrite)
	}
	streams := int(w.Shape(in).Dims[0])
	n := r.maxPositions()
	vals := make([]float64, streams*n)
	for i := range vals {
		vals[i] = float64(i % n)
	}
	cut := fromFloat64Any(w.ElemType(in), []int{streams, 1, n}, vals)
	for _, tn := range trig {
		pr := w.NewProbe(1, n, 0)
		pr.Budget = 1 << 20
		pr.SetCuts(map[*graph.Value]*kernels.Tensor{in: cut})
		t, err := pr.Value(tn.Output(0))
		if err != nil {
			return fmt.Errorf("%w: evaluating %s at positions 0..%d: %v", ErrRewrite, tn.OpType, n-1, err)
		}
		if t.Rank() != 4 || t.Shape[0] != streams || t.Shape[2] != n {
			return fmt.Errorf("%w: %s at %d positions has shape %v", ErrRewrite, tn.OpType, n, t.Shape)
		}
		x := t.Float64s()
		d := t.Shape[3]
		per := len(x) / streams
		for s := 1; s < streams; s++ {
			for i := 0; i < per; i++ {
				if math.Abs(x[s*per+i]-x[i]) > 0 {
					return fmt.Errorf("%w: the streams' %s differ at equal positions", ErrRewrite, tn.OpType)
				}
			}
		}
		dt := w.ElemType(tn.Output(0))
		tab, err := r.table("onnxpe_mrope_"+map[string]string{"Cos": "cos", "Sin": "sin"}[tn.OpType], dt, []int64{int64(n), int64(d)}, x[:per])
		if err != nil {
			return err
		}
		om, err := r.lookup(w.mainName(tn.Output(0)))
		if err != nil {
			return err
		}
		im, err := r.lookup(w.mainName(in))
		if err != nil {
			return err
		}
		om.ReplaceKeepingName(typed(r.op1("Gather", []*graph.Value{tab, r.castInt64(im, w.ElemType(in))}, graph.IntAttr("axis", 0)), dt, 4))
	}
	return nil
}

// RewriteAxial stores the cos and sin that axial 2-D RoPE computes from a
// fixed patch grid.
var RewriteAxial = &Pass{
	Name: "rewrite_axial_rope",
	Doc: `Replace the cos and sin that axial 2-D RoPE computes from a fixed patch grid by constants.

A ViT of fixed image size computes the rows and columns of its patch
grid (t / cols and t % cols, or a meshgrid of two Ranges), their angles
and the cos and sin the rotation reads from shapes and weights alone:
each such value is the model's own subgraph evaluated with the kernels
(normalisation folds it), stored as a constant over the grid's cells,
and what computed it is removed. The grid is the image's: --max-positions
does not apply. Cos and sin the model already stores are left.`,
	Requires: []*Pass{Normalize, RoPE, Edit},
	Run: func(c *Context) (any, error) {
		r := c.rewrite()
		return r.findingsPass(c, "rewrite_axial_rope", RoPEScheme, RoPE,
			func(f *Finding) bool { p, ok := f.Params.(*RoPEParams); return ok && p.Axes == 2 && !f.Fused },
			func(w *Work, f *Finding, ch *Change) error { return r.axial(w, f, ch) })
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
func (r *Rewrite) axial(w *Work, f *Finding, ch *Change) error {
	ev, ok := f.Evidence.(*RoPEEvidence)
	p := f.Params.(*RoPEParams)
	if !ok || ev.Synthetic || len(ev.Blocks) == 0 {
		return fmt.Errorf("%w: no measured rotation over a grid", ErrRewrite)
	}
	if len(p.Grid) != 2 {
		return fmt.Errorf("%w: grid null: the patch grid follows the image's size, so its cos and sin are computed for every call; there is no fixed grid whose cos and sin could be stored", ErrRewrite)
	}
	// The values entering the rotations that the graph computes with Sin
	// or Cos; indices computed from shapes (the q[:, :, 1:] assignment of
	// an export) are not cos and sin.
	var vals []*graph.Value
	seen := map[string]bool{}
	for _, b := range ev.Blocks {
		for _, s := range []*side{b.Q.side, b.K.side} {
			if s == nil {
				continue
			}
			for _, v := range s.Pos {
				switch {
				case !w.IsConst(v):
					if computesTrig(w.cone(v)) {
						return fmt.Errorf("%w: the cos and sin follow the image's size (%s is computed for every call): no fixed grid to store", ErrRewrite, w.name(v))
					}
				case computesTrig(w.foldedNodes(v)):
					if name := w.mainName(v); name != "" && !seen[name] {
						seen[name] = true
						vals = append(vals, v)
					}
				}
			}
		}
	}
	if len(vals) == 0 {
		return fmt.Errorf("%w: the cos and sin of the %d x %d grid are stored already (nothing computes them)", ErrRewrite, p.Grid[0], p.Grid[1])
	}
	for _, v := range vals {
		gt, err := w.Const(v).ToGraph("onnxpe_axial_rope")
		if err != nil {
			return err
		}
		c, err := r.addConst(gt)
		if err != nil {
			return err
		}
		vm, err := r.lookup(w.mainName(v))
		if err != nil {
			return err
		}
		vm.ReplaceKeepingName(c)
	}
	note := fmt.Sprintf("rope (layers %v): the %d x %d grid is the image's: the cos and sin of its cells are stored (%d constants)", f.Layers, p.Grid[0], p.Grid[1], len(vals))
	if r.opts.MaxPositions > 0 {
		note += "; --max-positions does not apply"
	}
	ch.note("%s", note)
	return nil
}

// RewriteFloater stores FLOATER's integrated states.
var RewriteFloater = &Pass{
	Name: "rewrite_floater",
	Doc: `Replace FLOATER's integration (an unrolled chain of solver steps or a Loop) by the table of states it produces.

The states depend on the model's weights alone (the initial state, the
dynamics, the time grid): the table the model reads its position biases
from is evaluated with the kernels (the chain as normalisation folds it,
the Loop run) and stored as a constant; the solver's nodes are removed.
The table keeps the model's own number of states: positions past them
would be an extension (onnxpe extend refuses FLOATER), so --max-positions
does not apply. States that follow the call's length are refused.`,
	Requires: []*Pass{Normalize, FloaterPass, Edit},
	Run: func(c *Context) (any, error) {
		r := c.rewrite()
		return r.findingsPass(c, "rewrite_floater", Floater, FloaterPass, nil,
			func(w *Work, f *Finding, _ *Change) error { return r.floater(w, f) })
	},
}

// floater stores the states of one FLOATER finding.
func (r *Rewrite) floater(w *Work, f *Finding) error {
	ev, ok := f.Evidence.(*FloaterEvidence)
	p, ok2 := f.Params.(*FloaterParams)
	if !ok || !ok2 {
		return fmt.Errorf("%w: no FLOATER evidence", ErrRewrite)
	}
	if p.Form == "table" {
		return fmt.Errorf("%w: the states are a stored table already", ErrRewrite)
	}
	table := w.workValue(ev.Table)
	if table == nil {
		return fmt.Errorf("%w: the states %q are not a value of the model", ErrRewrite, ev.Table)
	}
	// Weights only: the same table whatever the call's length.
	var t *kernels.Tensor
	for _, n := range []int{4, 9} {
		x, err := w.NewProbe(1, n, 0).Value(table)
		if err != nil {
			return fmt.Errorf("%w: evaluating the states: %v", ErrRewrite, err)
		}
		if t != nil && (!slices.Equal(t.Shape, x.Shape) || !slices.Equal(t.Float64s(), x.Float64s())) {
			return fmt.Errorf("%w: the states follow the call's length (%v at 4 positions, %v at 9): not a constant", ErrRewrite, t.Shape, x.Shape)
		}
		t = x
	}
	gt, err := t.ToGraph("onnxpe_floater_states")
	if err != nil {
		return err
	}
	c, err := r.addConst(gt)
	if err != nil {
		return err
	}
	tm, err := r.lookup(w.mainName(table))
	if err != nil {
		return err
	}
	tm.ReplaceKeepingName(c)
	note := fmt.Sprintf("floater (layers %v): the %d states the %s integration produces are stored (%v %v)", f.Layers, t.Shape[0], p.Form, t.DType, t.Shape)
	if n := r.opts.MaxPositions; n > 0 && n != t.Shape[0] {
		note += fmt.Sprintf("; --max-positions %d does not apply (positions past the model's %d are an extension)", n, t.Shape[0])
	}
	r.cur.note("%s", note)
	return nil
}
