package nope

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
	"math"
	"slices"
)

// Temperatures finds query temperature tuning (Llama 4's NoPE layers).
var Temperatures = &passes.Pass[map[int]*Temperature]{
	Name: "temperature",
	Doc: `Find position-dependent scaling of the queries (attention temperature tuning).

A query side whose region multiplies q by a value that depends only on
the position (the same for every dimension) is a temperature. Probing it
at single positions finds where it first departs from 1 (floor_scale)
and by how much (attn_scale), for Llama 4's
log(floor((pos+1)/floor_scale)+1)·attn_scale+1.`,
	Requires: []passes.Analyzer{work.Normalize, attn.Blocks, attn.Sides},
	Run: func(c *passes.Context) (map[int]*Temperature, error) {
		w := work.Of(c)
		out := map[int]*Temperature{}
		for b, bs := range passes.Result(c, attn.Sides) {
			if bs.Q == nil || len(bs.Q.Nodes) != 1 || len(bs.Q.Pos) != 1 {
				continue
			}
			n := bs.Q.Nodes[0]
			if n.OpType != "Mul" && n.OpType != "Div" {
				continue
			}
			if t, why := temperature(w, bs.Q.Pos[0], n.OpType == "Div"); t != nil {
				out[b.Index] = t
			} else {
				c.Miss("temperature", w.OrigName(n), why, 1)
			}
		}
		return out, nil
	},
}

// scaleAt evaluates the scale value v at position pos: with a position
// input, one position starting there; otherwise the last of pos+1
// positions, or, when the model's shapes fix the number of positions
// (fixed reports it), the value at pos of those it takes.
func scaleAt(w *work.Work, v *graph.Value, pos int64, posInput bool) (x float64, fixed int, ok bool) {
	var p *probe.Probe
	if posInput {
		p = probe.NewProbe(w, 1, 1, pos)
	} else {
		if pos > 1<<16 {
			return 0, 0, false
		}
		p = probe.NewProbe(w, 1, int(pos)+1, 0)
		p.Past = 0 // positions counted from a KV cache start at 0 too
	}
	t, err := p.Value(v)
	if err != nil || t.Len() < 1 || p.Synthetic(v) {
		return 0, 0, false
	}
	vals := t.Float64s()
	// The positions are the innermost axis of more than one element (the
	// scale is one number per position, broadcast over the rest).
	n := 1
	for _, d := range slices.Backward(t.Shape) {
		if d > 1 {
			n = d
			break
		}
	}
	switch {
	case posInput || n == int(pos)+1:
		return vals[n-1], 0, true
	case n > int(pos):
		return vals[pos], n, true
	}
	return 0, n, false
}

func temperature(w *work.Work, v *graph.Value, inverse bool) (*Temperature, string) {
	posInput := probe.ReadsPositions(w, w.Cone(v))
	fixed := 0 // the positions a model of fixed shapes takes (0: any)
	at := func(pos int64) (float64, bool) {
		x, n, ok := scaleAt(w, v, pos, posInput)
		if n > 0 {
			fixed = n
		}
		if ok && inverse {
			x = 1 / x
		}
		return x, ok
	}
	one, ok := at(0)
	if !ok || math.Abs(one-1) > 1e-6 {
		return nil, "the scale of q is not 1 at position 0 or does not depend on the position alone"
	}
	// The first position where the scale departs from 1.
	lo, hi := int64(0), int64(-1)
	for k := 0; k < 26; k++ {
		p := int64(1)<<k - 1
		x, ok := at(p)
		if !ok && fixed > 0 && p >= int64(fixed) {
			return nil, fmt.Sprintf("the scale of q stays 1 over the %d positions the model's fixed shapes take", fixed)
		}
		if !ok {
			return nil, fmt.Sprintf("the scale could not be evaluated at position %d", p)
		}
		if math.Abs(x-1) > 1e-6 {
			hi = p
			break
		}
		lo = p
	}
	if hi < 0 {
		return nil, "the scale of q stays 1 up to position 2^25"
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		x, _ := at(mid)
		if math.Abs(x-1) > 1e-6 {
			hi = mid
		} else {
			lo = mid
		}
	}
	fs := float64(hi + 1)
	x, _ := at(hi)
	as := (x - 1) / math.Log(2)
	// Check the rule further out (within the positions a model of fixed
	// shapes takes).
	for _, k := range []float64{3, 10} {
		pos := int64(k*fs) - 1
		if fixed > 0 && pos >= int64(fixed) {
			if pos = int64(fixed) - 1; pos <= hi {
				continue
			}
		}
		y, ok := at(pos)
		want := math.Log(math.Floor(float64(pos+1)/fs)+1)*as + 1
		if !ok || math.Abs(y-want) > 1e-5*want {
			return nil, "the scale of q departs from 1 but does not follow log(floor((pos+1)/floor_scale)+1)·attn_scale+1"
		}
	}
	return &Temperature{FloorScale: fs, AttnScale: probe.Snap(as, 1e-5)}, ""
}
