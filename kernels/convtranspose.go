package kernels

import (
	"fmt"
	"math"
	"slices"
)

// ConvTranspose, Col2Im and DeformConv: the convolutions that scatter
// (col2im) or sample (bilinear) rather than gather from a fixed window.

// col2imGeom places the columns of an im2col matrix back in an image: a
// column of grid position p (per axis) and kernel tap k lands at image
// coordinate p*s - pb + k*d, and is dropped outside the image.
type col2imGeom struct {
	image, kernel, grid, s, d, pb []int
}

// add accumulates col (ch*K rows of L = prod(grid) columns; K =
// prod(kernel)) into img (ch images of prod(image) elements).
func (g *col2imGeom) add(img, col []float64, ch int) {
	sp := len(g.image)
	K, L, isz := shapeSize(g.kernel), shapeSize(g.grid), shapeSize(g.image)
	istride := make([]int, sp)
	st := 1
	for i := sp - 1; i >= 0; i-- {
		istride[i] = st
		st *= g.image[i]
	}
	// pos[a][p] is the image offset along axis a of grid index p for the
	// current tap, or -1 outside the image.
	pos := make([][]int, sp)
	for a := range pos {
		pos[a] = make([]int, g.grid[a])
	}
	tap := make([]int, sp)
	gi := make([]int, sp)
	for k := range K {
		for a := range sp {
			for p := range g.grid[a] {
				o := p*g.s[a] - g.pb[a] + tap[a]*g.d[a]
				if o < 0 || o >= g.image[a] {
					pos[a][p] = -1
				} else {
					pos[a][p] = o * istride[a]
				}
			}
		}
		for c := range ch {
			row := col[(c*K+k)*L : (c*K+k+1)*L]
			im := img[c*isz : (c+1)*isz]
			clear(gi)
			for l := range L {
				off := 0
				for a := range sp {
					p := pos[a][gi[a]]
					if p < 0 {
						off = -1
						break
					}
					off += p
				}
				if off >= 0 {
					im[off] += row[l]
				}
				for a := sp - 1; a >= 0; a-- {
					gi[a]++
					if gi[a] < g.grid[a] {
						break
					}
					gi[a] = 0
				}
			}
		}
		for a := sp - 1; a >= 0; a-- {
			tap[a]++
			if tap[a] < g.kernel[a] {
				break
			}
			tap[a] = 0
		}
	}
}

func convTranspose(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, w := in[0], in[1]
	b := optIn(in, 2)
	if len(x.Shape) < 3 || len(w.Shape) != len(x.Shape) {
		return nil, fmt.Errorf("X %v and W %v: want N, C and spatial axes, and weights of the same rank", x.Shape, w.Shape)
	}
	if !isFloatType(x.DType) || smallFloat(x.DType) {
		return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
	}
	sp := len(x.Shape) - 2
	n, cin := x.Shape[0], x.Shape[1]
	group := int(c.Int("group", 1))
	if group <= 0 || cin%group != 0 || w.Shape[0] != cin {
		return nil, fmt.Errorf("%d input channels do not fit group %d and weights %v", cin, group, w.Shape)
	}
	opg := w.Shape[1]
	cout := opg * group
	ks := w.Shape[2:]
	if k := c.Ints("kernel_shape"); k != nil && !slices.Equal(toInts(k), ks) {
		return nil, fmt.Errorf("kernel_shape %v differs from weights %v", k, ks)
	}
	s, err := spatialInts(c, "strides", sp, 1, 1)
	if err != nil {
		return nil, err
	}
	d, err := spatialInts(c, "dilations", sp, 1, 1)
	if err != nil {
		return nil, err
	}
	op, err := spatialInts(c, "output_padding", sp, 0, 0)
	if err != nil {
		return nil, err
	}
	inS := x.Shape[2:]
	out := make([]int, sp)
	pb := make([]int, sp)
	autoPad := c.String("auto_pad", "NOTSET")
	outAttr := c.Ints("output_shape")
	if outAttr != nil && len(outAttr) != sp {
		// output_shape may list N and C too.
		if len(outAttr) == sp+2 {
			outAttr = outAttr[2:]
		} else {
			return nil, fmt.Errorf("output_shape %v: want %d values", outAttr, sp)
		}
	}
	full := func(i int) int { return s[i]*(inS[i]-1) + op[i] + (ks[i]-1)*d[i] + 1 }
	if c.Ints("pads") == nil && (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
		for i := range sp {
			out[i] = inS[i] * s[i]
			if outAttr != nil {
				out[i] = int(outAttr[i])
			}
			total := full(i) - out[i]
			if autoPad == "SAME_UPPER" {
				pb[i] = floorDiv(total, 2)
			} else {
				pb[i] = total - floorDiv(total, 2)
			}
		}
	} else {
		pads, err := spatialInts2(c, "pads", sp)
		if err != nil {
			return nil, err
		}
		for i := range sp {
			pb[i] = pads[i]
			out[i] = full(i) - pads[i] - pads[i+sp]
			if outAttr != nil {
				out[i] = int(outAttr[i])
			}
		}
	}
	for i, o := range out {
		if o < 0 || o > math.MaxInt32 {
			return nil, fmt.Errorf("output size %d along spatial axis %d", o, i)
		}
	}
	y := c.alloc(x.DType, slices.Concat([]int{n, cout}, out)...)
	if y.Len() == 0 {
		return []*Tensor{y}, nil
	}
	// Per image and group: col (opg*K x L) = W_gᵀ (opg*K x cpg) · X_g
	// (cpg x L), then col2im into the group's output channels.
	cpg, K, L, osz := cin/group, shapeSize(ks), shapeSize(inS), shapeSize(out)
	xs, ws := x.Float64s(), w.Float64s()
	ys := make([]float64, y.Len())
	c.reserveElems(opg*K*L, 8)
	col := make([]float64, opg*K*L)
	geo := &col2imGeom{image: out, kernel: ks, grid: inS, s: s, d: d, pb: pb}
	e := c.mm()
	for bi := range n {
		for g := range group {
			wg := ws[g*cpg*opg*K : (g+1)*cpg*opg*K]
			xg := xs[(bi*cin+g*cpg)*L : (bi*cin+(g+1)*cpg)*L]
			e.Dgemm(true, false, opg*K, L, cpg, 1, wg, opg*K, xg, L, 0, col, L)
			geo.add(ys[(bi*cout+g*opg)*osz:(bi*cout+(g+1)*opg)*osz], col, opg)
		}
	}
	if b != nil {
		if b.Len() != cout {
			return nil, fmt.Errorf("B %v: want %d values", b.Shape, cout)
		}
		bs := b.Float64s()
		for i := range ys {
			ys[i] += bs[(i/osz)%cout]
		}
	}
	storeRounded(c, y, ys)
	return []*Tensor{y}, nil
}

