package relsin

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// A stored relative sinusoid is a constant [rows, .., dim] the layers
// project by their own weights and align by the relative shift, as an
// export at fixed sizes, ONNX Runtime's constant folding or the fold of
// onnxpe's metamorphic test writes it: no Sin or Cos is left in the
// graph. Its rows lie on sin/cos circles whose angles are linear in the
// distance; fitted as the absolute detector fits a stored sinusoid
// (layout, frequencies, base), the slowest pair's phase gives each row's
// distance, and the distances, for the scores' queries and keys, give
// the variant and clamp_len.

// storedSin is a stored sinusoid read from a constant: its rows, the fit
// and the distance of every row.
type storedSin struct {
	v    *graph.Value
	rows [][]float64
	fit  absolute.SinFit
	dist []float64
}

// storedAt reads a block's position term whose sinusoid is stored. It
// returns no finding and no reason when no constant the term reads is a
// sinusoid (DeBERTa's tables, weights).
func storedAt(w *work.Work, b *attn.Block, t attn.ScoreTerm, cone []*graph.Node) (*passes.Finding, string) {
	nodes := probe.FoldedCone(w, cone, t.Pos)
	s, why := findStored(w, t.Pos, nodes)
	if s == nil {
		return nil, why
	}
	params := &Params{Dim: len(s.rows[0])}
	var notes []string
	if s.fit.Denom == "d/2" {
		params.Base = passes.Ptr(s.fit.Base)
	} else {
		notes = append(notes, "base: the frequencies are not base^(-2i/dim)")
	}
	q, k, ok := scoreSizes(w, b)
	if ok {
		notes = append(notes, storedVariant(params, s.dist, q, k)...)
	} else {
		notes = append(notes, "variant, clamp_len: the scores' sizes are not fixed, so the rows of the stored sinusoid "+w.Name(s.v)+" stand for no known queries and keys")
	}
	ev, termNodes := blockTerm(w, b, t, params, &notes)
	rev := &Evidence{S: k, Omega: s.fit.Omega, Pairs: s.fit.Pairs, Sample: s.rows, Distances: s.dist, Table: w.Name(s.v), Stored: w.Name(s.v),
		Blocks:   []RelSinBlock{ev},
		ExactWhy: "the sinusoid is a stored table (" + w.Name(s.v) + "): the graph does not compute it from the distances"}
	f := &passes.Finding{Scheme: Name, Layers: []int{b.Index}, Params: params, Notes: notes, Evidence: rev}
	f.Nodes = w.OrigNames(append(termNodes, nodes...))
	return f, ""
}

// findStored is the first constant read by nodes (the term's cone with
// what normalisation folded into it), or pos itself, whose rows are a
// sinusoid of consecutive distances; else the reason a constant whose
// rows are sin/cos pairs is not one ("" when none is).
func findStored(w *work.Work, pos *graph.Value, nodes []*graph.Node) (*storedSin, string) {
	cands := []*graph.Value{pos}
	for _, n := range nodes {
		cands = append(cands, n.Inputs()...)
	}
	why := ""
	seen := map[*graph.Value]bool{}
	for _, v := range cands {
		if v == nil || seen[v] || !w.IsConst(v) || !work.IsFloatType(w.ElemType(v)) {
			continue
		}
		seen[v] = true
		p := probe.NewProbe(w, 1, 4, 0)
		rows, _ := absolute.TableRows(w, p, v)
		if len(rows) < 3 || len(rows[0]) < 2 || len(rows[0])%2 != 0 {
			continue
		}
		s, reason := readStored(rows)
		if s != nil {
			if t, err := p.Value(v); err == nil {
				reason = pairClip(t)
			}
			if reason == "" {
				s.v = v
				return s, ""
			}
		}
		if reason != "" && why == "" {
			why = "the stored table " + w.Name(v) + ": " + reason
		}
	}
	return nil, why
}

