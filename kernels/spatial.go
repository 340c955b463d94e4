package kernels

import (
	"fmt"
	"math"
	"slices"
)

// Spatial rearrangements and sampling of images: DepthToSpace,
// SpaceToDepth, CenterCropPad, GridSample, AffineGrid and RoiAlign.

// permuteCopy returns the elements of x viewed as shape (row-major)
// transposed by perm, in a tensor of shape out.
func permuteCopy(c *Call, x *Tensor, shape, perm, out []int) *Tensor {
	st := make([]int, len(shape))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = s
		s *= shape[i]
	}
	tshape, tst := make([]int, len(perm)), make([]int, len(perm))
	for i, p := range perm {
		tshape[i], tst[i] = shape[p], st[p]
	}
	y := c.alloc(x.DType, tshape...)
	copyStrided(y, x, tst, 0)
	return y.Reshaped(out...)
}

func depthToSpace(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	bs := int(c.Int("blocksize", 0))
	if len(x.Shape) != 4 || bs <= 0 || x.Shape[1]%(bs*bs) != 0 {
		return nil, fmt.Errorf("input %v and blocksize %d: want NCHW with C a multiple of blocksize²", x.Shape, bs)
	}
	b, ch, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	cc := ch / (bs * bs)
	out := []int{b, cc, h * bs, w * bs}
	switch m := c.String("mode", "DCR"); m {
	case "DCR":
		return []*Tensor{permuteCopy(c, x, []int{b, bs, bs, cc, h, w}, []int{0, 3, 4, 1, 5, 2}, out)}, nil
	case "CRD":
		return []*Tensor{permuteCopy(c, x, []int{b, cc, bs, bs, h, w}, []int{0, 1, 4, 2, 5, 3}, out)}, nil
	default:
		return nil, fmt.Errorf("mode %q", m)
	}
}

func spaceToDepth(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	bs := int(c.Int("blocksize", 0))
	if len(x.Shape) != 4 || bs <= 0 || x.Shape[2]%bs != 0 || x.Shape[3]%bs != 0 {
		return nil, fmt.Errorf("input %v and blocksize %d: want NCHW with H and W multiples of blocksize", x.Shape, bs)
	}
	b, ch, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	return []*Tensor{permuteCopy(c, x, []int{b, ch, h / bs, bs, w / bs, bs}, []int{0, 3, 5, 1, 2, 4},
		[]int{b, ch * bs * bs, h / bs, w / bs})}, nil
}

// centerCropPad crops or zero-pads each listed axis to the given size,
// keeping the centre (an odd difference leaves the extra element at the
// end).
func centerCropPad(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, sh := in[0], in[1].Int64s()
	r := len(x.Shape)
	axes := make([]int, r)
	for i := range axes {
		axes[i] = i
	}
	if a := c.Ints("axes"); a != nil {
		var err error
		if axes, err = normAxes(a, r); err != nil {
			return nil, err
		}
	}
	if len(sh) != len(axes) {
		return nil, fmt.Errorf("shape %v: want %d sizes", sh, len(axes))
	}
	out := slices.Clone(x.Shape)
	srcOff, dstOff, span := make([]int, r), make([]int, r), slices.Clone(x.Shape)
	for i, a := range axes {
		s := sh[i]
		if s < 0 || s > math.MaxInt32 {
			return nil, fmt.Errorf("shape %v: bad size", sh)
		}
		dim, n := x.Shape[a], int(s)
		out[a] = n
		if n < dim {
			srcOff[a], span[a] = (dim-n)/2, n
		} else {
			dstOff[a] = (n - dim) / 2
		}
	}
	y := c.zeros(x.DType, out...)
	copyBlock(y, x, span, srcOff, dstOff)
	return []*Tensor{y}, nil
}

