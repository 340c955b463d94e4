package shaw

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
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
	Keys, Values *emit.Table // [len(Layers)][Rows][Dim]
	KeyFrom      []string
	ValueFrom    []string
	N            int
	Index        *emit.Table // the model's index of relative positions -(N-1)..N-1
	Emb          []*shawCase
}

// shawCase: the relative embeddings of one layer at the query rows Rows of
// a sequence of N, [len(Rows)][N][Dim].
type shawCase struct {
	Layer  int
	Values bool
	Rows   []int
	Want   *emit.Table
}

func EmitShaw(g *emit.Gen, f *passes.Finding, suffix string) (*emit.Part, error) {
	ev, _ := f.Evidence.(*Evidence)
	p, _ := f.Params.(*Params)
	if ev == nil || p == nil || len(ev.Blocks) == 0 {
		return nil, emit.Skip("no evidence of the relative tables")
	}
	if ev.Stored != "" {
		return nil, emit.Skip("the relative embeddings are stored whole (%s, [queries, keys, dim]): no table of distances and no index to write", ev.Stored)
	}
	d := &shawData{MaxRel: ev.Radius, Dim: p.Dim, Rows: 2*ev.Radius + 1, Sign: 1, Clipped: p.Clipped}
	if p.Distance == "query_minus_key" {
		d.Sign = -1
	}
	blocks := slices.Clone(ev.Blocks)
	slices.SortFunc(blocks, func(a, b Block) int { return a.Layer - b.Layer })
	d.Keys = &emit.Table{Name: "shawKeys" + suffix, Type: "float32"}
	if p.RelativeValues {
		d.Values = &emit.Table{Name: "shawValues" + suffix, Type: "float32"}
	}
	read := func(name string, t *emit.Table) error {
		c := probe.Const(g.Ctx, name)
		if c == nil || c.Rank() != 2 || c.Shape[0] != d.Rows || c.Shape[1] != d.Dim {
			return emit.Skip("the relative table %q is not a stored [%d, %d] table", name, d.Rows, d.Dim)
		}
		if c.DType != graph.Float {
			return emit.Skip("the relative table %q is %v", name, c.DType)
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
				return nil, emit.Skip("layer %d has no relative value table", b.Layer)
			}
			if err := read(b.Value, d.Values); err != nil {
				return nil, err
			}
			d.ValueFrom = append(d.ValueFrom, b.Value)
		}
	}
	d.Keys.From = "per layer: " + listOf(d.KeyFrom)
	pt := &emit.Part{Tmpl: "shaw", Data: d, Tables: []*emit.Table{d.Keys}}
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
	n = min(n, g.Opts.MaxPositions, 64)
	b0 := blocks[0]
	if f := g.FixedLen(b0.Index, 1); f > 0 {
		n = min(n, f)
	}
	d.N = n
	r, err := g.Extract(probe.ExtractSpec{Values: []string{b0.Index}, Seq: n})
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	out, err := r.Run(nil)
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	bv, _ := scorebias.NewBiasView(out[0])
	if _, q, k := bv.Dims(); q != n || k != n {
		return nil, fmt.Errorf("golden vectors: the index has shape %v for %d positions", out[0].Shape, n)
	}
	d.Index = &emit.Table{Name: "goldenShawIndex" + suffix, Type: "int32", Golden: true}
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
			c, err := goldenShawCase(g, side.emb, n, rows, d.Dim, fmt.Sprintf("goldenShaw%s%d%s", map[bool]string{false: "Keys", true: "Values"}[side.values], b.Layer, suffix))
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
	line := fmt.Sprintf("Relative position embeddings (Shaw et al.) of layers %s: tables of %d rows by %s, %s, %d wide", emit.LayerList(f.Layers), d.Rows, dist, clip, d.Dim)
	if d.Values != nil {
		line += ", for keys and values"
	}
	d.Doc = []string{line + "; the tables are the model's."}
	fns := []string{"ShawRelativeIndex" + suffix, "ShawRelativeKeys" + suffix}
	if d.Values != nil {
		fns = append(fns, "ShawRelativeValues"+suffix)
	}
	pt.Emitted = emit.Emitted{Functions: fns, Form: "table", Positions: n, Golden: golden}
	return pt, nil
}

// shawCase evaluates gathered relative embeddings at n positions and keeps
// the query rows rows.
func goldenShawCase(g *emit.Gen, value string, n int, rows []int, dim int, name string) (*shawCase, error) {
	r, err := g.Extract(probe.ExtractSpec{Values: []string{value}, Seq: n})
	if err != nil {
		return nil, err
	}
	out, err := r.Run(nil)
	if err != nil {
		return nil, err
	}
	t := out[0]
	if t.Len() < n*n*dim || t.Shape[t.Rank()-1] != dim {
		return nil, fmt.Errorf("the embeddings have shape %v for %d positions", t.Shape, n)
	}
	v := t.Float64s()
	c := &shawCase{Rows: rows, Want: &emit.Table{Name: name, Type: "float32", Golden: true}}
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