// pairClip tells a table of relative embeddings stored whole and clipped
// (Shaw's, as Nezha's export holds them) from a stored relative sinusoid:
// it returns why t is such a table, "" when it is not. A relative
// sinusoid gives every relative distance its own row (the rows along one
// axis, which the relative shift aligns to key − query; a clamp_len
// repeats the rows of the distances beyond it there). t's values that
// change along two leading axes hold a row per query and key instead;
// when those rows depend on the pair through key − query alone, and the
// rows of the distances beyond some k on either side are those of k (the
// distance saturates: clipped), the term is Shaw's clipped relative
// embedding, whatever its rows hold (a sinusoid of the clipped distance,
// in Nezha).
func pairClip(t *kernels.Tensor) string {
	r := t.Rank()
	if r < 3 {
		return ""
	}
	var vary []int
	for ax, n := range t.Shape[:r-1] {
		if n > 1 && !absolute.ConstantAlong(t, ax) {
			vary = append(vary, ax)
		}
	}
	if len(vary) < 2 {
		return ""
	}
	a, b := vary[len(vary)-2], vary[len(vary)-1]
	d := t.Shape[r-1]
	stride := make([]int, r)
	stride[r-1] = 1
	for ax := r - 2; ax >= 0; ax-- {
		stride[ax] = stride[ax+1] * t.Shape[ax+1]
	}
	v := t.Float64s()
	nq, nk := t.Shape[a], t.Shape[b]
	// byDist[n + nq - 1] is the row of distance n = key − query.
	byDist := make([][]float64, nq+nk-1)
	for i := 0; i < nq; i++ {
		for j := 0; j < nk; j++ {
			off := i*stride[a] + j*stride[b]
			row := v[off : off+d]
			n := j - i + nq - 1
			if byDist[n] == nil {
				byDist[n] = row
			} else if !nearRows(byDist[n], row) {
				return "" // not a function of key − query
			}
		}
	}
	at := func(n int) []float64 { return byDist[n+nq-1] }
	hi, lo := nk-1, nq-1
	for hi > 0 && nearRows(at(hi), at(hi-1)) {
		hi--
	}
	for lo > 0 && nearRows(at(-lo), at(-(lo-1))) {
		lo--
	}
	if hi == nk-1 && lo == nq-1 {
		return "" // every distance its own row
	}
	return fmt.Sprintf("its rows are per query and key (axes %d and %d, %d x %d), a function of key − query whose rows stop changing beyond the distances -%d and %d of %d .. %d: "+
		"a clipped relative embedding stored whole (Shaw's), not a sinusoid giving every relative distance a row of its own", a, b, nq, nk, lo, hi, -(nq - 1), nk-1)
}

// readStored fits rows as a sinusoid of distances: the rows between the
// repeated ones at either end (a clamp repeats the extreme distance),
// ascending or descending, fitted by absolute.FitSinusoid; then every row
// read at the distance its slowest pair's phase gives. It returns the
// reason when the rows are sin/cos pairs but not such a sinusoid, and no
// reason when they are not sin/cos pairs.
func readStored(rows [][]float64) (*storedSin, string) {
	d := len(rows[0])
	lo, hi := 0, len(rows)-1
	for lo < hi && nearRows(rows[lo], rows[lo+1]) {
		lo++
	}
	for hi > lo && nearRows(rows[hi], rows[hi-1]) {
		hi--
	}
	run := rows[lo : hi+1]
	fit, ok := absolute.FitSinusoid(run, d)
	if !ok {
		back := slices.Clone(run)
		slices.Reverse(back)
		fit, ok = absolute.FitSinusoid(back, d)
	}
	if !ok {
		if onCircles(rows) {
			return nil, "its rows are sin/cos pairs whose angles are not linear in the row (not one distance apart)"
		}
		return nil, ""
	}
	dist, why := rowDistances(rows, fit)
	if dist == nil {
		return nil, why
	}
	return &storedSin{rows: rows, fit: fit, dist: dist}, ""
}

// rowDistances reads the distance of every row from its slowest pair's
// phase (distance·ω for |distance| below π/ω) and confirms the row is
// the sinusoid of that distance at every frequency.
func rowDistances(rows [][]float64, fit absolute.SinFit) ([]float64, string) {
	k := 0
	for j, om := range fit.Omega {
		if om < fit.Omega[k] {
			k = j
		}
	}
	dist := make([]float64, len(rows))
	for r, row := range rows {
		x := math.Atan2(row[fit.Pairs[k][0]], row[fit.Pairs[k][1]]) / fit.Omega[k]
		dist[r] = math.Round(x)
		if math.Abs(x-dist[r]) > 0.1 {
			return nil, fmt.Sprintf("row %d is not at a whole distance (%g)", r, x)
		}
		for j, p := range fit.Pairs {
			a := dist[r] * fit.Omega[j]
			if math.Abs(row[p[0]]-math.Sin(a)) > 2e-3 || math.Abs(row[p[1]]-math.Cos(a)) > 2e-3 {
				return nil, fmt.Sprintf("row %d is not the sinusoid of distance %g", r, dist[r])
			}
		}
	}
	return dist, ""
}

