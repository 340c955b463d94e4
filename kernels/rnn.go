package kernels

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
)

// The recurrent layers RNN, GRU and LSTM, as ONNX specifies them (and
// ONNX Runtime runs them): forward, reverse or bidirectional, per-batch
// sequence_lens (steps past a sequence's end give zeros in Y and leave
// its state), clip, custom activations with their alpha/beta, layout 0
// (sequence first) or 1 (batch first); GRU's linear_before_reset, LSTM's
// peepholes and input_forget. Gates are computed in float64: the input
// projection of all steps in one matrix product, the recurrent one per
// step.

// rnnAct is an activation function of a recurrent layer.
type rnnAct func(float64) float64

// rnnActivation returns the named activation; alpha and beta are its
// values of activation_alpha/beta (nil: the default).
func rnnActivation(name string, alpha, beta *float64) (rnnAct, error) {
	get := func(p *float64, def float64) float64 {
		if p != nil {
			return *p
		}
		return def
	}
	switch strings.ToLower(name) {
	case "sigmoid":
		return sigmoid, nil
	case "tanh":
		return math.Tanh, nil
	case "relu":
		return func(x float64) float64 { return math.Max(x, 0) }, nil
	case "affine":
		a, b := get(alpha, 1), get(beta, 0)
		return func(x float64) float64 { return a*x + b }, nil
	case "leakyrelu":
		a := get(alpha, 0.01)
		return func(x float64) float64 {
			if x < 0 {
				return a * x
			}
			return x
		}, nil
	case "thresholdedrelu":
		a := get(alpha, 1)
		return func(x float64) float64 {
			if x > a {
				return x
			}
			return 0
		}, nil
	case "scaledtanh":
		a, b := get(alpha, 1), get(beta, 1)
		return func(x float64) float64 { return a * math.Tanh(b*x) }, nil
	case "hardsigmoid":
		a, b := get(alpha, 0.2), get(beta, 0.5)
		return func(x float64) float64 { return math.Max(0, math.Min(1, a*x+b)) }, nil
	case "elu":
		a := get(alpha, 1)
		return func(x float64) float64 {
			if x < 0 {
				return a * math.Expm1(x)
			}
			return x
		}, nil
	case "softsign":
		return func(x float64) float64 { return x / (1 + math.Abs(x)) }, nil
	case "softplus":
		return func(x float64) float64 { return math.Log1p(math.Exp(-math.Abs(x))) + math.Max(x, 0) }, nil
	}
	return nil, fmt.Errorf("activation %q", name)
}

// usesAlpha and usesBeta tell which activations consume activation_alpha
// and activation_beta values.
func usesAlpha(name string) bool {
	switch strings.ToLower(name) {
	case "affine", "leakyrelu", "thresholdedrelu", "scaledtanh", "hardsigmoid", "elu":
		return true
	}
	return false
}

func usesBeta(name string) bool {
	switch strings.ToLower(name) {
	case "affine", "scaledtanh", "hardsigmoid":
		return true
	}
	return false
}

// rnnSetup is what the three layers share.
type rnnSetup struct {
	seq, batch, in, hidden, dirs, gates int
	layout                              int
	x, w, r, b                          []float64 // x as (seq, batch, in)
	lens                                []int
	h0                                  []float64 // (dirs, batch, hidden)
	clip                                float64
	acts                                [][]rnnAct // per direction
}