// copyBlock copies the block of size span at srcOff in src to dstOff in
// dst (same rank and type).
func copyBlock(dst, src *Tensor, span, srcOff, dstOff []int) {
	r := len(span)
	if shapeSize(span) == 0 {
		return
	}
	if r == 0 {
		copyAny(dst, 0, src, 0, 1)
		return
	}
	sst, dst2 := make([]int, r), make([]int, r)
	s, d := 1, 1
	for i := r - 1; i >= 0; i-- {
		sst[i], dst2[i] = s, d
		s *= src.Shape[i]
		d *= dst.Shape[i]
	}
	idx := make([]int, r)
	last := span[r-1]
	for {
		so, do := 0, 0
		for i := range r {
			so += (srcOff[i] + idx[i]) * sst[i]
			do += (dstOff[i] + idx[i]) * dst2[i]
		}
		copyAny(dst, do, src, so, last)
		k := r - 2
		for ; k >= 0; k-- {
			idx[k]++
			if idx[k] < span[k] {
				break
			}
			idx[k] = 0
		}
		if k < 0 {
			return
		}
	}
}

// reflectCoord folds x into [lo, hi] by reflecting at the borders.
func reflectCoord(x, lo, hi float64) float64 {
	rng := hi - lo
	if rng <= 0 {
		return lo
	}
	if x < lo {
		dx := lo - x
		n := math.Floor(dx / rng)
		r := dx - n*rng
		if int64(n)%2 == 0 {
			return lo + r
		}
		return hi - r
	}
	if x > hi {
		dx := x - hi
		n := math.Floor(dx / rng)
		r := dx - n*rng
		if int64(n)%2 == 0 {
			return hi - r
		}
		return lo + r
	}
	return x
}

// gridSampler samples the spatial axes of one (n, c) plane.
type gridSampler struct {
	dims          []int
	stride        []int
	mode, padding string
	align         bool
	lo, hi        []float64 // the borders of each axis
	// scratch per axis: tap indices (-1: zero) and weights
	idx [][]int
	w   [][]float64
}

func newGridSampler(dims []int, mode, padding string, align bool) *gridSampler {
	sp := len(dims)
	g := &gridSampler{dims: dims, stride: make([]int, sp), mode: mode, padding: padding, align: align,
		lo: make([]float64, sp), hi: make([]float64, sp), idx: make([][]int, sp), w: make([][]float64, sp)}
	s := 1
	for i := sp - 1; i >= 0; i-- {
		g.stride[i] = s
		s *= dims[i]
		g.lo[i], g.hi[i] = -0.5, float64(dims[i])-0.5
		if align {
			g.lo[i], g.hi[i] = 0, float64(dims[i]-1)
		}
		g.idx[i], g.w[i] = make([]int, 0, 4), make([]float64, 0, 4)
	}
	return g
}

// pixel maps an integer index along axis a by the padding mode (-1: a
// zero outside the image).
func (g *gridSampler) pixel(a, i int) int {
	d := g.dims[a]
	switch g.padding {
	case "border":
		return min(max(i, 0), d-1)
	case "reflection":
		return min(max(int(reflectCoord(float64(i), g.lo[a], g.hi[a])), 0), d-1)
	}
	if i < 0 || i >= d {
		return -1
	}
	return i
}

