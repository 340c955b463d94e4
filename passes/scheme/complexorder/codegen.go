package complexorder

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
)

// complexData is what the complexorder templates read: complex-order word
// embeddings (Wang et al. 2020), r(w)·exp(i(ω(w)·pos + θ(w))) carried as
// real and imaginary parts, with the model's per-word tables.
type complexData struct {
	Doc        []string
	Dim, Vocab int
	// Descending: the model counts the positions of n words n-1 .. 0
	// (else 0 .. n-1).
	Descending bool
	// Freq, Phase (nil without a learned phase) and Amp are the per-word
	// tables, [Vocab][Dim], as the model stores them.
	Freq, Phase, Amp *emit.Table
	// Golden: calls at sequences of N words.
	Cases []*complexCase
}

// complexCase: a sequence of N words (word i is Words[i]) and, at the
// tokens Rows, the model's positions, phase, real and imaginary parts
// ([len(Rows)][Dim]).
type complexCase struct {
	N                 int
	Words             []int
	Positions         *emit.Table
	Rows              []int
	Phase, Real, Imag *emit.Table
}

func EmitComplexOrder(g *emit.Gen, f *passes.Finding, suffix string) (*emit.Part, error) {
	ev, p, err := emit.FindingOf[Evidence, Params](f, "no complex-order evidence")
	if err != nil {
		return nil, err
	}
	switch {
	case ev.FreqTable == "" || ev.AmplitudeTable == "":
		return nil, emit.Skip("the frequencies or the amplitudes are not tables gathered by the word ids")
	case ev.TokenIDs == "":
		return nil, emit.Skip("the tables are not gathered by one input of word ids")
	case ev.Real == "" || ev.Imag == "":
		return nil, emit.Skip("no value holds the real or the imaginary part")
	}
	d := &complexData{Dim: p.Dim}
	switch p.PositionOrder {
	case "descending":
		d.Descending = true
	case "ascending":
	default:
		return nil, emit.Skip("the positions are counted neither 0 .. n-1 nor n-1 .. 0")
	}
	read := func(name, goName, what string) (*emit.Table, error) {
		t := probe.Const(g.Ctx, name)
		if t == nil || t.Rank() != 2 || t.Shape[1] != d.Dim {
			return nil, emit.Skip("the %s table %q is not a constant [words, %d]", what, name, d.Dim)
		}
		if t.DType != graph.Float {
			return nil, emit.Skip("the %s table is %s; codegen writes float32 complex-order embeddings", what, emit.TypeName(t.DType))
		}
		if d.Vocab == 0 {
			d.Vocab = t.Shape[0]
		} else if d.Vocab != t.Shape[0] {
			return nil, emit.Skip("the %s table has %d rows, the frequencies %d", what, t.Shape[0], d.Vocab)
		}
		return &emit.Table{Name: goName + suffix, Type: "float32", Vals: t.Float64s(), From: name}, nil
	}
	if d.Freq, err = read(ev.FreqTable, "complexOrderFreq", "frequency"); err != nil {
		return nil, err
	}
	if d.Amp, err = read(ev.AmplitudeTable, "complexOrderAmplitude", "amplitude"); err != nil {
		return nil, err
	}
	if ev.PhaseTable != "" {
		if d.Phase, err = read(ev.PhaseTable, "complexOrderPhase", "phase"); err != nil {
			return nil, err
		}
	}
	pt := &emit.Part{Tmpl: "complexorder", Data: d, Tables: []*emit.Table{d.Freq, d.Amp}}
	if d.Phase != nil {
		pt.Tables = append(pt.Tables, d.Phase)
	}
	for x, n := range []int{1, 8, 64, g.Opts.MaxPositions} {
		c, err := goldenComplexCase(g, d, ev, n, suffix, x)
		if err != nil {
			return nil, err
		}
		d.Cases = append(d.Cases, c)
	}
	order := "0 .. n-1"
	if d.Descending {
		order = "n-1 .. 0 (the last word at 0)"
	}
	phase := "ω(w)·pos"
	if d.Phase != nil {
		phase = "ω(w)·pos + θ(w)"
	}
	line := fmt.Sprintf("Complex-order word embeddings (Wang et al. 2020) of layers %s: a word w at position pos is r(w)·exp(i(%s)), carried as its real part r·cos and imaginary part r·sin, %d wide, for a vocabulary of %d words; the positions of n words are %s. The frequencies ω are the model's %s",
		emit.LayerList(f.Layers), phase, d.Dim, d.Vocab, order, d.Freq.From)
	if d.Phase != nil {
		line += ", the phases θ its " + d.Phase.From
	}
	line += fmt.Sprintf(", the amplitudes r its %s; everything is computed in float32 as the model does.", d.Amp.From)
	d.Doc = []string{line}
	pt.Emitted = emit.Emitted{Functions: []string{"ComplexOrderPositions" + suffix, "ComplexOrderPhase" + suffix, "ComplexOrderEmbedding" + suffix},
		Form: "computed", Positions: g.Opts.MaxPositions}
	for _, c := range d.Cases {
		pt.Emitted.Golden += len(c.Positions.Vals) + len(c.Phase.Vals) + len(c.Real.Vals) + len(c.Imag.Vals)
	}
	return pt, nil
}

