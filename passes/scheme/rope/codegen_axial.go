package rope

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
)

// axialData is what the axial templates read: 2-D RoPE over a patch grid
// (rope-vit, EVA-02), whose pairs turn with the column or the row of a
// patch.
type axialData struct {
	Doc       []string
	HeadDim   int
	RotaryDim int
	K         int
	Pairs     [][2]int
	// PairAxis is 0 for a pair turning with the column, 1 with the row.
	PairAxis []int
	// Offset tokens come before the grid and are not rotated; Rows and
	// Cols are the model's grid (0 when it follows the image's size).
	Offset     int
	Rows, Cols int
	// Freq are the frequencies per pair, exactly as the model stores them
	// (FreqFrom), multiplied by the row or column in Type.
	Freq     *emit.Table
	FreqFrom string
	Type     string

	// Golden: the cos and sin of every cell of grids the model computes.
	Cases []*axialCase

	// Arith is the type of the rotation's products and sums
	// (ApplyAxialRoPE); ApplyWhy says why ApplyAxialRoPE is not written (""
	// when it is).
	Arith    string
	ApplyWhy string
}

// axialCase is one call of AxialRoPECosSin: the grid and the model's cos
// and sin, [rows·cols][K].
type axialCase struct {
	Rows, Cols int
	Cos, Sin   *emit.Table
	// Apply is the model's rotation of x over the grid's tokens (nil
	// when ApplyAxialRoPE is not written).
	Apply *rotationCase
}

func emitAxial(g *emit.Gen, f *passes.Finding, p *Params, ev *Evidence, suffix string) (*emit.Part, error) {
	if len(ev.PairAxis) != len(ev.Pairs) {
		return nil, emit.Skip("2-D RoPE: the audit did not say which axis turns each pair")
	}
	if len(ev.Blocks) == 0 {
		return nil, emit.Skip("no rotation of q or k to test the code against")
	}
	rot, err := rotationOf(g, ev.Blocks[0])
	if err != nil {
		return nil, err
	}
	d := &axialData{HeadDim: p.HeadDim, RotaryDim: p.RotaryDim, K: len(ev.Pairs), Pairs: ev.Pairs, PairAxis: ev.PairAxis, Offset: ev.GridOffset, Type: "float32"}
	if len(p.Grid) == 2 {
		d.Rows, d.Cols = p.Grid[0], p.Grid[1]
	}
	freq, from, err := axialFreqs(g, ev)
	if err != nil {
		return nil, err
	}
	d.Freq = &emit.Table{Name: "AxialRoPEInvFreq" + suffix, Type: "float64", Vals: freq, From: strings.Join(from, " and ")}
	d.FreqFrom = d.Freq.From
	pt := &emit.Part{Tmpl: "axial", Data: d}
	d.Arith, d.ApplyWhy = rotationArith(g, rot)

	// The golden vectors: every cell of the model's grid, or (an image of
	// open size) of the grids of several image sizes.
	seqs := []int{d.Offset + d.Rows*d.Cols}
	if d.Rows == 0 {
		seqs = []int{8, 16, 32, 64}
	}
	for _, seq := range seqs {
		c, err := goldenAxialCase(g, d, rot, ev, seq, suffix)
		if err != nil {
			return nil, err
		}
		if c != nil && !slices.ContainsFunc(d.Cases, func(x *axialCase) bool { return x.Rows == c.Rows && x.Cols == c.Cols }) {
			d.Cases = append(d.Cases, c)
		}
	}
	if d.ApplyWhy != "" {
		// A grid the arithmetic did not reproduce: no Apply golden vectors.
		for _, c := range d.Cases {
			c.Apply = nil
		}
	}
	if len(d.Cases) == 0 || d.Rows == 0 && len(d.Cases) < 2 {
		return nil, emit.Skip("2-D RoPE over images of open size: fewer than two grids of several rows to test the code against")
	}
	cols, rows := 0, 0
	for _, a := range d.PairAxis {
		if a == 0 {
			cols++
		} else {
			rows++
		}
	}
	line := fmt.Sprintf("Axial 2-D RoPE of layers %s: head dim %d, %d pairs, %d turning with the column and %d with the row of a patch (t = row·cols + col)",
		emit.LayerList(f.Layers), d.HeadDim, d.K, cols, rows)
	if d.Rows > 0 {
		line += fmt.Sprintf(", over the model's %d x %d grid", d.Rows, d.Cols)
	} else {
		var gs []string
		for _, c := range d.Cases {
			gs = append(gs, fmt.Sprintf("%d x %d", c.Rows, c.Cols))
		}
		line += fmt.Sprintf(", over a grid that follows the image's size (tested on the grids %s)", emit.JoinAnd(gs))
	}
	if d.Offset > 0 {
		line += fmt.Sprintf(" after %d unrotated token(s)", d.Offset)
	}
	line += fmt.Sprintf(". The angles are the column or row times the frequencies of %s, computed in %s as the model does, then cos and sin.", d.FreqFrom, d.Type)
	d.Doc = []string{line, applyDoc("ApplyAxialRoPE"+suffix, p.Layout, p.RotaryDim, p.HeadDim, d.Arith, d.ApplyWhy)}
	pt.Emitted = emit.Emitted{Functions: []string{"AxialRoPECell" + suffix, "AxialRoPECosSin" + suffix}, Form: "computed"}
	if d.ApplyWhy == "" {
		pt.Emitted.Functions = append(pt.Emitted.Functions, "ApplyAxialRoPE"+suffix)
	}
	for _, c := range d.Cases {
		pt.Emitted.Positions = max(pt.Emitted.Positions, c.Rows*c.Cols)
		pt.Emitted.Golden += len(c.Cos.Vals) + len(c.Sin.Vals)
		if c.Apply != nil {
			pt.Emitted.Golden += len(c.Apply.Want.Vals)
		}
	}
	pt.Emitted.MaxPositions = d.Rows * d.Cols
	return pt, nil
}

