package codegen

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/scheme/shaw"
	"github.com/onnxpe/onnxpe/passes/scorebias"
)

// shawData is what the shaw templates read.
type shawData struct {
	Doc          []string
	MaxRel, Dim  int
	Rows         int
	Sign         int // +1: key - query, -1: query - key
	Clipped      bool
	Layers       []int
	Keys, Values *table // [len(Layers)][Rows][Dim]
	KeyFrom      []string
	ValueFrom    []string
	N            int
	Index        *table // the model's index of relative positions -(N-1)..N-1
	Emb          []*shawCase
}

// shawCase: the relative embeddings of one layer at the query rows Rows of
// a sequence of N, [len(Rows)][N][Dim].
type shawCase struct {
	Layer  int
	Values bool
	Rows   []int
	Want   *table
}

func emitShaw(g *gen, f *passes.Finding, suffix string) (*part, error) {
	ev, _ := f.Evidence.(*shaw.Evidence)
	p, _ := f.Params.(*shaw.Params)
	if ev == nil || p == nil || len(ev.Blocks) == 0 {
		return nil, skip("no evidence of the relative tables")
	}
	d := &shawData{MaxRel: p.MaxRelativePosition, Dim: p.Dim, Rows: 2*p.MaxRelativePosition + 1, Sign: 1, Clipped: p.Clipped}
	if p.Distance == "query_minus_key" {
		d.Sign = -1
	}
	blocks := slices.Clone(ev.Blocks)
	slices.SortFunc(blocks, func(a, b shaw.Block) int { return a.Layer - b.Layer })
	d.Keys = &table{Name: "shawKeys" + suffix, Type: "float32"}
	if p.RelativeValues {
		d.Values = &table{Name: "shawValues" + suffix, Type: "float32"}
	}
	read := func(name string, t *table) error {
		c := probe.Const(g.ctx, name)
		if c == nil || c.Rank() != 2 || c.Shape[0] != d.Rows || c.Shape[1] != d.Dim {
			return skip("the relative table %q is not a stored [%d, %d] table", name, d.Rows, d.Dim)
		}
		if c.DType != graph.Float {
			return skip("the relative table %q is %v", name, c.DType)
		}
		t.Vals = append(t.Vals, c.Float64s()...)
		return nil
	}
	for _, b := range blocks {
		if slices.Contains(d.Layers, b.Layer) {
			continue
		}
		d.Layers = append(d.Layers, b.Layer)
		if err := read(b.Key, d.Keys); err != nil {
			return nil, err
		}
		d.KeyFrom = append(d.KeyFrom, b.Key)
		if d.Values != nil {
			if b.Value == "" {
				return nil, skip("layer %d has no relative value table", b.Layer)
			}
			if err := read(b.Value, d.Values); err != nil {
				return nil, err
			}
			d.ValueFrom = append(d.ValueFrom, b.Value)
		}
	}
	d.Keys.From = "per layer: " + listOf(d.KeyFrom)
	pt := &part{Tmpl: "shaw", Data: d, Tables: []*table{d.Keys}}
	if d.Values != nil {
		d.Values.From = "per layer: " + listOf(d.ValueFrom)
		pt.Tables = append(pt.Tables, d.Values)
	}
	// Golden vectors: the model's index and gathered embeddings for a
	// sequence long enough to clip (or as long as the table allows).
	n := d.MaxRel + 1
	if d.Clipped {
		n = max(16, 4*d.MaxRel)
	}
	n = min(n, g.opts.MaxPositions, 64)
	b0 := blocks[0]
	if f := g.fixedLen(b0.Index, 1); f > 0 {
		n = min(n, f)
	}
	d.N = n
	r, err := g.extract(probe.ExtractSpec{Values: []string{b0.Index}, Seq: n})
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	out, err := r.run(nil)
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	bv, _ := scorebias.NewBiasView(out[0])
	if _, q, k := bv.Dims(); q != n || k != n {
		return nil, fmt.Errorf("golden vectors: the index has shape %v for %d positions", out[0].Shape, n)
	}
	d.Index = &table{Name: "goldenShawIndex" + suffix, Type: "int32", Golden: true}
	for rel := -(n - 1); rel < n; rel++ {
		i, j := 0, rel
		if rel < 0 {
			i, j = -rel, 0
		}
		d.Index.Vals = append(d.Index.Vals, bv.At(0, i, j))
	}
	rows := []int{0, n / 2, n - 1}
	golden := len(d.Index.Vals)
	for _, b := range blocks {
		for _, side := range []struct {
			emb    string
			values bool
		}{{b.KeyEmb, false}, {b.ValueEmb, true}} {
			if side.emb == "" || side.values && d.Values == nil {
				continue
			}
			c, err := g.shawCase(side.emb, n, rows, d.Dim, fmt.Sprintf("goldenShaw%s%d%s", map[bool]string{false: "Keys", true: "Values"}[side.values], b.Layer, suffix))
			if err != nil {
				return nil, fmt.Errorf("golden vectors of layer %d: %w", b.Layer, err)
			}
			c.Layer, c.Values = b.Layer, side.values
			d.Emb = append(d.Emb, c)
			golden += len(c.Want.Vals)
		}
	}
	dist := "key - query"
	if d.Sign < 0 {
		dist = "query - key"
	}
	clip := fmt.Sprintf("clipped to [-%d, %d]", d.MaxRel, d.MaxRel)
	if !d.Clipped {
		clip = fmt.Sprintf("not clipped: valid while |distance| <= %d", d.MaxRel)
	}
	line := fmt.Sprintf("Relative position embeddings (Shaw et al.) of layers %s: tables of %d rows by %s, %s, %d wide", layerList(f.Layers), d.Rows, dist, clip, d.Dim)
	if d.Values != nil {
		line += ", for keys and values"
	}
	d.Doc = []string{line + "; the tables are the model's."}
	fns := []string{"ShawRelativeIndex" + suffix, "ShawRelativeKeys" + suffix}
	if d.Values != nil {
		fns = append(fns, "ShawRelativeValues"+suffix)
	}
	pt.Emitted = Emitted{Functions: fns, Form: "table", Positions: n, Golden: golden}
	return pt, nil
}

// shawCase evaluates gathered relative embeddings at n positions and keeps
// the query rows rows.
func (g *gen) shawCase(value string, n int, rows []int, dim int, name string) (*shawCase, error) {
	r, err := g.extract(probe.ExtractSpec{Values: []string{value}, Seq: n})
	if err != nil {
		return nil, err
	}
	out, err := r.run(nil)
	if err != nil {
		return nil, err
	}
	t := out[0]
	if t.Len() < n*n*dim || t.Shape[t.Rank()-1] != dim {
		return nil, fmt.Errorf("the embeddings have shape %v for %d positions", t.Shape, n)
	}
	v := t.Float64s()
	c := &shawCase{Rows: rows, Want: &table{Name: name, Type: "float32", Golden: true}}
	for _, i := range rows {
		c.Want.Vals = append(c.Want.Vals, v[i*n*dim:(i+1)*n*dim]...)
	}
	return c, nil
}

func listOf(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}
