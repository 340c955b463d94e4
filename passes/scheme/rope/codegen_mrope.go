package rope

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
)

// mropeData is what the mrope templates read: multimodal RoPE (M-RoPE,
// Qwen2-VL), whose position ids have a leading axis of streams
// ([streams, batch, seq]: temporal, height, width) and whose pairs each
// turn with the position of one stream (the sections).
type mropeData struct {
	Doc                []string
	HeadDim, RotaryDim int
	K                  int
	Pairs              [][2]int
	Streams            int
	Sections           []int
	PairStream         []int
	// Freq are the frequencies as the model stores them (FreqFrom),
	// multiplied by the positions in Product, in Type; Scale (ScaleFrom)
	// multiplies cos and sin after.
	Freq              *emit.Table
	FreqFrom, Product string
	Type              string
	Scale             float64
	ScaleFrom         string
	PosFrom           string

	// Golden: cos and sin [n][K] at the tokens whose positions (one per
	// stream, [Streams][n]) are Positions.
	Cases []*mropeCase

	// Arith is the type of the rotation's products and sums (ApplyMRoPE);
	// ApplyWhy says why ApplyMRoPE is not written ("" when it is); Apply
	// are its golden vectors, the model's rotation of x at the positions
	// of each case.
	Arith    string
	ApplyWhy string
	Apply    []*rotationCase
}

// mropeCase is one call of MRoPECosSin.
type mropeCase struct {
	N         int
	Positions *emit.Table
	Cos, Sin  *emit.Table
}