// axialCase runs the rotation at sequence length seq (an image of the
// model's size, or the one bound for seq) and reads the cos and sin of
// every cell of its grid; it checks the templates' arithmetic against
// them. The grid of an image of open size is read from the rotation: its
// columns are the cells before the first whose row pairs turn. nil when
// the image has one row or the model refuses it.
func goldenAxialCase(g *emit.Gen, d *axialData, rot *codeRotation, ev *Evidence, seq int, suffix string) (*axialCase, error) {
	cos, sin, err := unitCosSin(g, rot, ev, d.HeadDim, seq, nil)
	if err != nil {
		if d.Rows == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("golden vectors of the %d x %d grid: %w", d.Rows, d.Cols, err)
	}
	cells := len(cos) - d.Offset
	rows, cols := d.Rows, d.Cols
	if rows == 0 {
		cols = cells
		for t := 1; t < cells && cols == cells; t++ {
			for k, a := range d.PairAxis {
				if a == 1 && !(emit.Close32(cos[d.Offset+t][k], 1) && emit.Close32(sin[d.Offset+t][k], 0)) {
					cols = t
					break
				}
			}
		}
		if cols < 1 || cells%cols != 0 || cells/cols < 2 {
			return nil, nil
		}
		rows = cells / cols
	}
	if cells != rows*cols {
		return nil, fmt.Errorf("golden vectors: %d tokens for %d before a %d x %d grid", len(cos), d.Offset, rows, cols)
	}
	for i := 0; i < d.Offset; i++ {
		for k := range d.Pairs {
			if !emit.Close32(cos[i][k], 1) || !emit.Close32(sin[i][k], 0) {
				return nil, emit.Skip("token %d before the grid is rotated (pair %d: cos %.9g, sin %.9g)", i, k, cos[i][k], sin[i][k])
			}
		}
	}
	x := fmt.Sprintf("%s_%dx%d", suffix, rows, cols)
	c := &axialCase{Rows: rows, Cols: cols,
		Cos: &emit.Table{Name: "goldenAxialRoPECos" + x, Type: "float32", Golden: true},
		Sin: &emit.Table{Name: "goldenAxialRoPESin" + x, Type: "float32", Golden: true}}
	for t := 0; t < rows*cols; t++ {
		r, col := t/cols, t%cols
		mc, ms := cos[d.Offset+t], sin[d.Offset+t]
		c.Cos.Vals = append(c.Cos.Vals, mc...)
		c.Sin.Vals = append(c.Sin.Vals, ms...)
		// The arithmetic the templates write must give the model's values.
		for k := range d.Pairs {
			ac, as := d.cosSin(r, col, k)
			if !emit.Close32(ac, mc[k]) || !emit.Close32(as, ms[k]) {
				return nil, emit.Skip("at row %d column %d of the %d x %d grid pair %d the model gives (%.9g, %.9g), the arithmetic (%.9g, %.9g)",
					r, col, rows, cols, k, mc[k], ms[k], ac, as)
			}
		}
	}
	if d.ApplyWhy != "" {
		return c, nil
	}
	// ApplyAxialRoPE: the model's rotation of x over the same tokens (those
	// before the grid left as they are).
	rc, why, err := goldenRotation(g, rot, ev, d.HeadDim, seq, nil, "goldenApplyAxialRoPEWant"+x, func(tok, k int) (float64, float64, bool) {
		if tok < d.Offset {
			return 0, 0, false
		}
		t := tok - d.Offset
		ac, as := d.cosSin(t/cols, t%cols, k)
		return ac, as, true
	})
	if err != nil {
		return nil, fmt.Errorf("golden vectors of the rotation over the %d x %d grid: %w", rows, cols, err)
	}
	if why != "" {
		d.ApplyWhy = fmt.Sprintf("%s (the %d x %d grid)", why, rows, cols)
		return c, nil
	}
	rc.Rows, rc.Cols = rows, cols
	c.Apply = rc
	return c, nil
}

