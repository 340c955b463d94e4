package floater

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
)

// floaterData is what the floater templates read: FLOATER's position
// states (the solution of the learned dynamical system at every position
// the model integrates), as the table the model's solver produces, and
// where each layer reads its q, k and v biases in a state.
type floaterData struct {
	Doc []string
	// Rows states of Size values (Shape, flattened) each.
	Rows, Size int
	Shape      []int
	Dim        int
	States     *emit.Table
	Solver     string
	Step       float64
	Form       string
	TableFrom  string
	// Layers: per layer, the offsets in a state of its q, k and v biases
	// (Dim values each; -1: the layer adds none).
	Layers []floaterLayer

	// Golden: every layer's biases as the model adds them, at sequences of
	// N positions ([layer][position][q, k, v][Dim], the rows of Rows).
	Cases []*floaterCase
}

type floaterLayer struct {
	Layer   int
	Q, K, V int
}

type floaterCase struct {
	N    int
	Rows []int
	Want *emit.Table
}

func EmitFloater(g *emit.Gen, f *passes.Finding, suffix string) (*emit.Part, error) {
	ev, p, err := emit.FindingOf[Evidence, Params](f, "no FLOATER evidence")
	if err != nil {
		return nil, err
	}
	if ev.Table == "" || len(ev.Blocks) == 0 {
		return nil, emit.Skip("no value holds the states the layers read")
	}
	d := &floaterData{Dim: p.Dim, Form: p.Form, TableFrom: ev.Table}
	if p.Solver != nil {
		d.Solver = *p.Solver
	}
	if p.Step != nil {
		d.Step = *p.Step
	}
	// The states, as the model's solver produces them (the same whatever
	// the call's length).
	var st []float64
	for _, n := range []int{4, 9} {
		r, err := g.Extract(probe.ExtractSpec{Values: []string{ev.Table}, Seq: n})
		if err != nil {
			return nil, fmt.Errorf("the states: %w", err)
		}
		out, err := r.Run(nil)
		if err != nil {
			return nil, fmt.Errorf("the states: %w", err)
		}
		t := out[0]
		if t.DType != graph.Float {
			return nil, emit.Skip("the states are %s; codegen writes float32 FLOATER states", emit.TypeName(t.DType))
		}
		if t.Rank() < 2 {
			return nil, fmt.Errorf("the states have shape %v", t.Shape)
		}
		v := t.Float64s()
		if st != nil && (d.Rows != t.Shape[0] || !slices.Equal(st, v)) {
			return nil, emit.Skip("the states follow the call's length (%d states at 4 positions, %d at 9): not one table", d.Rows, t.Shape[0])
		}
		st, d.Rows, d.Shape = v, t.Shape[0], t.Shape[1:]
	}
	d.Size = len(st) / d.Rows
	d.States = &emit.Table{Name: "floaterStates" + suffix, Type: "float32", Vals: st, From: ev.Table}
	pt := &emit.Part{Tmpl: "floater", Data: d, Tables: []*emit.Table{d.States}}

	// Every layer's biases at the longest sequence the states cover: each
	// is Dim values of the state at its position, at an offset found by
	// matching (the layer's slice of the state).
	n := d.Rows
	var values []string
	for _, b := range ev.Blocks {
		values = append(values, b.Q, b.K)
		if b.V != "" {
			values = append(values, b.V)
		}
	}
	out, err := floaterBiases(g, values, n)
	if err != nil {
		return nil, err
	}
	x := 0
	for _, b := range ev.Blocks {
		fl := floaterLayer{Layer: b.Layer, V: -1}
		for _, off := range []*int{&fl.Q, &fl.K, &fl.V} {
			if off == &fl.V && b.V == "" {
				continue
			}
			o, ok := d.offset(out[x], n)
			if !ok {
				return nil, emit.Skip("layer %d's bias %s is not %d values of the state at its position", b.Layer, values[x], d.Dim)
			}
			*off = o
			x++
		}
		d.Layers = append(d.Layers, fl)
	}
	// Golden vectors: the biases the model adds at 1, 7 and all its
	// positions (the model's own slicing of the states), and the
	// accessors' values checked against them before writing.
	for _, m := range []int{1, 7, n} {
		if m > n || slices.ContainsFunc(d.Cases, func(c *floaterCase) bool { return c.N == m }) {
			continue
		}
		out, err := floaterBiases(g, values, m)
		if err != nil {
			return nil, err
		}
		all := make([]int, m)
		for i := range all {
			all[i] = i
		}
		c := &floaterCase{N: m, Rows: emit.Thin(all, 12), Want: &emit.Table{Name: fmt.Sprintf("goldenFloaterBiases%s_%d", suffix, m), Type: "float32", Golden: true}}
		x := 0
		for _, l := range d.Layers {
			for _, off := range []int{l.Q, l.K, l.V} {
				if off < 0 {
					continue
				}
				for _, i := range c.Rows {
					for j := 0; j < d.Dim; j++ {
						want := out[x][i*d.Dim+j]
						if got := d.States.Vals[i*d.Size+off+j]; !emit.Close32(got, want) {
							return nil, emit.Skip("%d positions: layer %d's bias at position %d, element %d, is %.9g, the state %.9g", m, l.Layer, i, j, want, got)
						}
						c.Want.Vals = append(c.Want.Vals, want)
					}
				}
				x++
			}
		}
		d.Cases = append(d.Cases, c)
	}
	solver := "a solver"
	if d.Solver != "" {
		solver = fmt.Sprintf("%s steps of %s", d.Solver, emit.FmtFloat(d.Step, 64))
	}
	d.Doc = []string{fmt.Sprintf("FLOATER's position states (Liu et al. 2020) of layers %s: the %d states (positions 0 to %d) that the model's %s integration of its learned dynamics produces (%s, %s), each of shape %v; layer l adds %d values of the state at a position to its q, k and v. The states are the table onnxpe's executor computed with the model's own solver (the dynamics are not transcribed).",
		emit.LayerList(f.Layers), d.Rows, d.Rows-1, d.Form, solver, d.TableFrom, d.Shape, d.Dim)}
	pt.Emitted = emit.Emitted{Functions: []string{"FloaterState" + suffix, "FloaterBiases" + suffix}, Form: "table", Positions: d.Rows, MaxPositions: d.Rows}
	for _, c := range d.Cases {
		pt.Emitted.Golden += len(c.Want.Vals)
	}
	return pt, nil
}

// floaterBiases evaluates the biases values at n positions, each [n][Dim]
// flattened.
func floaterBiases(g *emit.Gen, values []string, n int) ([][]float64, error) {
	r, err := g.Extract(probe.ExtractSpec{Values: values, Seq: n})
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	out, err := r.Run(nil)
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	var res [][]float64
	for i, t := range out {
		if t.Len()%n != 0 {
			return nil, fmt.Errorf("golden vectors: %s has shape %v at %d positions", values[i], t.Shape, n)
		}
		res = append(res, t.Float64s())
	}
	return res, nil
}

// offset finds where in a state the Dim values of a bias at every one of
// n positions are.
func (d *floaterData) offset(bias []float64, n int) (int, bool) {
	if len(bias) != n*d.Dim {
		return 0, false
	}
	for off := 0; off+d.Dim <= d.Size; off++ {
		ok := true
		for i := 0; i < n && ok; i++ {
			for j := 0; j < d.Dim; j++ {
				if math.Float32bits(float32(bias[i*d.Dim+j])) != math.Float32bits(float32(d.States.Vals[i*d.Size+off+j])) {
					ok = false
					break
				}
			}
		}
		if ok {
			return off, true
		}
	}
	return 0, false
}