// sample interpolates plane at the normalised coordinates nx (one per
// spatial axis, in axis order).
func (g *gridSampler) sample(plane []float64, nx []float64) float64 {
	sp := len(g.dims)
	for a := range sp {
		d := float64(g.dims[a])
		var x float64
		if g.align {
			x = (nx[a] + 1) / 2 * (d - 1)
		} else {
			x = ((nx[a]+1)*d - 1) / 2
		}
		x = float64(float32(x)) // ONNX's reference holds it in float32
		if g.mode == "nearest" {
			x = math.RoundToEven(x)
		}
		if x < g.lo[a] || x > g.hi[a] {
			switch g.padding {
			case "border":
				x = math.Max(0, math.Min(d-1, x))
			case "reflection":
				x = reflectCoord(x, g.lo[a], g.hi[a])
			}
		}
		g.idx[a], g.w[a] = g.idx[a][:0], g.w[a][:0]
		switch g.mode {
		case "nearest":
			g.idx[a] = append(g.idx[a], g.pixel(a, int(x)))
			g.w[a] = append(g.w[a], 1)
		case "linear":
			x0 := math.Floor(x)
			t := x - x0
			g.idx[a] = append(g.idx[a], g.pixel(a, int(x0)), g.pixel(a, int(x0)+1))
			g.w[a] = append(g.w[a], 1-t, t)
		default: // cubic, Keys with A = -0.75
			x0 := math.Floor(x)
			t := x - x0
			const A = -0.75
			cub := func(s float64) float64 {
				s = math.Abs(s)
				if s <= 1 {
					return ((A+2)*s-(A+3))*s*s + 1
				}
				if s < 2 {
					return ((A*s-5*A)*s+8*A)*s - 4*A
				}
				return 0
			}
			for k := -1; k <= 2; k++ {
				g.idx[a] = append(g.idx[a], g.pixel(a, int(x0)+k))
				g.w[a] = append(g.w[a], cub(t-float64(k)))
			}
		}
	}
	// Sum over the product of the axes' taps.
	var v float64
	var rec func(a, off int, w float64)
	rec = func(a, off int, w float64) {
		if a == sp {
			v += w * plane[off]
			return
		}
		for k, i := range g.idx[a] {
			if i < 0 || g.w[a][k] == 0 {
				continue
			}
			rec(a+1, off+i*g.stride[a], w*g.w[a][k])
		}
	}
	rec(0, 0, 1)
	return v
}

func gridSample(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, grid := in[0], in[1]
	if len(x.Shape) < 3 || len(grid.Shape) != len(x.Shape) || grid.Shape[0] != x.Shape[0] || grid.Shape[len(grid.Shape)-1] != len(x.Shape)-2 {
		return nil, fmt.Errorf("X %v and grid %v: want (N, C, D1...) and (N, d1..., %d)", x.Shape, grid.Shape, len(x.Shape)-2)
	}
	mode := c.String("mode", "linear")
	switch mode {
	case "bilinear":
		mode = "linear"
	case "bicubic":
		mode = "cubic"
	case "linear", "nearest", "cubic":
	default:
		return nil, fmt.Errorf("mode %q", mode)
	}
	padding := c.String("padding_mode", "zeros")
	if padding != "zeros" && padding != "border" && padding != "reflection" {
		return nil, fmt.Errorf("padding_mode %q", padding)
	}
	n, ch, sp := x.Shape[0], x.Shape[1], len(x.Shape)-2
	dims := x.Shape[2:]
	outSp := grid.Shape[1 : len(grid.Shape)-1]
	y := c.alloc(x.DType, slices.Concat([]int{n, ch}, outSp)...)
	if y.Len() == 0 {
		return []*Tensor{y}, nil
	}
	g := newGridSampler(dims, mode, padding, c.Int("align_corners", 0) != 0)
	xs, gs := x.Float64s(), grid.Float64s()
	ys := make([]float64, y.Len())
	isz, osz := shapeSize(dims), shapeSize(outSp)
	nx := make([]float64, sp)
	for b := range n {
		for cc := range ch {
			plane := xs[(b*ch+cc)*isz : (b*ch+cc+1)*isz]
			for o := range osz {
				gv := gs[(b*osz+o)*sp : (b*osz+o+1)*sp]
				for a := range sp {
					nx[a] = gv[sp-1-a] // the grid lists x (the last axis) first
				}
				ys[(b*ch+cc)*osz+o] = g.sample(plane, nx)
			}
		}
	}
	storeRounded(c, y, ys)
	return []*Tensor{y}, nil
}