// col2im rearranges columns (N, C*prod(block_shape), L) into images (N,
// C, image_shape...), summing overlapping values.
func col2im(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	image, block := in[1].Int64s(), in[2].Int64s()
	sp := len(image)
	if len(block) != sp || sp == 0 || len(x.Shape) != 3 {
		return nil, fmt.Errorf("input %v, image_shape %v, block_shape %v: want a 3-D input and one size per spatial axis", x.Shape, image, block)
	}
	s, err := spatialInts(c, "strides", sp, 1, 1)
	if err != nil {
		return nil, err
	}
	d, err := spatialInts(c, "dilations", sp, 1, 1)
	if err != nil {
		return nil, err
	}
	pads, err := spatialInts2(c, "pads", sp)
	if err != nil {
		return nil, err
	}
	geo := &col2imGeom{image: make([]int, sp), kernel: make([]int, sp), grid: make([]int, sp), s: s, d: d, pb: pads[:sp]}
	for i := range sp {
		if image[i] < 0 || block[i] <= 0 || image[i] > math.MaxInt32 || block[i] > math.MaxInt32 {
			return nil, fmt.Errorf("image_shape %v, block_shape %v: bad size", image, block)
		}
		geo.image[i], geo.kernel[i] = int(image[i]), int(block[i])
		geo.grid[i] = (geo.image[i]+pads[i]+pads[i+sp]-(geo.kernel[i]-1)*d[i]-1)/s[i] + 1
		if geo.grid[i] < 1 {
			return nil, fmt.Errorf("no sliding block fits image_shape %v", image)
		}
	}
	K, L := shapeSize(geo.kernel), shapeSize(geo.grid)
	if x.Shape[1]%K != 0 || x.Shape[2] != L {
		return nil, fmt.Errorf("input %v: want C*%d rows and %d columns (the sliding blocks)", x.Shape, K, L)
	}
	n, ch := x.Shape[0], x.Shape[1]/K
	y := c.alloc(x.DType, slices.Concat([]int{n, ch}, geo.image)...)
	ys := make([]float64, y.Len())
	xs := x.Float64s()
	isz := shapeSize(geo.image)
	for bi := range n {
		geo.add(ys[bi*ch*isz:(bi+1)*ch*isz], xs[bi*ch*K*L:(bi+1)*ch*K*L], ch)
	}
	storeRounded(c, y, ys)
	return []*Tensor{y}, nil
}

// bilinearZero samples plane (h x w) at (y, x) bilinearly, reading 0
// outside it.
func bilinearZero(plane []float64, h, w int, y, x float64) float64 {
	y0, x0 := math.Floor(y), math.Floor(x)
	fy, fx := y-y0, x-x0
	iy, ix := int(y0), int(x0)
	var v float64
	for dy := 0; dy < 2; dy++ {
		yy := iy + dy
		if yy < 0 || yy >= h {
			continue
		}
		wy := 1 - fy
		if dy == 1 {
			wy = fy
		}
		for dx := 0; dx < 2; dx++ {
			xx := ix + dx
			if xx < 0 || xx >= w {
				continue
			}
			wx := 1 - fx
			if dx == 1 {
				wx = fx
			}
			v += wy * wx * plane[yy*w+xx]
		}
	}
	return v
}