// storedVariant sets the variant and clamp_len of stored rows at
// distances dist for q queries and k keys: Transformer-XL's k rows
// k-1 .. 0 or XLNet's k+q rows k .. -q+1, each maybe clamped to ±c (the
// rows stop changing at c). It returns the notes of what the rows leave
// open.
func storedVariant(p *Params, dist []float64, q, k int) []string {
	cands := []struct {
		name      string
		rows, top int
	}{{"transfo_xl", k, k - 1}, {"xlnet", k + q, k}}
	for _, c := range cands {
		if len(dist) != c.rows {
			continue
		}
		clamp, ok := clampOf(dist, c.top)
		if !ok {
			continue
		}
		p.Variant, p.ClampLen = c.name, clamp
		if clamp == nil {
			return []string{fmt.Sprintf("clamp_len: the stored sinusoid holds the distances %g .. %g of %d keys and %d queries only; a clamp beyond them would not show in it",
				dist[0], dist[len(dist)-1], k, q)}
		}
		return nil
	}
	return []string{fmt.Sprintf("variant, clamp_len: the stored sinusoid's %d rows hold the distances %g .. %g, for %d queries and %d keys neither klen-1 .. 0 nor klen .. -qlen+1, clamped or not",
		len(dist), dist[0], dist[len(dist)-1], q, k)}
}

// clampOf tells whether dist are the distances top, top-1, ... (nil)
// or those clamped to ±c with c below the largest of them (&c).
func clampOf(dist []float64, top int) (*int, bool) {
	far := 0.0
	for r := range dist {
		far = max(far, math.Abs(float64(top-r)))
	}
	c := 0.0
	for _, d := range dist {
		c = max(c, math.Abs(d))
	}
	if c > far {
		return nil, false
	}
	for r, d := range dist {
		if d != max(-c, min(c, float64(top-r))) {
			return nil, false
		}
	}
	if c == far {
		return nil, true
	}
	ci := int(c)
	return &ci, true
}

// scoreSizes are the queries and keys of a block's scores when its shapes
// fix them: the keys on the Softmax's axis, the queries on the one before
// (as every exporter lays scores out).
func scoreSizes(w *work.Work, b *attn.Block) (q, k int, ok bool) {
	if b.Softmax == nil {
		return 0, 0, false
	}
	s := w.Shape(b.Softmax.Input(0))
	axis := b.Softmax.AttrInt("axis", -1)
	if w.Opset(b.Softmax) < 13 && b.Softmax.Attr("axis") == nil {
		axis = 1
	}
	r := s.Rank()
	if r < 2 {
		return 0, 0, false
	}
	kAx := work.NormAxis(axis, r)
	if kAx < 1 || kAx >= r || !s.Dims[kAx-1].Known() || !s.Dims[kAx].Known() {
		return 0, 0, false
	}
	return int(s.Dims[kAx-1]), int(s.Dims[kAx]), true
}

// nearRows reports whether two rows are the same distance's (the
// fastest frequency turns by a radian from one distance to the next).
func nearRows(a, b []float64) bool {
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-6 {
			return false
		}
	}
	return true
}

// onCircles reports whether every row's columns pair up, as [sin | cos]
// halves or interleaved, into points of the unit circle.
func onCircles(rows [][]float64) bool {
	d := len(rows[0])
	for _, pair := range []func(i int) (int, int){
		func(i int) (int, int) { return i, i + d/2 },
		func(i int) (int, int) { return 2 * i, 2*i + 1 },
	} {
		ok := true
		for _, r := range rows {
			for i := 0; i < d/2 && ok; i++ {
				s, c := pair(i)
				ok = math.Abs(r[s]*r[s]+r[c]*r[c]-1) <= 2e-3
			}
		}
		if ok {
			return true
		}
	}
	return false
}