func emitMRoPE(g *emit.Gen, f *passes.Finding, p *Params, ev *Evidence, suffix string) (*emit.Part, error) {
	if ev.Streams == "" || len(ev.PairStream) != len(ev.Pairs) {
		return nil, emit.Skip("multimodal RoPE: the audit did not name the positions input the streams are read from")
	}
	a := ev.Angles
	if a == nil || a.Program != nil {
		return nil, emit.Skip("multimodal RoPE: the cos/sin are not the positions times constant frequencies the graph computes (%s)", ev.ExactWhy)
	}
	if a.Type != graph.Float || a.Out != graph.Float {
		return nil, emit.Skip("multimodal RoPE computed in %s (applied in %s): codegen writes float32 M-RoPE", emit.TypeName(a.Type), emit.TypeName(a.Out))
	}
	if len(ev.Blocks) == 0 {
		return nil, emit.Skip("no rotation of q or k to test the code against")
	}
	rot, err := rotationOf(g, ev.Blocks[0])
	if err != nil {
		return nil, err
	}
	d := &mropeData{HeadDim: p.HeadDim, RotaryDim: p.RotaryDim, K: len(ev.Pairs), Pairs: ev.Pairs, Streams: len(p.MultimodalSections),
		Sections: p.MultimodalSections, PairStream: ev.PairStream, FreqFrom: a.FreqFrom, Product: a.Product, Type: emit.TypeName(a.Type),
		Scale: 1, PosFrom: ev.Streams}
	if a.ScaleFrom != "" {
		d.Scale, d.ScaleFrom = a.Scale, a.ScaleFrom
	}
	d.Freq = &emit.Table{Name: "MRoPEInvFreq" + suffix, Type: "float64", Vals: a.Freq, From: a.FreqFrom}
	pt := &emit.Part{Tmpl: "mrope", Data: d}

	// Golden vectors: tokens whose streams hold different positions (up
	// to MaxPositions-1), and a Qwen2-VL prompt (text on the diagonal, a
	// 3 x 4 image grid at one time step, text after it).
	sp := emit.SamplePositions(g.Opts.MaxPositions)
	n := len(sp)
	mixed := make([]float64, d.Streams*n)
	for s := 0; s < d.Streams; s++ {
		for i := 0; i < n; i++ {
			mixed[s*n+i] = float64(sp[(i*(6*s+1)+3*s)%n])
		}
	}
	var prompt [][]float64
	for i := 0; i < 5; i++ {
		prompt = append(prompt, []float64{float64(i), float64(i), float64(i)})
	}
	for r := 0; r < 3; r++ {
		for c := 0; c < 4; c++ {
			prompt = append(prompt, []float64{5, float64(5 + r), float64(5 + c)})
		}
	}
	for i := 0; i < 4; i++ {
		prompt = append(prompt, []float64{float64(9 + i), float64(9 + i), float64(9 + i)})
	}
	pv := make([]float64, d.Streams*len(prompt))
	for i, tok := range prompt {
		for s := 0; s < d.Streams; s++ {
			pv[s*len(prompt)+i] = tok[min(s, len(tok)-1)]
		}
	}
	d.Arith, d.ApplyWhy = rotationArith(g, rot)
	for _, c := range [][]float64{mixed, pv} {
		m := len(c) / d.Streams
		_, pdt, err := probe.BoundShape(g.Ctx, ev.Streams, m)
		if err != nil {
			return nil, fmt.Errorf("golden vectors: the positions input: %w", err)
		}
		pos, err := emit.TensorOf(pdt, []int{d.Streams, 1, m}, c)
		if err != nil {
			return nil, fmt.Errorf("golden vectors: %w", err)
		}
		cos, sin, err := unitCosSin(g, rot, ev, p.HeadDim, m, map[string]*kernels.Tensor{ev.Streams: pos})
		if err != nil {
			return nil, fmt.Errorf("golden vectors: %w", err)
		}
		x := len(d.Cases)
		mc := &mropeCase{N: m,
			Positions: &emit.Table{Name: fmt.Sprintf("goldenMRoPEPositions%s_%d", suffix, x), Type: "int64", Vals: c, Golden: true},
			Cos:       &emit.Table{Name: fmt.Sprintf("goldenMRoPECos%s_%d", suffix, x), Type: "float32", Golden: true},
			Sin:       &emit.Table{Name: fmt.Sprintf("goldenMRoPESin%s_%d", suffix, x), Type: "float32", Golden: true}}
		for i := 0; i < m; i++ {
			mc.Cos.Vals = append(mc.Cos.Vals, cos[i]...)
			mc.Sin.Vals = append(mc.Sin.Vals, sin[i]...)
			// The arithmetic the templates write must give the model's
			// values.
			for k := range d.Pairs {
				ac, as := d.cosSin(int64(c[d.PairStream[k]*m+i]), k)
				if !emit.Close32(ac, cos[i][k]) || !emit.Close32(as, sin[i][k]) {
					return nil, emit.Skip("at token %d (positions %v) pair %d the model gives (%.9g, %.9g), the arithmetic (%.9g, %.9g)",
						i, tokenPositions(c, d.Streams, m, i), k, cos[i][k], sin[i][k], ac, as)
				}
			}
		}
		d.Cases = append(d.Cases, mc)
		if d.ApplyWhy != "" {
			continue
		}
		// ApplyMRoPE: the model's rotation of x at the same positions.
		rc, why, err := goldenRotation(g, rot, ev, p.HeadDim, m, map[string]*kernels.Tensor{ev.Streams: pos}, fmt.Sprintf("goldenApplyMRoPEWant%s_%d", suffix, x),
			func(tok, k int) (float64, float64, bool) {
				ac, as := d.cosSin(int64(c[d.PairStream[k]*m+tok]), k)
				return ac, as, true
			})
		if err != nil {
			return nil, fmt.Errorf("golden vectors of the rotation: %w", err)
		}
		if why != "" {
			d.ApplyWhy, d.Apply = fmt.Sprintf("%s (positions %v)", why, tokenPositions(c, d.Streams, m, 0)), nil
			continue
		}
		rc.Positions = mc.Positions
		d.Apply = append(d.Apply, rc)
	}
	var secs []string
	names := []string{"temporal", "height", "width"}
	for s, x := range d.Sections {
		nm := fmt.Sprintf("stream %d", s)
		if d.Streams == 3 {
			nm = names[s]
		}
		secs = append(secs, fmt.Sprintf("%d from the %s positions", x, nm))
	}
	d.Doc = []string{fmt.Sprintf("Multimodal RoPE (M-RoPE) of layers %s: head dim %d, %d pairs, %d position streams read from %s ([streams, batch, seq]); the frequencies are split into sections, %s. The angles are each pair's stream position times the frequencies of %s, computed in %s by %s as the model does, then cos and sin%s.",
		emit.LayerList(f.Layers), p.HeadDim, d.K, d.Streams, d.PosFrom, emit.JoinAnd(secs), d.FreqFrom, d.Type, d.Product, mropeScaleDoc(d.Scale, d.ScaleFrom)),
		applyDoc("ApplyMRoPE"+suffix, p.Layout, p.RotaryDim, p.HeadDim, d.Arith, d.ApplyWhy)}
	pt.Emitted = emit.Emitted{Functions: []string{"MRoPECosSin" + suffix}, Form: "computed", Positions: g.Opts.MaxPositions}
	if d.ApplyWhy == "" {
		pt.Emitted.Functions = append(pt.Emitted.Functions, "ApplyMRoPE"+suffix)
	}
	for _, c := range d.Cases {
		pt.Emitted.Golden += len(c.Cos.Vals) + len(c.Sin.Vals)
	}
	for _, c := range d.Apply {
		pt.Emitted.Golden += len(c.Want.Vals)
	}
	return pt, nil
}

// cosSin is the cos and sin of pair k at position pos as the templates
// compute them.
func (d *mropeData) cosSin(pos int64, k int) (float64, float64) {
	x := emit.RoundTo(graph.Float, float64(pos))
	t := emit.RoundTo(graph.Float, x*d.Freq.Vals[k])
	c, s := emit.RoundTo(graph.Float, math.Cos(t)), emit.RoundTo(graph.Float, math.Sin(t))
	if d.ScaleFrom != "" {
		c, s = emit.RoundTo(graph.Float, c*d.Scale), emit.RoundTo(graph.Float, s*d.Scale)
	}
	return c, s
}

