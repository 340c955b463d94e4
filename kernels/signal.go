package kernels

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
)

// Signal processing for audio front ends: DFT, STFT, the Hann, Hamming
// and Blackman windows and MelWeightMatrix. Complex values are held as a
// trailing axis of 2 (real, imaginary); a trailing axis of 1 is a real
// signal. Transforms are computed in float64.

// dft is a discrete Fourier transform of length n: out[k] = scale *
// sum_t in[t] e^(∓2πi kt/n) (in zero-padded or cut to n), with a table
// of the n twiddle factors.
type dft struct {
	n        int
	cos, sin []float64
}

func newDFT(n int) *dft {
	d := &dft{n: n, cos: make([]float64, n), sin: make([]float64, n)}
	for i := range n {
		a := 2 * math.Pi * float64(i) / float64(n)
		d.cos[i], d.sin[i] = math.Cos(a), math.Sin(a)
	}
	return d
}

// transform computes bins [0, kmax) of the transform of (re, im) (of
// any length; missing samples are zero). inverse uses e^(+2πi kt/n).
func (d *dft) transform(outRe, outIm, re, im []float64, kmax int, inverse bool, scale float64) {
	m := min(len(re), d.n)
	for k := range kmax {
		var sr, si float64
		idx := 0
		for t := range m {
			c, s := d.cos[idx], d.sin[idx]
			if !inverse {
				s = -s
			}
			x, y := re[t], 0.0
			if im != nil {
				y = im[t]
			}
			sr += x*c - y*s
			si += x*s + y*c
			idx += k
			if idx >= d.n {
				idx -= d.n
			}
		}
		outRe[k], outIm[k] = sr*scale, si*scale
	}
}

func dftKernel(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	r := len(x.Shape)
	if r < 2 || (x.Shape[r-1] != 1 && x.Shape[r-1] != 2) {
		return nil, fmt.Errorf("input %v: the last axis must be 1 (real) or 2 (complex)", x.Shape)
	}
	axisV := c.Int("axis", 1)
	if c.Opset >= 20 {
		axisV = -2
		if t := optIn(in, 2); t != nil {
			v, err := scalarInt(t, "axis")
			if err != nil {
				return nil, err
			}
			axisV = v
		}
	}
	axis, err := normAxis(axisV, r)
	if err != nil || axis == r-1 {
		return nil, fmt.Errorf("axis %d: must be a signal axis of %v", axisV, x.Shape)
	}
	inverse, onesided := c.Int("inverse", 0) != 0, c.Int("onesided", 0) != 0
	m := x.Shape[axis]
	n := m
	if inverse && onesided {
		n = 2 * (m - 1)
	}
	if t := optIn(in, 1); t != nil && t.Len() > 0 {
		v, err := scalarInt(t, "dft_length")
		if err != nil {
			return nil, err
		}
		if v > math.MaxInt32 {
			return nil, fmt.Errorf("dft_length %d: %w", v, ErrTooLarge)
		}
		n = int(v)
	}
	if n < 1 {
		return nil, fmt.Errorf("dft_length %d must be positive", n)
	}
	complexIn := x.Shape[r-1] == 2
	outLen, outC := n, 2
	switch {
	case inverse && onesided:
		outC = 1
	case onesided:
		outLen = n/2 + 1
	}
	shape := slices.Clone(x.Shape)
	shape[axis], shape[r-1] = outLen, outC
	y := c.alloc(x.DType, shape...)
	xs := x.Float64s()
	ys := make([]float64, y.Len())
	outer, inner := shapeSize(x.Shape[:axis]), shapeSize(x.Shape[axis+1:r-1])
	ch := x.Shape[r-1]
	c.reserveElems(max(m, n), 8*8) // the scratch of one transform
	re, im := make([]float64, max(m, n)), make([]float64, max(m, n))
	ore, oim := make([]float64, n), make([]float64, n)
	fre, fim := make([]float64, n), make([]float64, n) // Hermitian spectrum (irfft)
	d := newDFT(n)
	for o := range outer {
		for i := range inner {
			clear(re)
			clear(im)
			for t := range m {
				p := ((o*m+t)*inner + i) * ch
				re[t] = xs[p]
				if complexIn {
					im[t] = xs[p+1]
				}
			}
			switch {
			case inverse && onesided:
				// The full Hermitian spectrum of the one-sided bins
				// (cut or zero-padded to n/2+1; the imaginary parts of
				// the DC and Nyquist bins are ignored), then a real
				// inverse transform.
				h := n/2 + 1
				clear(fre)
				clear(fim)
				for k := 0; k < h && k < m; k++ {
					fre[k], fim[k] = re[k], im[k]
				}
				fim[0] = 0
				if n%2 == 0 {
					fim[n/2] = 0
				}
				for k := 1; k < h; k++ {
					if n-k != k {
						fre[n-k], fim[n-k] = fre[k], -fim[k]
					}
				}
				d.transform(ore, oim, fre, fim, n, true, 1/float64(n))
				for t := range n {
					ys[(o*outLen+t)*inner+i] = ore[t]
				}
			default:
				scale := 1.0
				if inverse {
					scale = 1 / float64(n)
				}
				var imv []float64
				if complexIn {
					imv = im[:m]
				}
				d.transform(ore, oim, re[:m], imv, outLen, inverse, scale)
				for k := range outLen {
					p := ((o*outLen+k)*inner + i) * 2
					ys[p], ys[p+1] = ore[k], oim[k]
				}
			}
		}
	}
	storeRounded(c, y, ys)
	return []*Tensor{y}, nil
}

