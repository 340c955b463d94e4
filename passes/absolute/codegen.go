package absolute

import (
	"embed"

	"fmt"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
)

// absData is what the absolute templates read (sinusoidal and learned
// position encodings added to the embeddings).
type absData struct {
	Doc []string
	// Name prefixes the constants; Func is the function.
	Name, Func string
	Dim        int
	// Form is computed (sin and cos of positions times frequencies) or
	// table (the model's stored table).
	Form string
	// Offset is added to a position to get the table row (table) or the
	// position the angles are computed at (computed).
	Offset int
	// Computed: the (sin, cos) columns of every frequency, the
	// frequencies and their arithmetic.
	Pairs             [][2]int
	Freq              *emit.Table
	FreqFrom, Product string
	Type, Out         string
	Scale             float64
	ScaleFrom         string
	// Table: the stored table, [Rows][Dim].
	Table        *emit.Table
	TableFrom    string
	Rows         int
	MaxPositions int
	OutHalf      bool
	Half         string

	G absGolden
}

// absGolden: the encoding at Positions, [len(Positions)][Dim].
type absGolden struct {
	Positions *emit.Table
	Want      *emit.Table
}

// Templates are the code generator's of absolute encodings (templates/go,
// templates/c), which the sinusoidal and learned schemes share.
//
//go:embed templates
var Templates embed.FS

// Spec is what a scheme of absolute encodings says of its finding to
// the shared emitter: the names of the generated code and of what it is,
// the encoding's width, the table row of position 0, the positions a
// stored table holds (nil: its rows) and whether the encoding is a
// sinusoid (one computed in the graph is transcribed).
type Spec struct {
	Name, Func, Kind string
	Dim, Offset      int
	MaxPositions     *int
	Sinusoid         bool
}

func Deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// emitAbsolute is the code of an absolute encoding added to the
// embeddings: the model's stored table, or its sinusoid transcribed.
func EmitAbsolute(g *emit.Gen, f *passes.Finding, suffix string, sp Spec) (*emit.Part, error) {
	ev, _ := f.Evidence.(*TableEvidence)
	if ev == nil || ev.Value == "" {
		return nil, emit.Skip("no evidence of the encoding's values")
	}
	d := &absData{Name: sp.Name, Func: sp.Func, Dim: sp.Dim}
	offset, maxPos := sp.Offset, sp.MaxPositions
	d.Offset = offset
	pt := &emit.Part{Tmpl: "absolute", Data: d}
	vs := suffix
	var outType graph.DataType
	switch {
	case ev.Table != "":
		t := probe.Const(g.Ctx, ev.Table)
		if t == nil {
			return nil, emit.Skip("the stored table %q is not in the file", ev.Table)
		}
		// Row r is what the table holds at position r, on whichever
		// axis the table keeps its positions ([dim, positions] when
		// stored transposed).
		vals, width, ok := ev.RowMajor(t)
		if !ok || width != d.Dim {
			return nil, fmt.Errorf("the stored table %q has shape %v, the encoding %d columns", ev.Table, t.Shape, d.Dim)
		}
		outType = t.DType
		d.Form, d.TableFrom = "table", ev.Table
		d.Rows = len(vals) / d.Dim
		d.MaxPositions = d.Rows - offset
		if maxPos != nil && *maxPos-offset < d.MaxPositions {
			d.MaxPositions = *maxPos - offset
		}
		if emit.FloatType(outType) == "uint16" {
			for i := range vals {
				vals[i] = float64(emit.HalfBits(outType, vals[i]))
			}
		}
		d.Table = &emit.Table{Name: emit.LowerFirst(d.Name) + "Data" + vs, Type: emit.FloatType(outType), Vals: vals, From: "the stored table " + ev.Table}
		pt.Tables = append(pt.Tables, d.Table)
	case ev.Angles != nil && sp.Sinusoid:
		a := ev.Angles
		if a.Program != nil {
			return nil, emit.Skip("frequencies that depend on the positions")
		}
		d.Form, d.Pairs = "computed", ev.Pairs
		d.Type, d.Out, d.Product, d.FreqFrom = emit.TypeName(a.Type), emit.TypeName(a.Out), a.Product, a.FreqFrom
		d.Freq = &emit.Table{Name: "SinusoidalFreq" + vs, Type: "float64", Vals: a.Freq, From: a.FreqFrom}
		if a.ScaleFrom != "" {
			d.Scale, d.ScaleFrom = a.Scale, a.ScaleFrom
		}
		outType = a.Out
	case sp.Sinusoid:
		return nil, emit.Skip("the sinusoid's arithmetic could not be read exactly (%s)", ev.ExactWhy)
	default:
		return nil, emit.Skip("the learned encoding is computed, not a stored table")
	}
	switch outType {
	case graph.Float16:
		d.OutHalf, d.Half, pt.Half = true, "Float16", true
	case graph.BFloat16:
		d.OutHalf, d.Half, pt.BHalf = true, "BFloat16", true
	case graph.Float, graph.Double:
	default:
		return nil, emit.Skip("element type %v", outType)
	}
	for _, t := range []string{d.Type, d.Out} {
		if t == "float16" {
			pt.Half = true
		}
		if t == "bfloat16" {
			pt.BHalf = true
		}
	}
	// Golden vectors: the encoding as the model computes it for the first
	// n positions of a sequence.
	n := g.Opts.MaxPositions
	if d.MaxPositions > 0 {
		n = d.MaxPositions
	}
	if f := g.FixedLen(ev.Value, 2); f > 0 {
		n = min(n, f)
	}
	var rows [][]float64
	got, err := emit.Longest(n, 4, func(n int) error {
		r, err := g.Extract(probe.ExtractSpec{Values: []string{ev.Value}, Seq: n})
		if err != nil {
			return err
		}
		out, err := r.Run(nil)
		if err != nil {
			return err
		}
		t := out[0]
		if t.Rank() < 2 || t.Shape[t.Rank()-1] != d.Dim || t.Shape[t.Rank()-2] < n {
			return fmt.Errorf("the encoding has shape %v for %d positions", t.Shape, n)
		}
		v := t.Float64s()
		rows = nil
		for i := 0; i < n; i++ {
			rows = append(rows, v[i*d.Dim:(i+1)*d.Dim])
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	sample := emit.Thin(emit.SamplePositions(got), max(2, 30000/max(1, d.Dim)))
	d.G.Positions = &emit.Table{Name: "golden" + d.Name + "Positions" + vs, Type: "int64", Golden: true}
	d.G.Want = &emit.Table{Name: "golden" + d.Name + vs, Type: emit.FloatType(outType), Golden: true}
	for _, p := range sample {
		d.G.Positions.Vals = append(d.G.Positions.Vals, float64(p))
		for _, x := range rows[p] {
			if d.G.Want.Type == "uint16" {
				x = float64(emit.HalfBits(outType, x))
			}
			d.G.Want.Vals = append(d.G.Want.Vals, x)
		}
	}
	line := fmt.Sprintf("The %s added to the embeddings (before layers %s), %d wide", sp.Kind, emit.LayerList(f.Layers), d.Dim)
	switch d.Form {
	case "table":
		line += fmt.Sprintf(": the model's stored table %s (%d rows; position p is row p+%d).", d.TableFrom, d.Rows, offset)
	default:
		line += fmt.Sprintf(": sin and cos of the positions (plus %d) times the frequencies of %s, computed in %s by %s as the model does.", offset, d.FreqFrom, d.Type, d.Product)
	}
	d.Doc = append(d.Doc, line)
	pt.Emitted = emit.Emitted{Functions: []string{d.Func + suffix}, Form: d.Form, Positions: got, MaxPositions: d.MaxPositions,
		Golden: len(d.G.Want.Vals)}
	if d.OutHalf {
		pt.Emitted.Functions = append(pt.Emitted.Functions, d.Func+d.Half+suffix)
	}
	return pt, nil
}
