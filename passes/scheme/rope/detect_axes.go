package rope

import (
	"cmp"
	"fmt"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
	"math"
	"slices"
)

// Multimodal and 2-D RoPE: rotations whose pairs do not all turn with one
// position. M-RoPE (Qwen2-VL) reads position ids with a leading axis of
// streams ([3, B, S]: temporal, height, width) and gives each stream a
// section of the frequencies; axial 2-D RoPE (rope-vit, EVA-02) turns some
// pairs with the column of a patch and the others with its row.

// axialRot is a rotation over a patch grid: pair k turns with the column
// (Axis[k] 0) or the row (Axis[k] 1) of token Offset+t, t = row·Cols+col.
type axialRot struct {
	Offset     int // tokens before the grid (not rotated: a class token)
	Rows, Cols int
	Axis       []int
	// Open: the grid follows the image (a probe of another image size
	// turned the same pairs by the same frequencies over another grid);
	// OpenWhy says why a grid whose size is not fixed was not confirmed.
	Open    bool
	OpenWhy string
}

// checkOpenGrid measures a 2-D rotation whose tokens are not a fixed
// number again over another image size: the same offset, pair axes and
// frequencies over another grid mean the grid follows the image.
func checkOpenGrid(w *work.Work, s *attn.Side, r *rotation) {
	if r.axial == nil || r.synthetic {
		return
	}
	if d := w.Syms.Canon(w.Shape(s.In).Dims[r.posAxis]); d.Known() {
		return
	}
	ax := r.axial
	ax.OpenWhy = "grid: the number of patches is not fixed, but a probe of another image size did not measure the same rotation over another grid"
	// A larger image first: a small grid's last row frequencies turn
	// little, and the pairing probe may not see every pair turn.
	for _, seq := range []int{2 * probeSeqs[0], probeSeqs[1]} {
		p := probe.NewProbe(w, 1, seq, 0)
		shape, ok := p.BindShape(w.Shape(s.In))
		if !ok || shape[r.posAxis] == r.seq {
			continue
		}
		o, _ := measureAt(w, p, s)
		if o == nil || o.axial == nil || o.posAxis != r.posAxis || o.layout != r.layout || !slices.Equal(o.pairs, r.pairs) {
			continue
		}
		oa := o.axial
		if oa.Offset != ax.Offset || !slices.Equal(oa.Axis, ax.Axis) || oa.Rows == ax.Rows && oa.Cols == ax.Cols {
			continue
		}
		same := true
		for k, x := range r.omega {
			same = same && math.Abs(o.omega[k]-x) <= 1e-4*math.Abs(x)+1e-7
		}
		if !same {
			ax.OpenWhy = "grid: the frequencies change with the image's size"
			return
		}
		ax.Open, ax.OpenWhy = true, ""
		return
	}
}

// axialAngles fits per-pair angles that are not linear in the token index
// as a rotation over a grid: every pair's angle is ω·col or ω·row of the
// token's place in a Rows×Cols grid after Offset unrotated tokens.
func axialAngles(theta [][]float64, shape []int, axis int) (*axialRot, []float64, float64, bool) {
	stride := 1
	for _, x := range shape[axis+1 : len(shape)-1] {
		stride *= x
	}
	n := shape[axis]
	seq := func(k, i int) float64 { return theta[k][i*stride] }
	const tol = 1e-4
	// Leading tokens where no pair turns: the unrotated ones and the grid's
	// first cell.
	first := -1
	for i := 0; i < n && first < 0; i++ {
		for k := range theta {
			if math.Abs(seq(k, i)) > tol {
				first = i
				break
			}
		}
	}
	if first < 1 {
		return nil, nil, 0, false
	}
	off := first - 1
	N := n - off
	for cols := 2; cols <= N/2; cols++ {
		if N%cols != 0 {
			continue
		}
		rows := N / cols
		ax := make([]int, len(theta))
		omega := make([]float64, len(theta))
		ok := true
		var res float64
		for k := range theta {
			// fit reads ω along the line of tokens stepping one cell on the
			// axis (count cells, unit tokens apart) and checks every token.
			fit := func(coord func(t int) int, unit, count int) (float64, float64, bool) {
				xs := make([]float64, count)
				u := make([]float64, count)
				for c := 1; c < count; c++ {
					xs[c] = float64(c)
					u[c] = u[c-1] + math.Remainder(seq(k, off+c*unit)-seq(k, off+(c-1)*unit), 2*math.Pi)
				}
				_, slope := probe.Linreg(xs, u)
				if math.Abs(slope) < tol {
					return 0, 0, false
				}
				var r float64
				for t := 0; t < N; t++ {
					d := math.Abs(math.Remainder(seq(k, off+t)-slope*float64(coord(t)), 2*math.Pi))
					if d > 1e-3 {
						return 0, 0, false
					}
					r = math.Max(r, d)
				}
				return slope, r, true
			}
			if s, r, good := fit(func(t int) int { return t % cols }, 1, cols); good {
				ax[k], omega[k], res = 0, s, math.Max(res, r)
			} else if s, r, good := fit(func(t int) int { return t / cols }, cols, rows); good {
				ax[k], omega[k], res = 1, s, math.Max(res, r)
			} else {
				ok = false
				break
			}
		}
		if !ok || !slices.Contains(ax, 0) || !slices.Contains(ax, 1) || rows < 2 {
			continue
		}
		for k := range omega {
			omega[k] = math.Abs(omega[k])
		}
		return &axialRot{Offset: off, Rows: rows, Cols: cols, Axis: ax}, omega, res, true
	}
	return nil, nil, 0, false
}