// stft is the short-time Fourier transform of signal (batch, length, 1 or
// 2): frames of frame_length samples every frame_step, weighted by window
// (ones when absent), each transformed (onesided by default).
func stft(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, stepT := in[0], in[1]
	win, flT := optIn(in, 2), optIn(in, 3)
	if len(x.Shape) != 3 || (x.Shape[2] != 1 && x.Shape[2] != 2) {
		return nil, fmt.Errorf("signal %v: want (batch, length, 1 or 2)", x.Shape)
	}
	st, err := scalarInt(stepT, "frame_step")
	if err != nil {
		return nil, err
	}
	step := int(min(max(st, -1), math.MaxInt32))
	fl := x.Shape[1]
	if win != nil {
		fl = win.Len()
	}
	if flT != nil {
		v, err := scalarInt(flT, "frame_length")
		if err != nil {
			return nil, err
		}
		fl = int(min(max(v, -1), math.MaxInt32))
	}
	if step <= 0 || fl <= 0 {
		return nil, fmt.Errorf("frame_step %d and frame_length %d must be positive", step, fl)
	}
	if l := x.Shape[1]; l < fl {
		return nil, fmt.Errorf("signal of %d samples is shorter than a frame of %d", l, fl)
	}
	// The window, the twiddle table and the frame buffers are of the
	// frame's length (bounded here: the output may have no elements).
	c.reserveElems(fl, 8*8)
	var w []float64
	if win != nil {
		if len(win.Shape) != 1 {
			return nil, fmt.Errorf("window %v must be 1-D", win.Shape)
		}
		w = win.Float64s()
	} else {
		w = make([]float64, fl)
		for i := range w {
			w[i] = 1
		}
	}
	b, l, ch := x.Shape[0], x.Shape[1], x.Shape[2]
	frames := 1 + (l-fl)/step
	onesided := c.Int("onesided", 1) != 0
	bins := fl
	if onesided {
		bins = fl/2 + 1
	}
	y := c.alloc(x.DType, b, frames, bins, 2)
	xs := x.Float64s()
	ys := make([]float64, y.Len())
	d := newDFT(fl)
	ws := len(w)
	re, im := make([]float64, ws), make([]float64, ws)
	ore, oim := make([]float64, bins), make([]float64, bins)
	for bi := range b {
		for f := range frames {
			clear(re)
			clear(im)
			for t := range ws {
				s := f*step + t
				if s >= l {
					break
				}
				re[t] = xs[(bi*l+s)*ch] * w[t]
				if ch == 2 {
					im[t] = xs[(bi*l+s)*ch+1] * w[t]
				}
			}
			var imv []float64
			if ch == 2 {
				imv = im
			}
			d.transform(ore, oim, re, imv, bins, false, 1)
			for k := range bins {
				p := ((bi*frames+f)*bins + k) * 2
				ys[p], ys[p+1] = ore[k], oim[k]
			}
		}
	}
	storeRounded(c, y, ys)
	return []*Tensor{y}, nil
}

