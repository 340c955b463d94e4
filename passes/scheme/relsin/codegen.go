package relsin

import (
	"fmt"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
)

// relSinData is what the relsin templates read: the relative sinusoid of
// Transformer-XL and XLNet (the table of sin and cos of distance times
// frequency that each layer projects into its position keys).
type relSinData struct {
	Doc []string
	// XLNet: the rows hold distances kLen .. -qLen+1 (else Transformer-XL's
	// kLen-1 .. 0). ClampLen clamps the distances to ±ClampLen (0: not
	// clamped).
	XLNet    bool
	ClampLen int
	Dim, K   int
	// Pairs are the (sin, cos) columns of every frequency; Freq the
	// frequencies as the model stores them (FreqFrom), multiplied by the
	// distances in Product, in Type.
	Pairs             [][2]int
	Freq              *emit.Table
	FreqFrom, Product string
	Type              string
	TableFrom         string

	// Golden: rows at given distances (the model's subgraph with the
	// distances replaced) and whole tables at sequence lengths.
	Rows   *relSinRows
	Tables []*relSinTable
}

// relSinRows: the rows of the distances Dist, [len(Dist)][Dim].
type relSinRows struct {
	Dist *emit.Table
	Want *emit.Table
}

// relSinTable: the table of a sequence of N queries and keys, compared at
// the rows Rows (indexes into the table's RowCount rows).
type relSinTable struct {
	N, RowCount int
	Rows        []int
	Want        *emit.Table
}

