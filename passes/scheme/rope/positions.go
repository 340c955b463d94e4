package rope

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// ropePositions finds where the rotation of side s reads the positions:
// the candidate whose values, times the measured frequencies, are the
// angles of the rotation, at positions from 0 and further on.
func ropePositions(w *work.Work, s *attn.Side, r *rotation) (*probe.Positions, string) {
	if r.synthetic || r.dynamic != nil {
		return nil, "the cos/sin depend on inputs other than the positions (frequencies given as inputs, or rescaled with the sequence length)"
	}
	starts := []int64{0, 1000}
	if r.tableRows > 0 {
		starts = []int64{0, int64(max(0, r.tableRows-8))}
	}
	check := func(pos *probe.Positions) string {
		for i, st := range starts {
			pr := probe.NewProbe(w, 1, 8, st)
			shape, ok := pr.BindShape(w.Shape(s.In))
			if !ok {
				return "the shape of q is not known"
			}
			theta, _, err := angles(w, pr, s, shape, r.pairs)
			if err == nil {
				var ps []float64
				if ps, err = probe.PositionsIn(w, pr, pos); err == nil {
					if why := anglesFollow(theta, ps, r, shape); why != "" {
						return why
					}
				}
			}
			if err != nil {
				if i == 0 {
					return "probe: " + err.Error()
				}
				// Far positions the model refuses (a table cut to the
				// sequence) say nothing.
				continue
			}
		}
		return ""
	}
	// The candidates nearest the cos/sin first: a value the positions go
	// through on their way (HF's masked_fill of padding: Where(mask == 0,
	// 1, cumsum(mask) - 1); one row of position_ids shared by the batch)
	// holds what the rotation reads, an earlier one only agrees with it
	// on probes without padding.
	// Of one value's casts and reshapes the first is named: the same
	// numbers, as the model has them.
	cands := probe.PositionCandidates(w, s.Pos...)
	isCand := map[*graph.Value]bool{}
	for _, v := range cands {
		isCand[v] = true
	}
	slices.Reverse(cands)
	var why string
	for _, v := range cands {
		pos := probe.NewPositions(w, v)
		if why = check(pos); why != "" {
			continue
		}
		v = work.Back(v, work.SameValues, 8, func(x *graph.Value) bool {
			n := x.Producer()
			return n == nil || !isCand[n.Input(0)]
		})
		if first := probe.NewPositions(w, v); first.WorkValue != pos.WorkValue && check(first) == "" {
			return first, ""
		}
		return pos, ""
	}
	pos := probe.ImplicitPositions(w, s.Pos...)
	if why2 := check(pos); why2 == "" {
		return pos, ""
	} else if why == "" {
		why = why2
	}
	return nil, "no value holds the positions the rotation reads: " + why
}

// anglesFollow checks that angles per pair and slot are the positions of
// the slots times the frequencies.
func anglesFollow(theta [][]float64, ps []float64, r *rotation, shape []int) string {
	stride := 1
	for _, x := range shape[r.posAxis+1 : len(shape)-1] {
		stride *= x
	}
	n := shape[r.posAxis]
	if len(ps) != n {
		return fmt.Sprintf("%d positions for %d tokens", len(ps), n)
	}
	tol := 1e-3
	if r.half {
		tol = 3e-2
	}
	for k, om := range r.omega {
		for sl := range theta[k] {
			p := ps[(sl/stride)%n]
			d := math.Abs(math.Remainder(theta[k][sl]-p*om, 2*math.Pi))
			if d2 := math.Abs(math.Remainder(theta[k][sl]+p*om, 2*math.Pi)); d2 < d {
				d = d2
			}
			if d > tol+2e-7*math.Abs(p*om) {
				return fmt.Sprintf("at position %v the angle of pair %d is %.6g, not %.6g", p, k, theta[k][sl], p*om)
			}
		}
	}
	return ""
}
