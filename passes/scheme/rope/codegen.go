package rope

import (
	"fmt"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// ropeData is what the rope templates read.
type ropeData struct {
	Doc                  []string
	HeadDim, RotaryDim   int
	K                    int // rotary pairs
	NumHeads, NumKVHeads int
	Pairs                [][2]int
	// Form is computed (constant frequencies), dynamic (frequencies from
	// the positions, Prog) or table (stored cos/sin).
	Form string
	// Freq are the frequencies per pair (computed), in Type; FreqFrom,
	// Product: where they come from.
	Freq              *emit.Table
	FreqFrom, Product string
	// Type is the element type of angles, sin and cos; Out of the cos
	// and sin applied; Rot of q (and of the rotated q); Arith of the
	// rotation's products and sums (float32 when the model casts a
	// float16 q up to rotate it).
	Type, Out, Rot, Arith string
	Scale                 float64
	ScaleFrom             string
	Prog                  *emit.Program
	Cos, Sin              *emit.Table
	CosFrom               string
	SinFrom               string
	Rows                  int
	MaxPositions          int
	// OutHalf and RotHalf: the cos/sin and the rotation are in a half
	// type (the Float16/BFloat16 variants are emitted).
	OutHalf, RotHalf bool
	Half             string // "Float16" or "BFloat16"

	G ropeGolden
}

// ropeGolden are the golden vectors of the rope functions.
type ropeGolden struct {
	CosSin []*cosSinCase
	Apply  *applyCase
}

// cosSinCase is one call of RoPECosSin: at positions Positions (or
// 0..N-1 when Full), rows Rows of the result compared with Cos and Sin.
type cosSinCase struct {
	N         int
	Full      bool
	Positions *emit.Table
	Rows      []int
	Cos, Sin  *emit.Table
}

// applyCase is one call of ApplyRoPE: x, [positions][heads][head dim] of
// goldenInput values, rotated at Positions (0..N-1 when Full) must give
// Want at the rows Rows (indexes into the positions).
type applyCase struct {
	Positions *emit.Table
	N         int
	Full      bool
	Heads     int
	Rows      []int
	Want      *emit.Table
}

func EmitRoPE(g *emit.Gen, f *passes.Finding, suffix string) (*emit.Part, error) {
	ev, p, err := emit.FindingOf[Evidence, Params](f, "no RoPE evidence")
	if err != nil {
		return nil, err
	}
	if ev.Synthetic {
		return nil, emit.Skip("the cos/sin (or their frequencies) are graph inputs: their values are not in the file")
	}
	if p.MultimodalSections != nil {
		return emitMRoPE(g, f, p, ev, suffix)
	}
	if p.Axes == 2 {
		return emitAxial(g, f, p, ev, suffix)
	}
	if len(ev.Blocks) == 0 {
		return nil, emit.Skip("no rotation of q or k to test the code against")
	}
	rot, err := rotationOf(g, ev.Blocks[0])
	if err != nil {
		return nil, err
	}
	d := &ropeData{HeadDim: p.HeadDim, RotaryDim: p.RotaryDim, K: len(ev.Pairs), Pairs: ev.Pairs}
	if p.NumHeads != nil {
		d.NumHeads = *p.NumHeads
	}
	if p.NumKVHeads != nil {
		d.NumKVHeads = *p.NumKVHeads
	}
	pt := &emit.Part{Tmpl: "rope", Data: d}
	fn := func(name string) string { return name + suffix }
	_, qType, err := probe.BoundShape(g.Ctx, rot.in, 4)
	if err != nil {
		return nil, emit.Skip("the shape of q: %v", err)
	}
	d.Rot = emit.TypeName(qType)
	d.Arith = arithType(g, rot, d.Rot)
	switch {
	case ev.Angles != nil:
		a := ev.Angles
		d.Type, d.Out = emit.TypeName(a.Type), emit.TypeName(a.Out)
		d.Product = a.Product
		if a.ScaleFrom != "" {
			d.Scale, d.ScaleFrom = a.Scale, a.ScaleFrom
		}
		if a.Program != nil {
			d.Form = "dynamic"
			pr, err := emit.NewProgram(a.Program, g.Opts.Package)
			if err != nil {
				return nil, emit.Skip("the frequencies: %v", err)
			}
			d.Prog = pr
			for _, l := range pr.Go {
				pt.B2F = pt.B2F || strings.Contains(l, "b2f(")
				pt.Pick = pt.Pick || strings.Contains(l, "pick(")
			}
		} else {
			d.Form = "computed"
			d.FreqFrom = a.FreqFrom
			d.Freq = &emit.Table{Name: "roPEInvFreq" + suffix, Type: "float64", Vals: a.Freq, From: a.FreqFrom}
		}
	case ev.Stored != nil:
		st := ev.Stored
		d.Form, d.Out, d.Rows = "table", emit.TypeName(st.Out), st.Rows
		cos, sin, err := storedColumns(g, st)
		if err != nil {
			return nil, err
		}
		d.CosFrom, d.SinFrom = columnsFrom(st.Cos), columnsFrom(st.Sin)
		d.Cos = &emit.Table{Name: "roPECos" + suffix, Type: emit.FloatType(st.Out), Vals: cos, From: d.CosFrom}
		d.Sin = &emit.Table{Name: "roPESin" + suffix, Type: emit.FloatType(st.Out), Vals: sin, From: d.SinFrom}
		if st.Out == graph.Float16 || st.Out == graph.BFloat16 {
			for i := range cos {
				d.Cos.Vals[i] = float64(emit.HalfBits(st.Out, cos[i]))
				d.Sin.Vals[i] = float64(emit.HalfBits(st.Out, sin[i]))
			}
		}
		pt.Tables = append(pt.Tables, d.Cos, d.Sin)
		d.MaxPositions = st.Rows
	default:
		return nil, emit.Skip("the cos/sin are neither the product of positions and frequencies nor read from stored tables (%s)", ev.ExactWhy)
	}
	d.OutHalf = d.Out == "float16" || d.Out == "bfloat16"
	d.RotHalf = d.Rot == "float16" || d.Rot == "bfloat16"
	if d.OutHalf != d.RotHalf && d.RotHalf {
		return nil, emit.Skip("q is %s but the cos/sin are %s", d.Rot, d.Out)
	}
	for _, t := range []string{d.Type, d.Out, d.Rot, d.Arith} {
		switch t {
		case "float16":
			pt.Half, d.Half = true, "Float16"
		case "bfloat16":
			pt.BHalf, d.Half = true, "BFloat16"
		case "", "float32", "float64":
		default:
			return nil, emit.Skip("element type %s", t)
		}
	}
	if err := goldenRoPE(g, d, ev, rot, suffix); err != nil {
		return nil, err
	}
	d.Doc = ropeDoc(g, f, p, ev, d)
	pt.Emitted.Functions = []string{fn("RoPECosSin")}
	if d.OutHalf {
		pt.Emitted.Functions = append(pt.Emitted.Functions, fn("RoPECosSin"+d.Half))
	}
	if d.RotHalf {
		pt.Emitted.Functions = append(pt.Emitted.Functions, fn("ApplyRoPE"+d.Half))
	} else {
		pt.Emitted.Functions = append(pt.Emitted.Functions, fn("ApplyRoPE"))
	}
	pt.Emitted.Form = d.Form
	pt.Emitted.MaxPositions = d.MaxPositions
	for _, c := range d.G.CosSin {
		pt.Emitted.Positions = max(pt.Emitted.Positions, c.N)
		pt.Emitted.Golden += len(c.Cos.Vals) + len(c.Sin.Vals)
	}
	if d.G.Apply != nil {
		pt.Emitted.Golden += len(d.G.Apply.Want.Vals)
	}
	return pt, nil
}

// rotation is what the golden vectors run: the value rotated (q or k) and
// the rotated value, and the other values to give at n positions (an
// empty past for an attention op that rotates its keys inside).
type codeRotation struct {
	in, out string
	nodes   []string
	others  func(n int) (map[string]*kernels.Tensor, error)
}

// rotationOf is the rotation of a block: its q side, or its k side, or the
// keys a GroupQueryAttention with do_rotary rotates into present_key.
func rotationOf(g *emit.Gen, b Block) (*codeRotation, error) {
	switch {
	case b.Q.In != "" && b.Q.Out != "":
		return &codeRotation{in: b.Q.In, out: b.Q.Out, nodes: b.Q.Nodes}, nil
	case b.K.In != "" && b.K.Out != "":
		return &codeRotation{in: b.K.In, out: b.K.Out, nodes: b.K.Nodes}, nil
	case b.Op == "":
		return nil, emit.Skip("no rotation of q or k to test the code against")
	}
	var op *graph.Node
	g.Ctx.Model.Walk(func(n *graph.Node) {
		if op == nil && (n.Name == b.Op || n.Name == "" && len(n.Outputs()) > 0 && n.Output(0).Name == b.Op) {
			op = n
		}
	})
	if op == nil || op.Domain != "com.microsoft" || op.OpType != "GroupQueryAttention" || len(op.Outputs()) < 2 || op.Output(1).Name == "" {
		return nil, emit.Skip("the rotation inside %s: onnxpe reads the keys it rotates from GroupQueryAttention's present_key only", b.Op)
	}
	spec := work.FusedSpecs["com.microsoft.GroupQueryAttention"]
	name := func(i int) string {
		if v := op.Input(i); v != nil {
			return v.Name
		}
		return ""
	}
	if name(spec.K) == "" {
		return nil, emit.Skip("the GroupQueryAttention %s packs q, k and v in one input", b.Op)
	}
	others := func(n int) (map[string]*kernels.Tensor, error) {
		out := map[string]*kernels.Tensor{}
		for _, i := range []int{spec.Q, spec.V, 3, 4} {
			v := name(i)
			if v == "" {
				continue
			}
			// No past (BoundShape binds the cache empty): the keys at
			// positions 0..n-1 are all new.
			shape, dt, err := probe.BoundShape(g.Ctx, v, n)
			if err != nil {
				return nil, err
			}
			size := 1
			for _, x := range shape {
				size *= x
			}
			t, err := emit.TensorOf(dt, shape, make([]float64, size))
			if err != nil {
				return nil, err
			}
			out[v] = t
		}
		return out, nil
	}
	return &codeRotation{in: name(spec.K), out: op.Output(1).Name, others: others}, nil
}

// arithType is the element type the rotation multiplies and adds in: the
// type of its Mul, Add and Sub nodes' results (q's type when they cannot
// be read).
func arithType(g *emit.Gen, rot *codeRotation, qType string) string {
	t := ""
	g.Ctx.Model.Walk(func(n *graph.Node) {
		if !slices.Contains(rot.nodes, n.Name) || n.OpType != "Mul" && n.OpType != "Add" && n.OpType != "Sub" || len(n.Outputs()) == 0 {
			return
		}
		if _, dt, err := probe.BoundShape(g.Ctx, n.Output(0).Name, 4); err == nil {
			if t == "" || emit.TypeName(dt) == "float32" {
				t = emit.TypeName(dt)
			}
		}
	})
	if t == "" {
		return qType
	}
	return t
}

// storedColumns reads the stored cos and sin columns, [rows][pairs].
func storedColumns(g *emit.Gen, st *StoredCosSin) ([]float64, []float64, error) {
	read := func(cols []TableColumn) ([]float64, error) {
		out := make([]float64, st.Rows*len(cols))
		for k, c := range cols {
			t := probe.Const(g.Ctx, c.Table)
			if t == nil {
				return nil, fmt.Errorf("the stored table %q is not a constant", c.Table)
			}
			vals := t.Float64s()
			w := t.Shape[len(t.Shape)-1]
			for r := 0; r < st.Rows; r++ {
				out[r*len(cols)+k] = emit.RoundTo(st.Out, vals[(c.Row0+r)*w+c.Col])
			}
		}
		return out, nil
	}
	cos, err := read(st.Cos)
	if err != nil {
		return nil, nil, err
	}
	sin, err := read(st.Sin)
	return cos, sin, err
}

// columnsFrom describes the tables columns come from.
func columnsFrom(cols []TableColumn) string {
	var names []string
	var idx []string
	for _, c := range cols {
		if !slices.Contains(names, c.Table) {
			names = append(names, c.Table)
		}
		idx = append(idx, fmt.Sprint(c.Col))
	}
	return fmt.Sprintf("%s, columns %s", strings.Join(names, " and "), strings.Join(idx, ", "))
}

// qLayout maps (position, head, dimension) to the index of an element of
// q as the rotation reads it (shape for n positions).
type qLayout struct {
	shape []int
	pos   int // position axis
	heads int
	hd    int
	index func(s, h, d int) int
}

func newQLayout(shape []int, n, headDim, axis int) (*qLayout, error) {
	r := len(shape)
	if r < 2 {
		return nil, fmt.Errorf("q has shape %v", shape)
	}
	pos := axis
	if pos <= 0 || pos >= r-1 || shape[pos] != n {
		pos = -1
		for a := 0; a < r-1; a++ {
			if shape[a] == n && (pos < 0 || a > 0) {
				pos = a
			}
		}
	}
	if pos < 0 {
		return nil, fmt.Errorf("q has shape %v: no axis of the %d positions", shape, n)
	}
	strides := make([]int, r)
	st := 1
	for a := r - 1; a >= 0; a-- {
		strides[a] = st
		st *= shape[a]
	}
	last := shape[r-1]
	l := &qLayout{shape: shape, pos: pos, hd: headDim}
	var others []int
	for a := 0; a < r-1; a++ {
		if a != pos {
			others = append(others, a)
		}
	}
	prod := 1
	for _, a := range others {
		prod *= shape[a]
	}
	switch {
	case last == headDim:
		l.heads = prod
		l.index = func(s, h, d int) int {
			i := s*strides[pos] + d
			for k := len(others) - 1; k >= 0; k-- {
				a := others[k]
				i += (h % shape[a]) * strides[a]
				h /= shape[a]
			}
			return i
		}
	case headDim > 0 && last%headDim == 0 && prod == 1:
		l.heads = last / headDim
		l.index = func(s, h, d int) int { return s*strides[pos] + h*headDim + d }
	default:
		return nil, fmt.Errorf("q has shape %v, heads of %d", shape, headDim)
	}
	return l, nil
}

// ropeGolden computes the golden vectors by running the rotation of q as
// the model computes it: with q one at the first dimension of every pair
// (the rotated q holds cos and sin), and with pseudo-random q.
func goldenRoPE(g *emit.Gen, d *ropeData, ev *Evidence, rot *codeRotation, suffix string) error {
	n := g.Opts.MaxPositions
	if d.MaxPositions > 0 {
		n = d.MaxPositions
	}
	if a, _, err := probe.BoundShape(g.Ctx, rot.in, 5); err == nil {
		if b, _, err := probe.BoundShape(g.Ctx, rot.in, 7); err == nil && slices.Equal(a, b) {
			// Static shapes: the model takes its one sequence length.
			if l, err := newQLayout(a, a[min(max(ev.Axis, 0), len(a)-2)], d.HeadDim, ev.Axis); err == nil {
				n = min(n, a[l.pos])
			}
		}
	}
	var pos *probe.Positions
	if ev.Positions != nil && (ev.Positions.Value != "" || ev.Positions.Start != "") {
		pos = ev.Positions
	}
	rotType := graph.Float
	if d.Rot == "float16" {
		rotType = graph.Float16
	} else if d.Rot == "bfloat16" {
		rotType = graph.BFloat16
	}
	outType := graph.Float
	switch d.Out {
	case "float16":
		outType = graph.Float16
	case "bfloat16":
		outType = graph.BFloat16
	}
	// run evaluates the rotation at n positions for q = vals(layout of
	// q); the result is read through the layout of the rotated value.
	type result struct {
		l, lo *qLayout
		out   []float64
	}
	run := func(n int, vals func(l *qLayout) []float64) (*result, error) {
		shape, _, err := probe.BoundShape(g.Ctx, rot.in, n)
		if err != nil {
			return nil, err
		}
		l, err := newQLayout(shape, n, d.HeadDim, ev.Axis)
		if err != nil {
			return nil, err
		}
		q, err := emit.TensorOf(rotType, shape, vals(l))
		if err != nil {
			return nil, err
		}
		cuts := map[string]*kernels.Tensor{rot.in: q}
		if rot.others != nil {
			others, err := rot.others(n)
			if err != nil {
				return nil, err
			}
			for k, v := range others {
				cuts[k] = v
			}
		}
		r, err := g.Extract(probe.ExtractSpec{Values: []string{rot.out}, Seq: n, Cuts: cuts, Positions: pos})
		if err != nil {
			return nil, err
		}
		out, err := r.Run(nil)
		if err != nil {
			return nil, err
		}
		lo := l
		if !slices.Equal(out[0].Shape, shape) {
			if lo, err = newQLayout(out[0].Shape, n, d.HeadDim, -1); err != nil || lo.heads != l.heads {
				return nil, fmt.Errorf("the rotation gives shape %v for q of shape %v", out[0].Shape, shape)
			}
		}
		return &result{l, lo, out[0].Float64s()}, nil
	}
	unit := func(l *qLayout) []float64 {
		size := 1
		for _, x := range l.shape {
			size *= x
		}
		v := make([]float64, size)
		for s := 0; s < l.shape[l.pos]; s++ {
			for h := 0; h < l.heads; h++ {
				for _, pr := range d.Pairs {
					v[l.index(s, h, pr[0])] = 1
				}
			}
		}
		return v
	}
	cosSin := func(n int, full bool) (*cosSinCase, error) {
		res, err := run(n, unit)
		if err != nil {
			return nil, err
		}
		rows := emit.SamplePositions(n)
		if full {
			rows = emit.Thin(rows, 10)
		}
		c := &cosSinCase{N: n, Full: full}
		k := len(d.Pairs)
		c.Cos = &emit.Table{Name: fmt.Sprintf("goldenRoPECos%s_%d", suffix, n), Type: emit.FloatType(outType), Golden: true}
		c.Sin = &emit.Table{Name: fmt.Sprintf("goldenRoPESin%s_%d", suffix, n), Type: emit.FloatType(outType), Golden: true}
		var ps []float64
		for _, p := range rows {
			ps = append(ps, float64(p))
			for j := 0; j < k; j++ {
				cv := res.out[res.lo.index(p, 0, d.Pairs[j][0])]
				sv := res.out[res.lo.index(p, 0, d.Pairs[j][1])]
				if c.Cos.Type == "uint16" {
					cv, sv = float64(emit.HalfBits(outType, cv)), float64(emit.HalfBits(outType, sv))
				}
				c.Cos.Vals = append(c.Cos.Vals, cv)
				c.Sin.Vals = append(c.Sin.Vals, sv)
			}
		}
		if full {
			c.Rows = rows
		} else {
			c.Positions = &emit.Table{Name: fmt.Sprintf("goldenRoPEPositions%s_%d", suffix, n), Type: "int64", Vals: ps, Golden: true}
			for i := range rows {
				c.Rows = append(c.Rows, i)
			}
		}
		_ = k
		return c, nil
	}
	var lengths []int
	if d.Form == "dynamic" {
		// Frequencies that follow the positions: every length is a case of
		// its own, called with all its positions.
		for _, x := range []int{1, 8, 16, 17, 18, 20, 24, 33, 64, 100, 300, 1000, 2049, n} {
			if x <= n && !slices.Contains(lengths, x) {
				lengths = append(lengths, x)
			}
		}
		// And the first length beyond n with other frequencies, when the
		// rule switches further on (LongRoPE's long factors beyond the
		// original length).
		if x := nextSwitch(ev.Angles.Program, n); x > 0 {
			lengths = append(lengths, x)
		}
		for _, x := range lengths {
			c, err := cosSin(x, true)
			if err != nil {
				return fmt.Errorf("golden vectors at %d positions: %w", x, err)
			}
			d.G.CosSin = append(d.G.CosSin, c)
		}
	} else {
		got, err := emit.Longest(n, 8, func(n int) error {
			c, err := cosSin(n, false)
			if err == nil {
				d.G.CosSin = append(d.G.CosSin, c)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("golden vectors: %w", err)
		}
		n = got
	}
	// ApplyRoPE: q of goldenInput values at the sampled positions (all
	// positions of a shorter sequence for dynamic frequencies, which the
	// function recomputes from the positions it is given); the tests make
	// the same values, so only the rotated rows they compare are stored.
	an := n
	if d.Form == "dynamic" {
		an = min(n, 64)
	}
	shape, _, err := probe.BoundShape(g.Ctx, rot.in, an)
	if err != nil {
		return fmt.Errorf("golden vectors of the rotation: %w", err)
	}
	l0, err := newQLayout(shape, an, d.HeadDim, ev.Axis)
	if err != nil {
		return fmt.Errorf("golden vectors of the rotation: %w", err)
	}
	heads := l0.heads
	budget := max(2, 20000/max(1, heads*d.HeadDim))
	ac := &applyCase{Heads: heads, N: an}
	var call []int
	if d.Form == "dynamic" {
		ac.Full = true
		for i := 0; i < an; i++ {
			call = append(call, i)
		}
		all := make([]int, an)
		for i := range all {
			all[i] = i
		}
		ac.Rows = emit.Thin(all, min(8, budget))
	} else {
		call = emit.Thin(emit.SamplePositions(an), min(12, budget))
		for i := range call {
			ac.Rows = append(ac.Rows, i)
		}
	}
	res, err := run(an, func(l *qLayout) []float64 {
		size := 1
		for _, x := range l.shape {
			size *= x
		}
		v := make([]float64, size)
		for r, p := range call {
			for h := 0; h < l.heads; h++ {
				for e := 0; e < d.HeadDim; e++ {
					v[l.index(p, h, e)] = goldenInput((r*l.heads+h)*d.HeadDim + e)
				}
			}
		}
		return v
	})
	if err != nil {
		return fmt.Errorf("golden vectors of the rotation: %w", err)
	}
	typ := emit.FloatType(rotType)
	ac.Want = &emit.Table{Name: "goldenApplyRoPEWant" + suffix, Type: typ, Golden: true}
	if !ac.Full {
		ac.Positions = &emit.Table{Name: "goldenApplyRoPEPositions" + suffix, Type: "int64", Golden: true}
		for _, p := range call {
			ac.Positions.Vals = append(ac.Positions.Vals, float64(p))
		}
	}
	for _, r := range ac.Rows {
		for h := 0; h < heads; h++ {
			for e := 0; e < d.HeadDim; e++ {
				y := res.out[res.lo.index(call[r], h, e)]
				if typ == "uint16" {
					y = float64(emit.HalfBits(rotType, y))
				}
				ac.Want.Vals = append(ac.Want.Vals, y)
			}
		}
	}
	d.G.Apply = ac
	return nil
}

// nextSwitch is the first length above n (up to 2^17) at which the
// program gives other frequencies than at n, or 0.
func nextSwitch(pg *probe.FreqProgram, n int) int {
	at := func(l int) []float64 {
		f, err := pg.Eval(int64(l-1), int64(l))
		if err != nil {
			return nil
		}
		return f
	}
	base := at(n)
	if base == nil {
		return 0
	}
	hi := 0
	for l := 2 * n; l <= 1<<17; l *= 2 {
		if f := at(l); f != nil && !slices.Equal(f, base) {
			hi = l
			break
		}
	}
	if hi == 0 {
		return 0
	}
	lo := n // at(lo) == base, at(hi) != base
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if slices.Equal(at(mid), base) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// goldenInput is the value the tests rotate at flat index i of x: a
// multiple of 1/64 in [-1, 1], exact in float32, float16 and bfloat16
// (the generated tests compute the same).
func goldenInput(i int) float64 { return float64((i*37+11)%129-64) / 64 }

// ropeDoc is the documentation of the rope section.
func ropeDoc(g *emit.Gen, f *passes.Finding, p *Params, ev *Evidence, d *ropeData) []string {
	var out []string
	scaling := "none"
	if p.Scaling != nil {
		scaling = *p.Scaling
	}
	line := fmt.Sprintf("RoPE of layers %s: %s layout, head dim %d, rotary dim %d", emit.LayerList(f.Layers), p.Layout, p.HeadDim, p.RotaryDim)
	if p.Base != nil {
		line += fmt.Sprintf(", base %s", emit.FmtFloat(*p.Base, 64))
	}
	line += ", scaling " + scaling
	if p.Factor != nil && scaling != "none" {
		line += " (factor " + emit.FmtFloat(*p.Factor, 64) + ")"
	}
	out = append(out, line+".")
	switch d.Form {
	case "computed":
		out = append(out, fmt.Sprintf("The angles are the positions times the frequencies of %s, computed in %s by %s as the model does, then cos and sin%s%s.",
			d.FreqFrom, d.Type, d.Product, scaleDoc(d), castDoc(d)))
	case "dynamic":
		out = append(out, fmt.Sprintf("The frequencies depend on the positions (recomputed from the largest one as the model's graph does, step by step in %s); the angles are the positions times them, computed by %s, then cos and sin%s%s.",
			d.Type, d.Product, scaleDoc(d), castDoc(d)))
	case "table":
		out = append(out, fmt.Sprintf("The cos and sin are the model's stored tables (%d positions): cos from %s, sin from %s.", d.Rows, d.CosFrom, d.SinFrom))
	}
	return out
}

func scaleDoc(d *ropeData) string {
	if d.ScaleFrom == "" {
		return ""
	}
	return fmt.Sprintf(" scaled by %s (%s)", emit.FmtFloat(d.Scale, 32), d.ScaleFrom)
}

func castDoc(d *ropeData) string {
	if d.Out != d.Type {
		return ", cast to " + d.Out
	}
	return ""
}