// cosSin is the cos and sin of pair k at the cell (row, col) as the
// templates compute them.
func (d *axialData) cosSin(row, col, k int) (float64, float64) {
	x := float64(col)
	if d.PairAxis[k] == 1 {
		x = float64(row)
	}
	t := emit.RoundTo(graph.Float, emit.RoundTo(graph.Float, x)*d.Freq.Vals[k])
	return emit.RoundTo(graph.Float, math.Cos(t)), emit.RoundTo(graph.Float, math.Sin(t))
}

// axialFreqs reads the frequencies of each axis from the float32 constant
// of the graph's cos/sin computation that holds them (the measured
// frequencies of the axis's pairs, in order, within 1e-5).
func axialFreqs(g *emit.Gen, ev *Evidence) ([]float64, []string, error) {
	nodes := map[string]bool{}
	for _, n := range ev.CosSinNodes {
		nodes[n] = true
	}
	// The float32 constants the computation reads (initializers and
	// Constant nodes of the model as it is, before any folding).
	type constant struct {
		name string
		vals []float64
	}
	var consts []constant
	seen := map[string]bool{}
	g.Ctx.Model.Walk(func(n *graph.Node) {
		name := n.Name
		if name == "" && len(n.Outputs()) > 0 {
			name = n.Output(0).Name
		}
		if !nodes[name] {
			return
		}
		for _, v := range n.Inputs() {
			if v == nil || seen[v.Name] {
				continue
			}
			seen[v.Name] = true
			t, ok := graph.ConstantValue(v)
			if !ok || t.DataType() != graph.Float || t.IsExternal() {
				continue
			}
			if vals, err := t.Float64s(); err == nil {
				consts = append(consts, constant{v.Name, vals})
			}
		}
	})
	out := make([]float64, len(ev.Pairs))
	var from []string
	for axis := 0; axis < 2; axis++ {
		var idx []int
		var om []float64
		for k, a := range ev.PairAxis {
			if a == axis {
				idx = append(idx, k)
				om = append(om, ev.InvFreq[k])
			}
		}
		found := false
		for _, c := range consts {
			name, vals := c.name, c.vals
			for s := 0; s+len(om) <= len(vals) && !found; s++ {
				ok := true
				for j, w := range om {
					if math.Abs(vals[s+j]-w) > 1e-5*math.Abs(w) {
						ok = false
						break
					}
				}
				if ok {
					found = true
					for j, k := range idx {
						out[k] = vals[s+j]
					}
					if !slices.Contains(from, name) {
						from = append(from, name)
					}
				}
			}
			if found {
				break
			}
		}
		if !found {
			return nil, nil, emit.Skip("2-D RoPE: no float32 constant of the cos/sin computation holds the frequencies of the %s", []string{"columns", "rows"}[axis])
		}
	}
	return out, from, nil
}
