package disentangled

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/scorebias"
)

// disData is what the disentangled templates read: DeBERTa's relative
// positions (q - k through the logarithmic bucket function) and the rows
// of the relative embedding its c2p and p2c terms read.
type disData struct {
	Doc []string
	// Span is the offset of the table indexes (the relative embedding has
	// 2·Span rows). Bucketed: the relative positions go through
	// make_log_bucket_position with Mid = buckets/2 and MaxRel
	// (max_relative_positions), dividing the log of a distance by
	// LogRatio; else they are q - k as they are.
	Span         int
	Bucketed     bool
	Mid, MaxRel  int
	LogRatio     float64
	LogRatioFrom string
	C2P, P2C     bool
	RelFrom      string
	C2PFrom      string
	P2CFrom      string

	// Golden: over relative positions -(N-1)..N-1, the model's bucketed
	// relative position and indexes; the whole matrix of M queries and
	// keys.
	N                   int
	Buckets, C2PI, P2CI *emit.Table
	M                   int
	Matrix              *emit.Table
}

func EmitDisentangled(g *emit.Gen, f *passes.Finding, suffix string) (*emit.Part, error) {
	ev, p, err := emit.FindingOf[Evidence, Params](f, "no disentangled evidence")
	if err != nil {
		return nil, err
	}
	if ev.RelativePositions == "" {
		return nil, emit.Skip("no value holds the relative positions the c2p index offsets (no c2p term, or its index is not the relative positions plus a constant)")
	}
	d := &disData{Span: ev.Span, RelFrom: ev.RelativePositions, C2PFrom: ev.C2PIndex, P2CFrom: ev.P2CIndex, C2P: ev.C2PIndex != "", P2C: ev.P2CIndex != ""}
	if p.PositionBuckets != nil {
		if p.MaxRelativePositions == nil {
			return nil, emit.Skip("max_relative_positions is not known: the relative positions follow no logarithmic bucketing the audit recognises")
		}
		d.Bucketed, d.Mid, d.MaxRel = true, *p.PositionBuckets/2, *p.MaxRelativePositions
		d.LogRatio, d.LogRatioFrom = ev.LogRatio, ev.LogRatioFrom
		if d.LogRatioFrom == "" {
			d.LogRatio = float64(float32(math.Log(float64(float32(float64(d.MaxRel-1) / float64(d.Mid))))))
			d.LogRatioFrom = "log((max_relative_positions-1) / (position_buckets/2)) in float32 (no constant of the graph holds it)"
		}
	} else if p.MaxRelativePositions != nil {
		d.MaxRel = *p.MaxRelativePositions
	}
	pt := &emit.Part{Tmpl: "disentangled", Data: d}
	// Golden vectors over a span long enough for the logarithmic buckets
	// to reach max_relative_positions.
	n := min(g.Opts.MaxPositions, max(64, 4*max(d.MaxRel, d.Span)))
	if fl := g.FixedLen(ev.RelativePositions, 1); fl > 0 {
		n = min(n, fl)
	}
	d.N = n
	values := []string{ev.RelativePositions}
	if d.C2P {
		values = append(values, ev.C2PIndex)
	}
	if d.P2C {
		values = append(values, ev.P2CIndex)
	}
	r, err := g.Extract(probe.ExtractSpec{Values: values, Seq: n})
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	out, err := r.Run(nil)
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	// by reads a [.., q, k] value at every relative position q - k.
	by := func(t *kernels.Tensor, name string) (*emit.Table, error) {
		bv, _ := scorebias.NewBiasView(t)
		if _, q, k := bv.Dims(); q != n || k != n {
			return nil, fmt.Errorf("golden vectors: %s has shape %v for %d positions", name, t.Shape, n)
		}
		tb := &emit.Table{Name: name, Type: "int32", Golden: true}
		for rel := -(n - 1); rel < n; rel++ {
			i, j := rel, 0
			if rel < 0 {
				i, j = 0, -rel
			}
			tb.Vals = append(tb.Vals, bv.At(0, i, j))
		}
		return tb, nil
	}
	if d.Buckets, err = by(out[0], "goldenDisentangledBuckets"+suffix); err != nil {
		return nil, err
	}
	k := 1
	if d.C2P {
		if d.C2PI, err = by(out[k], "goldenDisentangledC2PIndex"+suffix); err != nil {
			return nil, err
		}
		k++
	}
	if d.P2C {
		if d.P2CI, err = by(out[k], "goldenDisentangledP2CIndex"+suffix); err != nil {
			return nil, err
		}
	}
	// The whole matrix of a short sequence (its layout).
	d.M = min(n, 16)
	r, err = g.Extract(probe.ExtractSpec{Values: []string{ev.RelativePositions}, Seq: d.M})
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	if out, err = r.Run(nil); err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	bv, _ := scorebias.NewBiasView(out[0])
	if _, q, k := bv.Dims(); q != d.M || k != d.M {
		return nil, fmt.Errorf("golden vectors: the relative positions have shape %v for %d positions", out[0].Shape, d.M)
	}
	d.Matrix = &emit.Table{Name: "goldenDisentangledMatrix" + suffix, Type: "int32", Golden: true}
	for i := 0; i < d.M; i++ {
		for j := 0; j < d.M; j++ {
			d.Matrix.Vals = append(d.Matrix.Vals, bv.At(0, i, j))
		}
	}
	// The arithmetic the templates write must give the model's values.
	for x, rel := 0, -(n - 1); rel < n; x, rel = x+1, rel+1 {
		b := d.bucket(rel)
		if float64(b) != d.Buckets.Vals[x] {
			return nil, emit.Skip("the model's relative position of q - k = %d is %v, make_log_bucket_position in float32 gives %d", rel, d.Buckets.Vals[x], b)
		}
		if d.C2P && float64(d.index(b)) != d.C2PI.Vals[x] {
			return nil, emit.Skip("the model's c2p index of q - k = %d is %v, not clamp(bucket + %d, 0, %d) = %d", rel, d.C2PI.Vals[x], d.Span, 2*d.Span-1, d.index(b))
		}
		if d.P2C && float64(d.index(-b)) != d.P2CI.Vals[x] {
			return nil, emit.Skip("the model's p2c index of q - k = %d is %v, not clamp(-bucket + %d, 0, %d) = %d", rel, d.P2CI.Vals[x], d.Span, 2*d.Span-1, d.index(-b))
		}
	}
	line := fmt.Sprintf("Disentangled attention (DeBERTa) of layers %s: ", emit.LayerList(f.Layers))
	if d.Bucketed {
		line += fmt.Sprintf("the relative position q - k goes through the logarithmic bucket function (position_buckets %d, max_relative_positions %d, the log divided by %s from %s) as the model computes it in float32",
			2*d.Mid, d.MaxRel, emit.FmtFloat(d.LogRatio, 32), d.LogRatioFrom)
	} else {
		line += "the relative position is q - k as it is (not bucketed)"
	}
	line += fmt.Sprintf("; the terms read the rows of the %d-row relative embedding at the relative position plus %d, clamped to the table", 2*d.Span, d.Span)
	switch {
	case d.C2P && d.P2C:
		line += " (c2p at +position, p2c at -position)."
	case d.C2P:
		line += " (c2p only)."
	default:
		line += " (p2c only, at -position)."
	}
	d.Doc = []string{line}
	fns := []string{"DisentangledBucket" + suffix, "DisentangledRelativePositions" + suffix}
	golden := len(d.Buckets.Vals) + len(d.Matrix.Vals)
	if d.C2P {
		fns = append(fns, "DisentangledC2PIndex"+suffix)
		golden += len(d.C2PI.Vals)
	}
	if d.P2C {
		fns = append(fns, "DisentangledP2CIndex"+suffix)
		golden += len(d.P2CI.Vals)
	}
	pt.Emitted = emit.Emitted{Functions: fns, Form: "computed", Positions: n, Golden: golden}
	return pt, nil
}

// bucket is the relative position of q - k = rel as the templates compute
// it (make_log_bucket_position in float32 when bucketed).
func (d *disData) bucket(rel int) int {
	if !d.Bucketed {
		return rel
	}
	mid := d.Mid
	a := rel
	if rel < mid && rel > -mid {
		a = mid - 1
	} else if a < 0 {
		a = -a
	}
	if a <= mid {
		return rel
	}
	f := graph.Float
	x := emit.RoundTo(f, float64(a)/float64(mid))
	x = emit.RoundTo(f, math.Log(x))
	x = emit.RoundTo(f, x/d.LogRatio)
	x = emit.RoundTo(f, x*float64(mid-1))
	x = emit.RoundTo(f, math.Ceil(x)+float64(mid))
	if rel < 0 {
		x = -x
	}
	return int(x)
}

// index is the table row of a relative position: b + Span clamped to the
// table.
func (d *disData) index(b int) int { return min(max(b+d.Span, 0), 2*d.Span-1) }