func tokenPositions(c []float64, streams, m, i int) []float64 {
	var out []float64
	for s := 0; s < streams; s++ {
		out = append(out, c[s*m+i])
	}
	return out
}

func mropeScaleDoc(scale float64, from string) string {
	if from == "" {
		return ""
	}
	return fmt.Sprintf(" scaled by %s (%s)", emit.FmtFloat(scale, 32), from)
}

// unitCosSin runs the rotation of rot as the model computes it for
// sequence length seq (the binding of ExtractSpec.Seq), for q one at the
// first dimension of every pair, with other values given at cuts: the
// rotated q holds the cos and sin applied to every token, [token][pair]
// (head 0). The tokens are q's position axis (seq of them, or those of
// an image bound for seq).
func unitCosSin(g *emit.Gen, rot *codeRotation, ev *Evidence, headDim, seq int, cuts map[string]*kernels.Tensor) ([][]float64, [][]float64, error) {
	first := map[int]bool{}
	for _, pr := range ev.Pairs {
		first[pr[0]] = true
	}
	r, err := rotated(g, rot, ev, headDim, seq, func(i int) float64 {
		if first[i%headDim] {
			return 1
		}
		return 0
	}, cuts)
	if err != nil {
		return nil, nil, err
	}
	cos, sin := make([][]float64, r.n), make([][]float64, r.n)
	for s := 0; s < r.n; s++ {
		for _, pr := range ev.Pairs {
			cos[s] = append(cos[s], r.at(s, 0, pr[0]))
			sin[s] = append(sin[s], r.at(s, 0, pr[1]))
		}
	}
	return cos, sin, nil
}

// rotatedQ is q as the model's rotation gives it back: n tokens of heads
// heads, out in the order [token][head][head dim] (row-major), which is
// the order of the generated Apply functions' x.
type rotatedQ struct {
	n, heads, headDim int
	out               []float64
}

func (r *rotatedQ) at(tok, h, e int) float64 { return r.out[(tok*r.heads+h)*r.headDim+e] }

// rotated runs the rotation of rot as the model computes it for sequence
// length seq (the binding of ExtractSpec.Seq), for q given by x (of the
// index in the order [token][head][head dim]), with other values given at
// cuts. The
// tokens are q's position axis (seq of them, or those of an image bound
// for seq).
func rotated(g *emit.Gen, rot *codeRotation, ev *Evidence, headDim, seq int, x func(i int) float64, cuts map[string]*kernels.Tensor) (*rotatedQ, error) {
	shape, qType, err := probe.BoundShape(g.Ctx, rot.in, seq)
	if err != nil {
		return nil, err
	}
	n := seq
	if a := ev.Axis; a > 0 && a < len(shape)-1 {
		n = shape[a]
	}
	l, err := newQLayout(shape, n, headDim, ev.Axis)
	if err != nil {
		return nil, err
	}
	size := 1
	for _, x := range shape {
		size *= x
	}
	v := make([]float64, size)
	for s := 0; s < shape[l.pos]; s++ {
		for h := 0; h < l.heads; h++ {
			for e := 0; e < headDim; e++ {
				v[l.index(s, h, e)] = x((s*l.heads+h)*headDim + e)
			}
		}
	}
	q, err := emit.TensorOf(qType, shape, v)
	if err != nil {
		return nil, err
	}
	all := map[string]*kernels.Tensor{rot.in: q}
	for k, t := range cuts {
		all[k] = t
	}
	if rot.others != nil {
		others, err := rot.others(seq)
		if err != nil {
			return nil, err
		}
		for k, t := range others {
			all[k] = t
		}
	}
	r, err := g.Extract(probe.ExtractSpec{Values: []string{rot.out}, Seq: seq, Cuts: all})
	if err != nil {
		return nil, err
	}
	out, err := r.Run(nil)
	if err != nil {
		return nil, err
	}
	lo := l
	if !slices.Equal(out[0].Shape, shape) {
		if lo, err = newQLayout(out[0].Shape, n, headDim, -1); err != nil || lo.heads != l.heads {
			return nil, fmt.Errorf("the rotation gives shape %v for q of shape %v", out[0].Shape, shape)
		}
	}
	o := out[0].Float64s()
	res := &rotatedQ{n: n, heads: l.heads, headDim: headDim, out: make([]float64, n*l.heads*headDim)}
	for s := 0; s < n; s++ {
		for h := 0; h < l.heads; h++ {
			for e := 0; e < headDim; e++ {
				res.out[(s*l.heads+h)*headDim+e] = o[lo.index(s, h, e)]
			}
		}
	}
	return res, nil
}