// windowKernel makes a window of size values of output_datatype
// (float32 by default): w(n) over N = size (periodic) or size-1.
func windowKernel(f func(n, N float64) float64) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		size, err := scalarInt(in[0], "size")
		if err != nil {
			return nil, err
		}
		if size < 0 || size > math.MaxInt32 {
			return nil, fmt.Errorf("size %d", size)
		}
		dt := graph.Float
		if c.Attr("output_datatype") != nil {
			var err error
			if dt, err = dtypeAttr(c, "output_datatype"); err != nil {
				return nil, err
			}
		}
		N := float64(size)
		if c.Int("periodic", 1) == 0 {
			N--
		}
		y := c.alloc(dt, int(size))
		v := make([]float64, size)
		for i := range v {
			v[i] = f(float64(i), N)
		}
		storeRounded(c, y, v)
		return []*Tensor{y}, nil
	}
}

// melWeightMatrix maps num_spectrogram_bins = dft_length/2+1 linear
// frequency bins to num_mel_bins triangular mel filters between the edge
// frequencies, with the bin arithmetic of ONNX's reference (the edge mels
// in float32, the rest in float64, bins floored).
func melWeightMatrix(c *Call, in []*Tensor) ([]*Tensor, error) {
	for i, name := range []string{"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"} {
		if in[i].Len() != 1 {
			return nil, fmt.Errorf("%s must have one element, got %v", name, in[i].Shape)
		}
	}
	nmel, dftLen, sr := in[0].Int64s()[0], in[1].Int64s()[0], in[2].Int64s()[0]
	lo, hi := float32(in[3].Float64s()[0]), float32(in[4].Float64s()[0])
	if nmel <= 0 || dftLen <= 0 || sr <= 0 || nmel > math.MaxInt32 || dftLen > math.MaxInt32 {
		return nil, fmt.Errorf("num_mel_bins %d, dft_length %d, sample_rate %d must be positive", nmel, dftLen, sr)
	}
	dt := graph.Float
	if c.Attr("output_datatype") != nil {
		var err error
		if dt, err = dtypeAttr(c, "output_datatype"); err != nil {
			return nil, err
		}
	}
	mel := func(hz float32) float32 {
		return 2595 * float32(math.Log10(float64(1+hz/700)))
	}
	lm, hm := mel(lo), mel(hi)
	step := (hm - lm) / float32(nmel+2)
	nbins := int(dftLen/2 + 1)
	fb := make([]int, nmel+2)
	for i := range fb {
		m := float64(i)*float64(step) + float64(lm)
		hz := 700 * (math.Pow(10, m/2595) - 1)
		fb[i] = int(math.Floor(float64(dftLen+1) * hz / float64(sr)))
	}
	y := c.alloc(dt, nbins, int(nmel))
	v := make([]float64, y.Len())
	set := func(j, i int, x float64) error {
		if j < 0 || j >= nbins {
			return fmt.Errorf("mel filter %d reaches bin %d of %d (edge frequencies beyond the sample rate's range)", i, j, nbins)
		}
		v[j*int(nmel)+i] = x
		return nil
	}
	for i := range int(nmel) {
		l, ce, h := fb[i], fb[i+1], fb[i+2]
		if ce == l {
			if err := set(ce, i, 1); err != nil {
				return nil, err
			}
		} else {
			for j := l; j <= ce; j++ {
				if err := set(j, i, float64(j-l)/float64(ce-l)); err != nil {
					return nil, err
				}
			}
		}
		for j := ce; j < h; j++ {
			if err := set(j, i, float64(h-j)/float64(h-ce)); err != nil {
				return nil, err
			}
		}
	}
	storeRounded(c, y, v)
	return []*Tensor{y}, nil
}

func init() {
	reg("DFT", 17, 0, dftKernel)
	reg("STFT", 17, 0, stft)
	reg("HannWindow", 17, 0, windowKernel(func(n, N float64) float64 {
		s := math.Sin(math.Pi * n / N)
		return s * s
	}))
	reg("HammingWindow", 17, 0, windowKernel(func(n, N float64) float64 {
		const alpha = 25.0 / 46.0
		return alpha - (1-alpha)*math.Cos(2*math.Pi*n/N)
	}))
	reg("BlackmanWindow", 17, 0, windowKernel(func(n, N float64) float64 {
		return 0.42 - 0.5*math.Cos(2*math.Pi*n/N) + 0.08*math.Cos(4*math.Pi*n/N)
	}))
	reg("MelWeightMatrix", 17, 0, melWeightMatrix)
}