func newRNNSetup(c *Call, in []*Tensor, gates int, defActs []string) (*rnnSetup, error) {
	x, w, r := in[0], in[1], in[2]
	s := &rnnSetup{gates: gates, layout: int(c.Int("layout", 0))}
	switch d := c.String("direction", "forward"); d {
	case "forward", "reverse":
		s.dirs = 1
	case "bidirectional":
		s.dirs = 2
	default:
		return nil, fmt.Errorf("direction %q", d)
	}
	if len(x.Shape) != 3 || len(w.Shape) != 3 || len(r.Shape) != 3 {
		return nil, fmt.Errorf("X %v, W %v, R %v must be 3-D", x.Shape, w.Shape, r.Shape)
	}
	s.seq, s.batch, s.in = x.Shape[0], x.Shape[1], x.Shape[2]
	if s.layout == 1 {
		s.seq, s.batch = s.batch, s.seq
	}
	s.hidden = r.Shape[2]
	if h := c.Int("hidden_size", int64(s.hidden)); int(h) != s.hidden {
		return nil, fmt.Errorf("hidden_size %d differs from R %v", h, r.Shape)
	}
	H, G := s.hidden, gates
	if !equalShape(w.Shape, []int{s.dirs, G * H, s.in}) || !equalShape(r.Shape, []int{s.dirs, G * H, H}) {
		return nil, fmt.Errorf("W %v and R %v: want %v and %v", w.Shape, r.Shape, []int{s.dirs, G * H, s.in}, []int{s.dirs, G * H, H})
	}
	xs := x.Float64s()
	if s.layout == 1 {
		t := make([]float64, len(xs))
		for b := range s.batch {
			for q := range s.seq {
				copy(t[(q*s.batch+b)*s.in:(q*s.batch+b+1)*s.in], xs[(b*s.seq+q)*s.in:(b*s.seq+q+1)*s.in])
			}
		}
		xs = t
	}
	s.x, s.w, s.r = xs, w.Float64s(), r.Float64s()
	if b := optIn(in, 3); b != nil {
		if !equalShape(b.Shape, []int{s.dirs, 2 * G * H}) {
			return nil, fmt.Errorf("B %v: want %v", b.Shape, []int{s.dirs, 2 * G * H})
		}
		s.b = b.Float64s()
	} else {
		s.b = make([]float64, s.dirs*2*G*H)
	}
	s.lens = make([]int, s.batch)
	for i := range s.lens {
		s.lens[i] = s.seq
	}
	if t := optIn(in, 4); t != nil {
		v := t.Int64s()
		if len(v) != s.batch {
			return nil, fmt.Errorf("sequence_lens of %d for a batch of %d", len(v), s.batch)
		}
		for i, l := range v {
			if l < 0 || l > int64(s.seq) {
				return nil, fmt.Errorf("sequence length %d outside [0, %d]", l, s.seq)
			}
			s.lens[i] = int(l)
		}
	}
	s.h0 = make([]float64, s.dirs*s.batch*H)
	if t := optIn(in, 5); t != nil {
		v, err := rnnState(t, s, "initial_h")
		if err != nil {
			return nil, err
		}
		s.h0 = v
	}
	s.clip = math.Inf(1)
	if c.Attr("clip") != nil {
		s.clip = float64(c.Float("clip", 0))
	}
	names := defActs
	if a := c.Attr("activations"); a != nil {
		names = a.Strings()
		if len(names) == len(defActs) && s.dirs == 2 {
			names = append(slices.Clone(names), names...)
		}
	} else if s.dirs == 2 {
		names = append(slices.Clone(defActs), defActs...)
	}
	if len(names) != len(defActs)*s.dirs {
		return nil, fmt.Errorf("activations %v: want %d per direction", names, len(defActs))
	}
	var alphas, betas []float32
	if a := c.Attr("activation_alpha"); a != nil {
		alphas = a.Floats()
	}
	if a := c.Attr("activation_beta"); a != nil {
		betas = a.Floats()
	}
	ai, bi := 0, 0
	s.acts = make([][]rnnAct, s.dirs)
	for i, n := range names {
		var ap, bp *float64
		if usesAlpha(n) && ai < len(alphas) {
			v := float64(alphas[ai])
			ap = &v
			ai++
		}
		if usesBeta(n) && bi < len(betas) {
			v := float64(betas[bi])
			bp = &v
			bi++
		}
		f, err := rnnActivation(n, ap, bp)
		if err != nil {
			return nil, err
		}
		s.acts[i/len(defActs)] = append(s.acts[i/len(defActs)], f)
	}
	return s, nil
}

// rnnState reads an initial state (dirs, batch, hidden) in the node's
// layout.
func rnnState(t *Tensor, s *rnnSetup, name string) ([]float64, error) {
	want := []int{s.dirs, s.batch, s.hidden}
	if s.layout == 1 {
		want = []int{s.batch, s.dirs, s.hidden}
	}
	if !equalShape(t.Shape, want) {
		return nil, fmt.Errorf("%s %v: want %v", name, t.Shape, want)
	}
	v := t.Float64s()
	if s.layout == 1 {
		o := make([]float64, len(v))
		for b := range s.batch {
			for d := range s.dirs {
				copy(o[(d*s.batch+b)*s.hidden:][:s.hidden], v[(b*s.dirs+d)*s.hidden:][:s.hidden])
			}
		}
		v = o
	}
	return v, nil
}