// fitAxial fits the frequencies of a rotation over a grid. Each axis may
// turn a plain RoPE of its own over rotary dim 2·(pairs of the axis), both
// of one base (rope-vit, EVA-02); or the axes may share out the
// frequencies of one plain RoPE over the whole rotary dim (Pixtral: the
// rows turn θ^(-4i/d), the columns θ^(-(4i+2)/d)), which the frequencies
// of both axes in decreasing order then are.
func (r *rotation) fitAxial() ropeFit {
	var axes [2][]float64
	for k, x := range r.omega {
		axes[r.axial.Axis[k]] = append(axes[r.axial.Axis[k]], x)
	}
	if len(axes[0]) < 2 || len(axes[1]) < 2 {
		return ropeFit{Scaling: "unknown", Base: math.NaN(), Notes: []string{"base: an axis of the grid has a single frequency"}}
	}
	var bases []float64
	for _, om := range axes {
		b, ok := r.plainBase(om, 2*len(om))
		if !ok {
			break
		}
		bases = append(bases, b)
	}
	if len(bases) == 2 && math.Abs(bases[0]/bases[1]-1) <= 1e-4 {
		return ropeFit{Base: probe.Snap(bases[0], 1e-5), Scaling: "none", Factor: 1}
	}
	all := slices.Clone(r.omega)
	slices.SortFunc(all, func(a, b float64) int { return cmp.Compare(b, a) })
	if b, ok := r.plainBase(all, 2*len(all)); ok {
		return ropeFit{Base: probe.Snap(b, 1e-5), Scaling: "none", Factor: 1, Notes: []string{fmt.Sprintf(
			"base: the two axes share out the frequencies of one RoPE of base %.6g over rotary dim %d (the columns turn %d of them, the rows %d)",
			probe.Snap(b, 1e-5), 2*len(all), len(axes[0]), len(axes[1]))}}
	}
	why := "base: the frequencies of each axis are not base^(-2i/d) of one base, nor are both axes' together"
	if len(bases) == 2 {
		why = "base: the two axes have different bases"
	}
	return ropeFit{Scaling: "unknown", Base: math.NaN(), Notes: []string{why}}
}

// plainBase fits frequencies om (in pair order) as base^(-2i/rd) without a
// factor, to their measurement error.
func (r *rotation) plainBase(om []float64, rd int) (float64, bool) {
	sig := probe.OmegaSigma(om, r.angErr(), r.seq, r.seq, relEps(r.half))
	b, f, resid := probe.PlainFit(om, sig, rd)
	return b, resid <= 8 && math.Abs(f-1) <= 1e-4
}

// measureStreams finds the frequencies each stream of a multi-stream
// positions input turns (M-RoPE): the input's leading axis holds the
// streams when it is neither the batch nor the sequence; every stream in
// turn gets the probe's positions, the others 0.
func measureStreams(w *work.Work, s *attn.Side, r *rotation) {
	if r.synthetic || r.axial != nil {
		return
	}
	var in *graph.Value
	for _, n := range w.Cone(s.Pos...) {
		for _, x := range n.Inputs() {
			if x != nil && x.Producer() == nil && w.Role(x) == work.RolePositions && w.Shape(x).Rank() == 3 && w.Shape(x).Dims[0].Known() {
				in = x
			}
		}
	}
	if in == nil {
		return
	}
	streams := int(w.Shape(in).Dims[0])
	if streams < 2 {
		return
	}
	p := probe.NewProbe(w, 1, r.seq, 0)
	shape, ok := p.BindShape(w.Shape(s.In))
	if !ok {
		return
	}
	pshape, ok := p.BindShape(w.Shape(in))
	if !ok {
		return
	}
	owner := make([]int, len(r.pairs))
	for k := range owner {
		owner[k] = -1
	}
	for st := 0; st < streams; st++ {
		size := 1
		for _, d := range pshape {
			size *= d
		}
		vals := make([]float64, size)
		per := size / streams
		last := pshape[len(pshape)-1]
		for i := 0; i < per; i++ {
			vals[st*per+i] = float64(i % last)
		}
		pt := probe.FromFloat64Any(w.ElemType(in), pshape, vals)
		if pt == nil {
			return
		}
		d := shape[len(shape)-1]
		total := 1
		for _, x := range shape {
			total *= x
		}
		q := make([]float64, total)
		for sl := 0; sl < total/d; sl++ {
			for _, pr := range r.pairs {
				q[sl*d+pr[0]] = 1
			}
		}
		qt := probe.FromFloat64Any(w.ElemType(s.In), shape, q)
		p.SetCuts(map[*graph.Value]*kernels.Tensor{s.In: qt, in: pt})
		out, err := p.Value(s.Out)
		if err != nil {
			return
		}
		o := out.Float64s()
		stride := 1
		for _, x := range shape[r.posAxis+1 : len(shape)-1] {
			stride *= x
		}
		for k, pr := range r.pairs {
			moved := false
			for i := 1; i < shape[r.posAxis]; i++ {
				sl := i * stride
				if math.Abs(math.Atan2(o[sl*d+pr[1]], o[sl*d+pr[0]])) > 1e-6 {
					moved = true
				}
			}
			if moved {
				if owner[k] >= 0 {
					return // a pair turned by two streams: not sections
				}
				owner[k] = st
			}
		}
	}
	sections := make([]int, streams)
	for k, st := range owner {
		if st < 0 {
			return
		}
		// Sections are contiguous runs in stream order.
		if k > 0 && st < owner[k-1] {
			return
		}
		sections[st]++
	}
	r.sections, r.streamsIn, r.pairStream = sections, in, owner
}
