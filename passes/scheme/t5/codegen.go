package t5

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/scorebias"
)

// t5Data is what the t5 templates read.
type t5Data struct {
	Doc                      []string
	NumBuckets, MaxDistance  int
	Bidirectional            bool
	Heads                    int
	LogRatio                 float64
	LogRatioFrom, MaxDistWhy string
	Table                    *emit.Table
	TableFrom, BucketsFrom   string
	// Golden: the bucket of every relative position -(N-1)..N-1, and
	// bias calls.
	N       int
	Buckets *emit.Table
	G       []*scorebias.BiasCase
}

func EmitT5(g *emit.Gen, f *passes.Finding, suffix string) (*emit.Part, error) {
	ev, _ := f.Evidence.(*Evidence)
	p, _ := f.Params.(*Params)
	if ev == nil || p == nil || ev.Buckets == "" || ev.Table == "" {
		return nil, emit.Skip("no T5 evidence of the bucket index (a fused RelativePositionBias computes it inside)")
	}
	if p.NumBuckets == nil || p.Bidirectional == nil {
		return nil, emit.Skip("num_buckets or the direction is not known")
	}
	d := &t5Data{NumBuckets: *p.NumBuckets, Bidirectional: *p.Bidirectional, Heads: p.NumHeads, BucketsFrom: ev.Buckets, TableFrom: ev.Table}
	switch {
	case p.MaxDistance != nil:
		d.MaxDistance = *p.MaxDistance
		d.MaxDistWhy = "fitted to the model's bucket map"
	case len(ev.MaxDistances) > 0:
		d.MaxDistance = ev.MaxDistances[0]
		d.MaxDistWhy = fmt.Sprintf("the smallest of the values reproducing the model's bucket map (%d to %d)", ev.MaxDistances[0], ev.MaxDistances[len(ev.MaxDistances)-1])
	default:
		return nil, emit.Skip("max_distance is not known")
	}
	half := d.NumBuckets
	if d.Bidirectional {
		half /= 2
	}
	maxExact := half / 2
	d.LogRatio, d.LogRatioFrom = ev.LogRatio, ev.LogRatioFrom
	if d.LogRatioFrom == "" {
		d.LogRatio = float64(float32(math.Log(float64(d.MaxDistance) / float64(maxExact))))
		d.LogRatioFrom = "log(max_distance / max_exact) in float32 (no constant of the graph holds it)"
	}
	t := probe.Const(g.Ctx, ev.Table)
	if t == nil || t.Rank() != 2 || t.Shape[0] != d.NumBuckets || t.Shape[1] != d.Heads {
		return nil, emit.Skip("the bias table %q is not a stored [buckets, heads] table", ev.Table)
	}
	if t.DType != graph.Float {
		return nil, emit.Skip("the bias table is %v", t.DType)
	}
	d.Table = &emit.Table{Name: "t5Table" + suffix, Type: "float32", Vals: t.Float64s(), From: "the table " + ev.Table + ", [buckets][heads]"}
	pt := &emit.Part{Tmpl: "t5", Data: d, Tables: []*emit.Table{d.Table}}
	// The bucket map, from the model's bucket index over n queries and
	// keys: row 0 holds distances 0..n-1, column 0 distances 0..-(n-1).
	n := min(g.Opts.MaxPositions, max(64, 4*d.MaxDistance))
	if f := g.FixedLen(ev.Buckets, 1); f > 0 {
		n = min(n, f)
	}
	r, err := g.Extract(probe.ExtractSpec{Values: []string{ev.Buckets}, Seq: n})
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	out, err := r.Run(nil)
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	bv, _ := scorebias.NewBiasView(out[0])
	if _, q, k := bv.Dims(); q != n || k != n {
		return nil, fmt.Errorf("golden vectors: the bucket index has shape %v for %d positions", out[0].Shape, n)
	}
	d.N = n
	d.Buckets = &emit.Table{Name: "goldenT5Buckets" + suffix, Type: "int32", Golden: true}
	for rel := -(n - 1); rel < n; rel++ {
		i, j := 0, rel
		if rel < 0 {
			i, j = -rel, 0
		}
		d.Buckets.Vals = append(d.Buckets.Vals, bv.At(0, i, j))
	}
	small := min(n, 16)
	c, err := scorebias.BiasGolden(g, ev.Bias, small, small, d.Heads, "goldenT5Bias"+suffix+"_16")
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	d.G = append(d.G, c)
	if c, err = scorebias.BiasGolden(g, ev.Bias, n, 2, d.Heads, fmt.Sprintf("goldenT5Bias%s_%d", suffix, n)); err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	d.G = append(d.G, c)
	dir := "causal (keys after the query share bucket 0)"
	if d.Bidirectional {
		dir = "bidirectional"
	}
	d.Doc = []string{fmt.Sprintf("T5 relative attention bias of layers %s: %d buckets, %s, max_distance %d, %d heads; the bias table is the model's %s.",
		emit.LayerList(f.Layers), d.NumBuckets, dir, d.MaxDistance, d.Heads, ev.Table)}
	golden := len(d.Buckets.Vals)
	for _, c := range d.G {
		golden += len(c.Want.Vals)
	}
	pt.Emitted = emit.Emitted{Functions: []string{"T5Bucket" + suffix, "T5Bias" + suffix}, Form: "computed", Positions: n, Golden: golden}
	return pt, nil
}