// deformConv is a 2-D convolution whose taps are moved by learned offsets
// (and scaled by an optional mask): output (i, j), tap (kh, kw) reads X
// bilinearly at (i*sh - ph + kh*dh + Δh, j*sw - pw + kw*dw + Δw), zero
// outside the image.
func deformConv(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, w, off := in[0], in[1], in[2]
	b, mask := optIn(in, 3), optIn(in, 4)
	if len(x.Shape) != 4 || len(w.Shape) != 4 || len(off.Shape) != 4 {
		return nil, fmt.Errorf("X %v, W %v, offset %v: DeformConv supports 2-D images", x.Shape, w.Shape, off.Shape)
	}
	n, ic, ih, iw := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	oc, icg, kh, kw := w.Shape[0], w.Shape[1], w.Shape[2], w.Shape[3]
	group, og := int(c.Int("group", 1)), int(c.Int("offset_group", 1))
	if group <= 0 || og <= 0 || ic != icg*group || oc%group != 0 || ic%og != 0 {
		return nil, fmt.Errorf("channels of X %v and W %v do not fit group %d and offset_group %d", x.Shape, w.Shape, group, og)
	}
	s, err := spatialInts(c, "strides", 2, 1, 1)
	if err != nil {
		return nil, err
	}
	d, err := spatialInts(c, "dilations", 2, 1, 1)
	if err != nil {
		return nil, err
	}
	pads, err := spatialInts2(c, "pads", 2)
	if err != nil {
		return nil, err
	}
	oh, ow := off.Shape[2], off.Shape[3]
	if off.Shape[0] != n || off.Shape[1] != og*kh*kw*2 ||
		oh != (ih+pads[0]+pads[2]-(kh-1)*d[0]-1)/s[0]+1 || ow != (iw+pads[1]+pads[3]-(kw-1)*d[1]-1)/s[1]+1 {
		return nil, fmt.Errorf("offset %v does not fit X %v, W %v, strides, dilations and pads", off.Shape, x.Shape, w.Shape)
	}
	if mask != nil && (mask.Len() != n*og*kh*kw*oh*ow) {
		return nil, fmt.Errorf("mask %v: want %v", mask.Shape, []int{n, og * kh * kw, oh, ow})
	}
	if b != nil && b.Len() != oc {
		return nil, fmt.Errorf("B %v: want %d values", b.Shape, oc)
	}
	y := c.alloc(x.DType, n, oc, oh, ow)
	xs, ws, offs := x.Float64s(), w.Float64s(), off.Float64s()
	var ms, bs []float64
	if mask != nil {
		ms = mask.Float64s()
	}
	if b != nil {
		bs = b.Float64s()
	}
	ys := make([]float64, y.Len())
	ocg, icog := oc/group, ic/og
	// samples[(kh*kw) * (oh*ow)] of one input channel, reused.
	samples := make([]float64, kh*kw*oh*ow)
	for bi := range n {
		for ci := range ic {
			g, o := ci/icg, ci/icog
			plane := xs[(bi*ic+ci)*ih*iw : (bi*ic+ci+1)*ih*iw]
			for k := range kh * kw {
				ki, kj := k/kw, k%kw
				for i := range oh {
					for j := range ow {
						base := ((bi*og+o)*kh*kw + k) * 2
						dh := offs[(base*oh+i)*ow+j]
						dw := offs[((base+1)*oh+i)*ow+j]
						v := bilinearZero(plane, ih, iw, float64(i*s[0]-pads[0]+ki*d[0])+dh, float64(j*s[1]-pads[1]+kj*d[1])+dw)
						if ms != nil {
							v *= ms[(((bi*og+o)*kh*kw+k)*oh+i)*ow+j]
						}
						samples[k*oh*ow+i*ow+j] = v
					}
				}
			}
			for oo := g * ocg; oo < (g+1)*ocg; oo++ {
				dst := ys[(bi*oc+oo)*oh*ow : (bi*oc+oo+1)*oh*ow]
				wk := ws[(oo*icg+ci%icg)*kh*kw : (oo*icg+ci%icg+1)*kh*kw]
				for k, wv := range wk {
					src := samples[k*oh*ow : (k+1)*oh*ow]
					for p := range dst {
						dst[p] += wv * src[p]
					}
				}
			}
		}
	}
	if bs != nil {
		for i := range ys {
			ys[i] += bs[(i/(oh*ow))%oc]
		}
	}
	storeRounded(c, y, ys)
	return []*Tensor{y}, nil
}

func init() {
	reg("ConvTranspose", 1, 0, convTranspose)
	reg("Col2Im", 18, 0, col2im)
	reg("DeformConv", 19, 0, deformConv)
}