// project returns x·Wᵀ + Wb for direction d: (seq*batch, G*H).
func (s *rnnSetup) project(c *Call, d int) []float64 {
	GH := s.gates * s.hidden
	n := s.seq * s.batch
	c.reserveElems(n*GH, 8)
	p := make([]float64, n*GH)
	w := s.w[d*GH*s.in : (d+1)*GH*s.in]
	c.mm().Dgemm(false, true, n, GH, s.in, 1, s.x, s.in, w, s.in, 0, p, GH)
	wb := s.b[d*2*GH : d*2*GH+GH]
	for i := range n {
		row := p[i*GH : (i+1)*GH]
		for j := range row {
			row[j] += wb[j]
		}
	}
	return p
}

// reverse reports whether direction d visits the time steps backwards.
func (s *rnnSetup) reverse(c *Call, d int) bool {
	return d == 1 || c.String("direction", "forward") == "reverse"
}

// outputs writes Y (seq, dirs, batch, H) and the final states in the
// node's layout.
func (s *rnnSetup) outputs(c *Call, dt graph.DataType, y []float64, finals ...[]float64) []*Tensor {
	H := s.hidden
	var out []*Tensor
	yShape := []int{s.seq, s.dirs, s.batch, H}
	if s.layout == 1 {
		yShape = []int{s.batch, s.seq, s.dirs, H}
		t := make([]float64, len(y))
		for q := range s.seq {
			for d := range s.dirs {
				for b := range s.batch {
					copy(t[((b*s.seq+q)*s.dirs+d)*H:][:H], y[((q*s.dirs+d)*s.batch+b)*H:][:H])
				}
			}
		}
		y = t
	}
	yt := c.alloc(dt, yShape...)
	storeRounded(c, yt, y)
	out = append(out, yt)
	for _, f := range finals {
		shape := []int{s.dirs, s.batch, H}
		if s.layout == 1 {
			shape = []int{s.batch, s.dirs, H}
			t := make([]float64, len(f))
			for d := range s.dirs {
				for b := range s.batch {
					copy(t[(b*s.dirs+d)*H:][:H], f[(d*s.batch+b)*H:][:H])
				}
			}
			f = t
		}
		ft := c.alloc(dt, shape...)
		storeRounded(c, ft, f)
		out = append(out, ft)
	}
	return out
}

func clipTo(x, lim float64) float64 { return math.Max(-lim, math.Min(lim, x)) }

// rnnCell computes one step of one sequence: from the gate
// pre-activations of the input projection with its bias (xg) and of the
// recurrence without its bias (rg) and the previous state, the new state.
type rnnCell func(xg, rg, hPrev, hNew []float64, b int)

// run runs the recurrence of direction d over every sequence, writing Y
// and leaving the final states in h.
func (s *rnnSetup) run(c *Call, y []float64, h []float64, d int, cell rnnCell) {
	H, GH := s.hidden, s.gates*s.hidden
	xp := s.project(c, d)
	r := s.r[d*GH*H : (d+1)*GH*H]
	rg := make([]float64, s.batch*GH)
	hNew := make([]float64, s.batch*H)
	rev := s.reverse(c, d)
	for k := range s.seq {
		// The states of sequences already ended stay; their Y is 0.
		c.mm().Dgemm(false, true, s.batch, GH, H, 1, h, H, r, H, 0, rg, GH)
		for b := range s.batch {
			l := s.lens[b]
			if k >= l {
				continue
			}
			t := k
			if rev {
				t = l - 1 - k
			}
			cell(xp[(t*s.batch+b)*GH:][:GH], rg[b*GH:][:GH], h[b*H:][:H], hNew[b*H:][:H], b)
			copy(y[((t*s.dirs+d)*s.batch+b)*H:][:H], hNew[b*H:][:H])
		}
		for b := range s.batch {
			if k < s.lens[b] {
				copy(h[b*H:][:H], hNew[b*H:][:H])
			}
		}
	}
}

func rnnKernel(c *Call, in []*Tensor) ([]*Tensor, error) {
	s, err := newRNNSetup(c, in, 1, []string{"Tanh"})
	if err != nil {
		return nil, err
	}
	H := s.hidden
	y := make([]float64, s.seq*s.dirs*s.batch*H)
	hT := slices.Clone(s.h0)
	for d := range s.dirs {
		f := s.acts[d][0]
		rb := s.b[d*2*H+H : d*2*H+2*H]
		s.run(c, y, hT[d*s.batch*H:(d+1)*s.batch*H], d, func(xg, rg, _, hNew []float64, _ int) {
			for j := range H {
				hNew[j] = f(clipTo(xg[j]+rg[j]+rb[j], s.clip))
			}
		})
	}
	return s.outputs(c, in[0].DType, y, hT), nil
}