func EmitRelSin(g *emit.Gen, f *passes.Finding, suffix string) (*emit.Part, error) {
	ev, p, err := emit.FindingOf[Evidence, Params](f, "no relative sinusoid evidence")
	if err != nil {
		return nil, err
	}
	if ev.Stored != "" {
		return nil, emit.Skip("the sinusoid is a stored table (%s) of the distances %s: the graph holds no arithmetic of it to write", ev.Stored, distanceSpan(ev.Distances))
	}
	if ev.Exact == nil {
		return nil, emit.Skip("the sinusoid's arithmetic could not be read exactly (%s)", ev.ExactWhy)
	}
	if ev.Distance == "" {
		return nil, emit.Skip("no value holds the distances the sinusoid is computed at")
	}
	d := &relSinData{Dim: p.Dim, K: len(ev.Pairs), Pairs: ev.Pairs, TableFrom: ev.Table}
	switch p.Variant {
	case "transfo_xl":
	case "xlnet":
		d.XLNet = true
	default:
		return nil, emit.Skip("the rows' distances follow neither Transformer-XL (klen-1 .. 0) nor XLNet (klen .. -qlen+1)")
	}
	if p.ClampLen != nil {
		d.ClampLen = *p.ClampLen
	}
	a := ev.Exact
	if a.Type != graph.Float || a.Out != graph.Float || a.ScaleFrom != "" {
		return nil, emit.Skip("the sinusoid is computed in %s (cast to %s%s); codegen writes float32 sinusoids", emit.TypeName(a.Type), emit.TypeName(a.Out), map[bool]string{true: ", scaled", false: ""}[a.ScaleFrom != ""])
	}
	d.Type, d.FreqFrom, d.Product = emit.TypeName(a.Type), a.FreqFrom, a.Product
	d.Freq = &emit.Table{Name: "RelSinInvFreq" + suffix, Type: "float64", Vals: a.Freq, From: a.FreqFrom}
	pt := &emit.Part{Tmpl: "relsin", Data: d}

	// Rows at distances -N..N (a sample), the distances given to the
	// model's own subgraph in place of the ones it computes.
	n := g.Opts.MaxPositions
	var dist []float64
	for _, x := range emit.SamplePositions(n + 1) {
		if x > 0 {
			dist = append(dist, float64(-x))
		}
	}
	for i, j := 0, len(dist)-1; i < j; i, j = i+1, j-1 {
		dist[i], dist[j] = dist[j], dist[i]
	}
	for _, x := range emit.SamplePositions(n + 1) {
		dist = append(dist, float64(x))
	}
	// The distances' element type, from the value the model computes.
	r, err := g.Extract(probe.ExtractSpec{Values: []string{ev.Distance}, Seq: 4})
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	out, err := r.Run(nil)
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	cut, err := emit.TensorOf(out[0].DType, []int{len(dist)}, dist)
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	r, err = g.Extract(probe.ExtractSpec{Values: []string{ev.Table}, Seq: 4, Cuts: map[string]*kernels.Tensor{ev.Distance: cut}})
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	out, err = r.Run(nil)
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	if t := out[0]; t.Len() != len(dist)*d.Dim || t.Shape[t.Rank()-1] != d.Dim {
		return nil, fmt.Errorf("golden vectors: the sinusoid has shape %v at %d distances", t.Shape, len(dist))
	}
	d.Rows = &relSinRows{
		Dist: &emit.Table{Name: "goldenRelSinDistances" + suffix, Type: "int64", Vals: dist, Golden: true},
		Want: &emit.Table{Name: "goldenRelSinRows" + suffix, Type: "float32", Vals: out[0].Float64s(), Golden: true},
	}
	golden := len(d.Rows.Want.Vals)
	// Whole tables at sequence lengths, the distances the model computes
	// (clamp included).
	lengths := []int{1, 5, max(2*d.ClampLen+3, 37)}
	if n > lengths[2] {
		lengths = append(lengths, n)
	}
	for _, l := range lengths {
		r, err := g.Extract(probe.ExtractSpec{Values: []string{ev.Table}, Seq: l})
		if err != nil {
			return nil, fmt.Errorf("golden vectors at %d positions: %w", l, err)
		}
		out, err := r.Run(nil)
		if err != nil {
			return nil, fmt.Errorf("golden vectors at %d positions: %w", l, err)
		}
		t := out[0]
		rows := t.Len() / d.Dim
		want := l
		if d.XLNet {
			want = 2 * l
		}
		if t.Shape[t.Rank()-1] != d.Dim || rows != want {
			return nil, fmt.Errorf("golden vectors: the sinusoid has shape %v for %d queries and keys, not %d rows", t.Shape, l, want)
		}
		all := make([]int, rows)
		for i := range all {
			all[i] = i
		}
		c := &relSinTable{N: l, RowCount: rows, Rows: emit.Thin(all, 24), Want: &emit.Table{Name: fmt.Sprintf("goldenRelSinTable%s_%d", suffix, l), Type: "float32", Golden: true}}
		v := t.Float64s()
		for _, i := range c.Rows {
			c.Want.Vals = append(c.Want.Vals, v[i*d.Dim:(i+1)*d.Dim]...)
		}
		d.Tables = append(d.Tables, c)
		golden += len(c.Want.Vals)
	}
	variant := "Transformer-XL's: one row per key, distances kLen-1 down to 0"
	if d.XLNet {
		variant = "XLNet's: distances kLen down to -qLen+1"
	}
	clamp := "not clamped"
	if d.ClampLen > 0 {
		clamp = fmt.Sprintf("clamped to ±%d", d.ClampLen)
	}
	d.Doc = []string{fmt.Sprintf("The relative sinusoid of layers %s (%s, %s), %d wide: sin and cos of the distance times the frequencies of %s, computed in %s by %s as the model does (the table %s, which each layer projects into its position keys).",
		emit.LayerList(f.Layers), variant, clamp, d.Dim, d.FreqFrom, d.Type, d.Product, d.TableFrom)}
	pt.Emitted = emit.Emitted{Functions: []string{"RelSinRowCount" + suffix, "RelSinDistances" + suffix, "RelSinRows" + suffix, "RelSinTable" + suffix},
		Form: "computed", Positions: n, Golden: golden}
	return pt, nil
}