// complexCase runs the model's own subgraph at a sequence of n words and
// checks the templates' arithmetic against it.
func goldenComplexCase(g *emit.Gen, d *complexData, ev *Evidence, n int, suffix string, x int) (*complexCase, error) {
	shape, dt, err := probe.BoundShape(g.Ctx, ev.TokenIDs, n)
	if err != nil {
		return nil, fmt.Errorf("golden vectors: the word ids: %w", err)
	}
	c := &complexCase{N: n}
	ids := make([]float64, n)
	for i := range ids {
		c.Words = append(c.Words, (i*7+3)%d.Vocab)
		ids[i] = float64(c.Words[i])
	}
	// The word ids' sequence axis: the shape the binding gives, else the
	// axis along which n words give the model n positions ([sequence,
	// batch] inputs, torchtext's layout, lead with the sequence).
	shapes := [][]int{shape}
	for a := range shape {
		s := make([]int, len(shape))
		for i := range s {
			s[i] = 1
		}
		s[a] = n
		shapes = append(shapes, s)
	}
	var out []*kernels.Tensor
	var last error
	for _, sh := range shapes {
		size := 1
		for _, x := range sh {
			size *= x
		}
		if size != n {
			continue
		}
		it, err := emit.TensorOf(dt, sh, ids)
		if err != nil {
			return nil, fmt.Errorf("golden vectors: %w", err)
		}
		r, err := g.Extract(probe.ExtractSpec{Values: []string{ev.Positions, ev.Phase, ev.Real, ev.Imag}, Seq: n, Cuts: map[string]*kernels.Tensor{ev.TokenIDs: it}})
		if err != nil {
			return nil, fmt.Errorf("golden vectors: %w", err)
		}
		o, err := r.Run(nil)
		if err != nil {
			last = err
			continue
		}
		if o[0].Len() != n || o[1].Len() != n*d.Dim || o[2].Len() != n*d.Dim || o[3].Len() != n*d.Dim {
			last = fmt.Errorf("the word ids of shape %v give positions of shape %v and phases of shape %v", sh, o[0].Shape, o[1].Shape)
			continue
		}
		out = o
		break
	}
	if out == nil {
		return nil, fmt.Errorf("golden vectors at %d words: %w", n, last)
	}
	pos := out[0].Float64s()
	for i, p := range pos {
		if want := d.position(i, n); p != float64(want) {
			return nil, emit.Skip("the model's position of word %d of %d is %v, not %d", i, n, p, want)
		}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	c.Rows = emit.Thin(all, 16)
	c.Positions = &emit.Table{Name: fmt.Sprintf("goldenComplexOrderPositions%s_%d", suffix, x), Type: "int64", Golden: true}
	for _, i := range c.Rows {
		c.Positions.Vals = append(c.Positions.Vals, pos[i])
	}
	vals := [3][]float64{out[1].Float64s(), out[2].Float64s(), out[3].Float64s()}
	tabs := [3]**emit.Table{&c.Phase, &c.Real, &c.Imag}
	for j, nm := range []string{"Phase", "Real", "Imag"} {
		*tabs[j] = &emit.Table{Name: fmt.Sprintf("goldenComplexOrder%s%s_%d", nm, suffix, x), Type: "float32", Golden: true}
	}
	for _, i := range c.Rows {
		ph, re, im := d.embedding(int64(c.Words[i]), d.position(i, n))
		for k := 0; k < d.Dim; k++ {
			got := [3]float64{ph[k], re[k], im[k]}
			for j := range tabs {
				want := vals[j][i*d.Dim+k]
				(*tabs[j]).Vals = append((*tabs[j]).Vals, want)
				// The arithmetic the templates write must give the
				// model's values.
				if !emit.Close32(got[j], want) {
					return nil, emit.Skip("word %d (id %d) of %d, dimension %d: the model's %s is %.9g, the arithmetic %.9g",
						i, c.Words[i], n, k, []string{"phase", "real part", "imaginary part"}[j], want, got[j])
				}
			}
		}
	}
	return c, nil
}

// position is the model's position of word i of n.
func (d *complexData) position(i, n int) int64 {
	if d.Descending {
		return int64(n - 1 - i)
	}
	return int64(i)
}

// embedding is the phase, real and imaginary parts of word w at position
// pos as the templates compute them.
func (d *complexData) embedding(w, pos int64) (ph, re, im []float64) {
	f := graph.Float
	x := emit.RoundTo(f, float64(pos))
	for k := 0; k < d.Dim; k++ {
		t := emit.RoundTo(f, x*d.Freq.Vals[int(w)*d.Dim+k])
		if d.Phase != nil {
			t = emit.RoundTo(f, t+d.Phase.Vals[int(w)*d.Dim+k])
		}
		a := d.Amp.Vals[int(w)*d.Dim+k]
		ph = append(ph, t)
		re = append(re, emit.RoundTo(f, a*emit.RoundTo(f, math.Cos(t))))
		im = append(im, emit.RoundTo(f, a*emit.RoundTo(f, math.Sin(t))))
	}
	return ph, re, im
}