func gruKernel(c *Call, in []*Tensor) ([]*Tensor, error) {
	s, err := newRNNSetup(c, in, 3, []string{"Sigmoid", "Tanh"})
	if err != nil {
		return nil, err
	}
	H := s.hidden
	lbr := c.Int("linear_before_reset", 0) != 0
	y := make([]float64, s.seq*s.dirs*s.batch*H)
	hT := slices.Clone(s.h0)
	rh := make([]float64, H)
	for d := range s.dirs {
		f, g := s.acts[d][0], s.acts[d][1]
		rb := s.b[d*6*H+3*H : d*6*H+6*H]
		rw := s.r[d*3*H*H : (d+1)*3*H*H]
		s.run(c, y, hT[d*s.batch*H:(d+1)*s.batch*H], d, func(xg, rg, hPrev, hNew []float64, _ int) {
			// Gates z, r, h; rg holds hPrev·Rᵀ for all three.
			for j := range H {
				z := f(clipTo(xg[j]+rg[j]+rb[j], s.clip))
				r := f(clipTo(xg[H+j]+rg[H+j]+rb[H+j], s.clip))
				rh[j] = r
				hNew[j] = z // kept in hNew until h~ is known
			}
			for j := range H {
				var hc float64
				if lbr {
					hc = xg[2*H+j] + rh[j]*(rg[2*H+j]+rb[2*H+j])
				} else {
					// (r ⊙ hPrev)·Rhᵀ
					row := rw[(2*H+j)*H : (2*H+j+1)*H]
					var v float64
					for k, hk := range hPrev {
						v += rh[k] * hk * row[k]
					}
					hc = xg[2*H+j] + v + rb[2*H+j]
				}
				ht := g(clipTo(hc, s.clip))
				z := hNew[j]
				hNew[j] = (1-z)*ht + z*hPrev[j]
			}
		})
	}
	return s.outputs(c, in[0].DType, y, hT), nil
}

func lstmKernel(c *Call, in []*Tensor) ([]*Tensor, error) {
	s, err := newRNNSetup(c, in, 4, []string{"Sigmoid", "Tanh", "Tanh"})
	if err != nil {
		return nil, err
	}
	H := s.hidden
	cT := make([]float64, s.dirs*s.batch*H)
	if t := optIn(in, 6); t != nil {
		if cT, err = rnnState(t, s, "initial_c"); err != nil {
			return nil, err
		}
	}
	p := make([]float64, s.dirs*3*H)
	if t := optIn(in, 7); t != nil {
		if !equalShape(t.Shape, []int{s.dirs, 3 * H}) {
			return nil, fmt.Errorf("P %v: want %v", t.Shape, []int{s.dirs, 3 * H})
		}
		p = t.Float64s()
	}
	coupled := c.Int("input_forget", 0) != 0
	y := make([]float64, s.seq*s.dirs*s.batch*H)
	hT := slices.Clone(s.h0)
	for d := range s.dirs {
		f, g, hAct := s.acts[d][0], s.acts[d][1], s.acts[d][2]
		rb := s.b[d*8*H+4*H : d*8*H+8*H]
		pi, po, pf := p[d*3*H:][:H], p[d*3*H+H:][:H], p[d*3*H+2*H:][:H]
		cs := cT[d*s.batch*H : (d+1)*s.batch*H]
		s.run(c, y, hT[d*s.batch*H:(d+1)*s.batch*H], d, func(xg, rg, _, hNew []float64, b int) {
			cb := cs[b*H : (b+1)*H]
			for j := range H {
				pre := func(gate int) float64 { return xg[gate*H+j] + rg[gate*H+j] + rb[gate*H+j] }
				ig := f(clipTo(pre(0)+pi[j]*cb[j], s.clip))
				fg := f(clipTo(pre(2)+pf[j]*cb[j], s.clip))
				if coupled {
					fg = 1 - ig
				}
				ct := g(clipTo(pre(3), s.clip))
				cn := fg*cb[j] + ig*ct
				og := f(clipTo(pre(1)+po[j]*cn, s.clip))
				cb[j] = cn
				hNew[j] = og * hAct(cn)
			}
		})
	}
	return s.outputs(c, in[0].DType, y, hT, cT), nil
}

func init() {
	reg("RNN", 7, 0, rnnKernel)
	reg("GRU", 7, 0, gruKernel)
	reg("LSTM", 7, 0, lstmKernel)
}
