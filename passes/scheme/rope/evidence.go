package rope

import (
	"math"

	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// cosSinRows evaluates the rotation of side s at consecutive positions
// with the first dimension of every pair set: what it gives in the pair's
// two dimensions is the cos and sin (times the amplitude) applied at each
// position. It takes evidenceRows positions when the rows agree with the
// measured frequencies (not when they depend on the length, as dynamic
// NTK's do, or a stored cache is shorter), else the measurement's length.
// start is the position of the first row, read from the angles (-1 when
// they do not fit 0). Nothing when the frequencies are graph inputs.
func cosSinRows(w *work.Work, s *attn.Side, r *rotation) (start int, cos, sin [][]float64) {
	if r.synthetic {
		return -1, nil, nil // the probe's made-up frequencies say nothing
	}
	lengths := []int{probe.EvidenceRows, r.seq}
	if r.tableRows > 0 && r.tableRows < probe.EvidenceRows || r.seq >= probe.EvidenceRows {
		lengths = lengths[1:]
	}
	for _, n := range lengths {
		p := probe.NewProbe(w, 1, n, 0)
		p.Past = 0 // positions counted from a KV cache start at 0 too
		shape, ok := p.BindShape(w.Shape(s.In))
		if !ok || r.posAxis >= len(shape)-1 || shape[r.posAxis] != n || shape[len(shape)-1] != r.headDim {
			continue
		}
		out, err := unitProbe(w, p, s, shape, func(_ int, row []float64) {
			for _, pr := range r.pairs {
				row[pr[0]] = 1
			}
		})
		if err != nil {
			continue
		}
		d := r.headDim
		stride := 1
		for _, x := range shape[r.posAxis+1 : len(shape)-1] {
			stride *= x
		}
		cos, sin = make([][]float64, n), make([][]float64, n)
		for i := 0; i < n; i++ {
			row := out[i*stride*d : (i*stride+1)*d]
			cos[i], sin[i] = make([]float64, len(r.pairs)), make([]float64, len(r.pairs))
			for k, pr := range r.pairs {
				cos[i][k], sin[i][k] = row[pr[0]], row[pr[1]]
			}
		}
		// The rotation's sense: the measured frequencies are positive.
		if n > 1 && len(r.omega) > 0 {
			d0 := math.Atan2(sin[1][0], cos[1][0]) - math.Atan2(sin[0][0], cos[0][0])
			if math.Abs(math.Remainder(d0+r.omega[0], 2*math.Pi)) < math.Abs(math.Remainder(d0-r.omega[0], 2*math.Pi)) {
				for i := range sin {
					for k := range sin[i] {
						sin[i][k] = -sin[i][k]
					}
				}
			}
		}
		start = -1
		if r.startsAt(0, cos[0], sin[0]) {
			start = 0
		}
		if n != r.seq && (start < 0 || !r.rowsAgree(start, cos, sin)) {
			continue
		}
		if len(cos) > probe.EvidenceRows { // a model of one fixed, longer length
			cos, sin = cos[:probe.EvidenceRows], sin[:probe.EvidenceRows]
		}
		return start, cos, sin
	}
	return -1, nil, nil
}

// startsAt reports whether the angles of a row are those of position p.
func (r *rotation) startsAt(p int, cos, sin []float64) bool {
	for k, om := range r.omega {
		tol := 1e-3 + 20*r.noise + 1e-6*om*float64(p)
		if r.half {
			tol += 2e-3 * (1 + om*float64(p))
		}
		if math.Abs(math.Remainder(math.Atan2(sin[k], cos[k])-om*float64(p), 2*math.Pi)) > tol {
			return false
		}
	}
	return true
}

// rowsAgree reports whether every row's angles are those of its position.
func (r *rotation) rowsAgree(start int, cos, sin [][]float64) bool {
	for i := range cos {
		if !r.startsAt(start+i, cos[i], sin[i]) {
			return false
		}
	}
	return true
}