// affineGrid maps the normalised coordinates of an output of size (N, C,
// D...) by theta (N, 2, 3) or (N, 3, 4) to a sampling grid for
// GridSample: grid[n, ..., :] = theta[n] · (x, y[, z], 1).
func affineGrid(c *Call, in []*Tensor) ([]*Tensor, error) {
	theta, size := in[0], in[1].Int64s()
	sp := len(size) - 2
	if (sp != 2 && sp != 3) || len(theta.Shape) != 3 || theta.Shape[1] != sp || theta.Shape[2] != sp+1 || int64(theta.Shape[0]) != size[0] {
		return nil, fmt.Errorf("theta %v and size %v: want (N, 2, 3) with a 4-D size or (N, 3, 4) with a 5-D size", theta.Shape, size)
	}
	align := c.Int("align_corners", 0) != 0
	dims := make([]int, sp)
	for i := range dims {
		if size[2+i] < 0 || size[2+i] > math.MaxInt32 {
			return nil, fmt.Errorf("size %v: bad dimension", size)
		}
		dims[i] = int(size[2+i])
	}
	n := theta.Shape[0]
	y := c.alloc(theta.DType, slices.Concat([]int{n}, dims, []int{sp})...)
	// base[a][i]: the normalised coordinate of index i along axis a.
	base := make([][]float64, sp)
	for a, d := range dims {
		base[a] = make([]float64, d)
		for i := range d {
			if align {
				if d > 1 {
					base[a][i] = -1 + float64(i)*2/float64(d-1)
				} else {
					base[a][i] = -1
				}
			} else {
				step := 2 / float64(d)
				base[a][i] = -1 + step/2 + float64(i)*step
			}
		}
	}
	th := theta.Float64s()
	ys := make([]float64, y.Len())
	osz := shapeSize(dims)
	idx := make([]int, sp)
	h := make([]float64, sp+1) // (x, y[, z], 1): the last axis first
	for b := range n {
		t := th[b*sp*(sp+1) : (b+1)*sp*(sp+1)]
		clear(idx)
		for o := range osz {
			for a := range sp {
				h[a] = base[sp-1-a][idx[sp-1-a]]
			}
			h[sp] = 1
			for r := range sp {
				var v float64
				for k := range sp + 1 {
					v += t[r*(sp+1)+k] * h[k]
				}
				ys[(b*osz+o)*sp+r] = v
			}
			for a := sp - 1; a >= 0; a-- {
				idx[a]++
				if idx[a] < dims[a] {
					break
				}
				idx[a] = 0
			}
		}
	}
	storeRounded(c, y, ys)
	return []*Tensor{y}, nil
}

// roiAlign pools each region of interest (x1, y1, x2, y2, scaled by
// spatial_scale) of its image into output_height x output_width bins,
// each the average (or maximum) of sampling_ratio² bilinear samples (an
// adaptive number when 0), as ONNX Runtime and ONNX's reference compute.
func roiAlign(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, rois, bi := in[0], in[1], in[2]
	if len(x.Shape) != 4 || len(rois.Shape) != 2 || rois.Shape[1] != 4 || bi.Len() != rois.Shape[0] {
		return nil, fmt.Errorf("X %v, rois %v, batch_indices %v: want NCHW, (R, 4) and R indices", x.Shape, rois.Shape, bi.Shape)
	}
	ph, pw := int(c.Int("output_height", 1)), int(c.Int("output_width", 1))
	if ph <= 0 || pw <= 0 {
		return nil, fmt.Errorf("output_height %d and output_width %d must be positive", ph, pw)
	}
	ratio := int(c.Int("sampling_ratio", 0))
	scale := float64(c.Float("spatial_scale", 1))
	mode := c.String("mode", "avg")
	if mode != "avg" && mode != "max" {
		return nil, fmt.Errorf("mode %q", mode)
	}
	def := "half_pixel"
	if c.Opset < 16 {
		def = "output_half_pixel"
	}
	halfPixel := c.String("coordinate_transformation_mode", def) == "half_pixel"
	nr, ch, h, w := rois.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	if (h == 0 || w == 0) && nr > 0 {
		// No pixel to interpolate (ONNX Runtime 1.30 crashes here).
		return nil, fmt.Errorf("X %v has no pixels to sample", x.Shape)
	}
	y := c.alloc(x.DType, nr, ch, ph, pw)
	xs, rs, bs := x.Float64s(), rois.Float64s(), bi.Int64s()
	ys := make([]float64, y.Len())
	type tap struct {
		pos [4]int
		w   [4]float64
	}
	for r := range nr {
		b := bs[r]
		if b < 0 || b >= int64(x.Shape[0]) {
			return nil, fmt.Errorf("batch index %d outside the %d images", b, x.Shape[0])
		}
		off := 0.0
		if halfPixel {
			off = 0.5
		}
		sw, sh := rs[r*4]*scale-off, rs[r*4+1]*scale-off
		ew, eh := rs[r*4+2]*scale-off, rs[r*4+3]*scale-off
		rw, rh := ew-sw, eh-sh
		if !halfPixel {
			rw, rh = math.Max(rw, 1), math.Max(rh, 1)
		}
		bh, bw := rh/float64(ph), rw/float64(pw)
		gh, gw := ratio, ratio
		if ratio <= 0 {
			gh, gw = int(math.Ceil(rh/float64(ph))), int(math.Ceil(rw/float64(pw)))
		}
		gh, gw = max(gh, 0), max(gw, 0)
		count := float64(max(gh*gw, 1))
		c.reserveElems(ph*pw*gh*gw, 64)
		taps := make([]tap, 0, ph*pw*gh*gw)
		for i := range ph {
			for j := range pw {
				for iy := range gh {
					yy := sh + float64(i)*bh + (float64(iy)+0.5)*bh/float64(gh)
					for ix := range gw {
						xx := sw + float64(j)*bw + (float64(ix)+0.5)*bw/float64(gw)
						var t tap
						if yy < -1 || yy > float64(h) || xx < -1 || xx > float64(w) || h == 0 || w == 0 {
							taps = append(taps, t)
							continue
						}
						yv, xv := math.Max(yy, 0), math.Max(xx, 0)
						yl, xl := int(yv), int(xv)
						yh, xh := yl+1, xl+1
						if yl >= h-1 {
							yl, yh, yv = h-1, h-1, float64(h-1)
						}
						if xl >= w-1 {
							xl, xh, xv = w-1, w-1, float64(w-1)
						}
						ly, lx := yv-float64(yl), xv-float64(xl)
						hy, hx := 1-ly, 1-lx
						t.pos = [4]int{yl*w + xl, yl*w + xh, yh*w + xl, yh*w + xh}
						t.w = [4]float64{hy * hx, hy * lx, ly * hx, ly * lx}
						taps = append(taps, t)
					}
				}
			}
		}
		if h == 0 || w == 0 {
			continue // an empty image: every sample is 0
		}
		for cc := range ch {
			plane := xs[(int(b)*ch+cc)*h*w : (int(b)*ch+cc+1)*h*w]
			dst := ys[(r*ch+cc)*ph*pw : (r*ch+cc+1)*ph*pw]
			k := 0
			for o := range dst {
				var v float64
				first := true
				for range gh * gw {
					t := &taps[k]
					k++
					if mode == "avg" {
						v += t.w[0]*plane[t.pos[0]] + t.w[1]*plane[t.pos[1]] + t.w[2]*plane[t.pos[2]] + t.w[3]*plane[t.pos[3]]
						continue
					}
					m := math.Max(math.Max(t.w[0]*plane[t.pos[0]], t.w[1]*plane[t.pos[1]]), math.Max(t.w[2]*plane[t.pos[2]], t.w[3]*plane[t.pos[3]]))
					if first || m > v {
						v, first = m, false
					}
				}
				if mode == "avg" {
					v /= count
				}
				dst[o] = v
			}
		}
	}
	storeRounded(c, y, ys)
	return []*Tensor{y}, nil
}

func init() {
	mv := func(op string, since int64, fn Kernel) { Register("", op, since, 0, fn, Native) }
	mv("DepthToSpace", 1, depthToSpace)
	mv("SpaceToDepth", 1, spaceToDepth)
	mv("CenterCropPad", 18, centerCropPad)
	reg("GridSample", 16, 0, gridSample)
	reg("AffineGrid", 20, 0, affineGrid)
	reg("RoiAlign", 10, 0, roiAlign)
}
