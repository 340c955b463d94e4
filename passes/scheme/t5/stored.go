package t5

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/scorebias"
	"github.com/onnxpe/onnxpe/passes/work"
)

// maxSearchDistance is the largest max_distance the fits try; a map
// every value from some point to it reproduces is reproduced by every
// larger value too.
const maxSearchDistance = 1 << 14

// storedFinding reads T5's bias from a stored table: a constant of the
// bias's cone laid out as [.., heads, queries, keys], which an export at
// fixed sizes (or ONNX Runtime's constant folding) makes of the buckets
// and their gather. Its values are a function of key - query; with
// trained or random weights the relative positions of one bucket read
// equal values and those of two buckets do not, so the partition of the
// distances the table holds is the bucket map up to the buckets' numbers.
// The direction is read from the keys after the query; num_buckets and
// max_distance are those of Hugging Face's _relative_position_bucket that
// partition the held distances the same way, null with the candidates in
// a note when several do.
func storedFinding(w *work.Work, b *scorebias.Bias, sharers func(*graph.Value) []int) (*passes.Finding, string) {
	r, why := readStored(w, b)
	if r == nil {
		return nil, why
	}
	params := &Params{NumHeads: r.heads, ScaledScores: b.Block.Scaled}
	notes := settle(r.fits, params, r.maxRel)
	users := sharers(r.v)
	params.SharedAcrossLayers = len(users) > 1
	ev := &Evidence{Bias: w.OrigValue(b.Term.Value), Stored: w.Name(r.v), MaxRel: r.maxRel, Groups: r.groups}
	if params.NumBuckets != nil && params.MaxDistance != nil {
		ev.BucketMap = t5Map(r.maxRel+1, *params.NumBuckets, *params.Bidirectional, *params.MaxDistance)
		ev.MaxDistances = r.fits[0].mds[*params.NumBuckets]
	}
	f := &passes.Finding{Scheme: Name, Layers: users, Params: params, Notes: notes, Evidence: ev}
	if !slices.Contains(f.Layers, b.Block.Index) {
		f.Layers = append(f.Layers, b.Block.Index)
	}
	f.Nodes = w.OrigNames(append([]*graph.Node{b.Term.Add}, b.Cone...))
	return f, ""
}

// storedRead is what readStored read of a stored bias: the constant, its
// heads, its relative positions grouped by value, and the settings of
// each direction that group them alike.
type storedRead struct {
	v      *graph.Value
	heads  int
	maxRel int
	groups []int
	fits   []partitionFit
}

// readStored reads the stored table of a bias, or says why it is not
// T5's.
func readStored(w *work.Work, b *scorebias.Bias) (*storedRead, string) {
	v, sv := storedBias(w, b)
	if v == nil {
		return nil, "the relative bias neither gathers a [buckets, heads] table by an index nor adds a stored [heads, queries, keys] table"
	}
	rv, why := relativeValues(sv)
	if why != "" {
		return nil, "the stored bias " + w.Name(v) + ": " + why
	}
	r := &storedRead{v: v, maxRel: rv.maxRel, groups: rv.groups()}
	r.heads, _, _ = sv.Dims()
	dirs, why := directions(r.groups, r.maxRel)
	if why != "" {
		return nil, "the stored bias " + w.Name(v) + ": " + why
	}
	for _, bidir := range dirs {
		if ft := fitPartition(r.groups, r.maxRel, bidir); !ft.empty() {
			r.fits = append(r.fits, ft)
		}
	}
	if len(r.fits) == 0 {
		return nil, "the stored bias " + w.Name(v) + ": no num_buckets and max_distance of T5's bucket function partition its distances as its values do"
	}
	return r, ""
}

// storedBias is the constant of the bias's cone (or the bias itself) that
// is the bias where the bias does not mask: laid out with the bias's
// queries and keys on its last two axes and equal to it at every entry
// the bias does not mask (what else is added only masks).
func storedBias(w *work.Work, b *scorebias.Bias) (*graph.Value, scorebias.BiasView) {
	cands := []*graph.Value{b.Term.Value}
	for _, n := range b.Cone {
		cands = append(cands, n.Inputs()...)
	}
	seen := map[*graph.Value]bool{}
	for _, v := range cands {
		if v == nil || seen[v] || !w.IsConst(v) {
			continue
		}
		seen[v] = true
		t := w.Const(v)
		if t == nil || t.Rank() < 2 || !work.IsFloatType(t.DType) {
			continue
		}
		sv, ok := scorebias.NewBiasView(t)
		if _, q, k := sv.Dims(); !ok || q != b.View.Q || k != b.View.K {
			continue
		}
		if explains(sv, b.View, b.Eps) {
			return v, sv
		}
	}
	return nil, scorebias.BiasView{}
}

// explains reports whether the stored view s equals the bias bv at every
// entry bv does not mask (within the rounding eps of the bias's type).
func explains(s, bv scorebias.BiasView, eps float64) bool {
	sh, _, _ := s.Dims()
	bh, _, _ := bv.Dims()
	if sh != bh && sh != 1 && bh != 1 {
		return false
	}
	for h := 0; h < max(sh, bh); h++ {
		for i := 0; i < bv.Q; i++ {
			for j := 0; j < bv.K; j++ {
				x, y := bv.At(h, i, j), s.At(h, i, j)
				if !scorebias.Masked(x) && math.Abs(x-y) > 1e-6+2*eps*math.Abs(x) {
					return false
				}
			}
		}
	}
	return true
}

// relValues are a stored bias's values per relative position d = key -
// query from -maxRel to maxRel: vals[d+maxRel] holds the heads' values,
// nil where every entry of that distance is masked.
type relValues struct {
	maxRel int
	vals   [][]float64
}

// relativeValues reads a stored bias per relative position (the queries
// are the last of the keys, as after a KV cache), or says why it is not a
// function of key - query.
func relativeValues(sv scorebias.BiasView) (relValues, string) {
	heads, q, k := sv.Dims()
	rv := relValues{maxRel: k - 1, vals: make([][]float64, 2*k-1)}
	off := k - q
	for i := 0; i < q; i++ {
		for j := 0; j < k; j++ {
			vec := make([]float64, heads)
			masked := false
			for h := range vec {
				vec[h] = sv.At(h, i, j)
				masked = masked || scorebias.Masked(vec[h])
			}
			if masked {
				continue
			}
			d := j - i - off + rv.maxRel
			if rv.vals[d] == nil {
				rv.vals[d] = vec
			} else if !sameValues(rv.vals[d], vec) {
				return rv, fmt.Sprintf("its values are not a function of key - query (query %d, key %d)", i, j)
			}
		}
	}
	return rv, ""
}

// sameValues reports whether two heads' vectors are equal up to float32
// rounding.
func sameValues(a, b []float64) bool {
	for h := range a {
		if math.Abs(a[h]-b[h]) > 1e-6*math.Max(1, math.Abs(a[h])) {
			return false
		}
	}
	return true
}

// groups numbers the distinct values of the relative positions in the
// order of the distances: group[d+maxRel] (-1 where the bias holds no
// value of d).
func (rv relValues) groups() []int {
	out := make([]int, len(rv.vals))
	var reps [][]float64
	for d, vec := range rv.vals {
		out[d] = -1
		if vec == nil {
			continue
		}
		g := slices.IndexFunc(reps, func(r []float64) bool { return sameValues(r, vec) })
		if g < 0 {
			g = len(reps)
			reps = append(reps, vec)
		}
		out[d] = g
	}
	return out
}

// directions reads T5's direction from the keys after the query: causal
// T5 gives every one of them the query's own bucket (relative position
// 0), bidirectional T5 buckets of their own that no key up to the query
// has. When the bias masks every key after the query (a causal mask
// stored with it) both directions are candidates.
func directions(group []int, maxRel int) ([]bool, string) {
	zero := group[maxRel]
	if zero < 0 {
		return nil, "it masks the query's own key"
	}
	after, before := map[int]bool{}, map[int]bool{}
	for d, g := range group {
		switch {
		case g < 0:
		case d > maxRel:
			after[g] = true
		default:
			before[g] = true
		}
	}
	if len(after) == 0 {
		return []bool{false, true}, ""
	}
	if len(after) == 1 && after[zero] {
		return []bool{false}, ""
	}
	for g := range after {
		if before[g] {
			return nil, "keys after the query share values with keys up to it, as in neither of T5's directions"
		}
	}
	return []bool{true}, ""
}

// partitionFit is what partitions a stored bias's distances as its values
// do: the bucket counts that do with some max_distance, each with those
// max_distance values, and tailFrom, from which every bucket count does
// with any max_distance (0: none).
type partitionFit struct {
	bidir    bool
	nbs      []int
	mds      map[int][]int
	tailFrom int
}

func (ft partitionFit) empty() bool { return len(ft.nbs) == 0 && ft.tailFrom == 0 }

func (ft partitionFit) step() int {
	if ft.bidir {
		return 2
	}
	return 1
}

// fitPartition finds the settings of Hugging Face's bucket function (in
// direction bidir) whose buckets partition the held distances as group
// does. A direction's exact buckets are half its buckets; with more than
// twice the largest distance held every distance has its own bucket,
// whatever max_distance, so the settings with fewer are searched and the
// rest is one tail.
func fitPartition(group []int, maxRel int, bidir bool) partitionFit {
	ft := partitionFit{bidir: bidir, mds: map[int][]int{}}
	m := newMatcher(group, maxRel, bidir)
	for half := max(2, minHalf(group, maxRel, bidir)); half <= 2*m.nmax+1; half++ {
		nb := half * ft.step()
		for md := half/2 + 1; md <= maxSearchDistance; md++ {
			if m.same(nb, md) {
				ft.mds[nb] = append(ft.mds[nb], md)
			}
		}
		if len(ft.mds[nb]) > 0 {
			ft.nbs = append(ft.nbs, nb)
		}
	}
	if tail := (2*m.nmax + 2) * ft.step(); m.same(tail, m.nmax+2) {
		ft.tailFrom = tail
	}
	return ft
}

// matcher compares the buckets of settings with the groups of the held
// distances.
type matcher struct {
	group   []int
	ds      []int // the held distances
	maxRel  int
	nmax    int // the largest distance n of the bucket function held
	bidir   bool
	gb, bg  []int
	ngroups int
}

func newMatcher(group []int, maxRel int, bidir bool) *matcher {
	m := &matcher{group: group, maxRel: maxRel, bidir: bidir}
	for k, g := range group {
		if g < 0 {
			continue
		}
		d := k - maxRel
		m.ds = append(m.ds, d)
		m.nmax = max(m.nmax, distanceOf(d, bidir))
		m.ngroups = max(m.ngroups, g+1)
	}
	m.gb = make([]int, m.ngroups)
	return m
}

// same reports whether Hugging Face's bucket function with nb buckets and
// max_distance md puts the held distances in the same groups as the
// values do: a bijection between groups and buckets.
func (m *matcher) same(nb, md int) bool {
	if cap(m.bg) < nb {
		m.bg = make([]int, nb)
	}
	m.bg = m.bg[:nb]
	for i := range m.gb {
		m.gb[i] = -1
	}
	for i := range m.bg {
		m.bg[i] = -1
	}
	for _, d := range m.ds {
		g, b := m.group[d+m.maxRel], t5BucketOf(d, nb, md, m.bidir)
		if m.gb[g] >= 0 && m.gb[g] != b || m.bg[b] >= 0 && m.bg[b] != g {
			return false
		}
		m.gb[g], m.bg[b] = b, g
	}
	return true
}

// distanceOf is the n of Hugging Face's bucket function for relative
// position d: |d| both ways, the distance back causally.
func distanceOf(d int, bidir bool) int {
	if bidir {
		return max(d, -d)
	}
	return max(-d, 0)
}

// minHalf is the fewest buckets a direction can have: as many as the
// distinct values up to the query, and one more than after it (relative
// position 0 takes the first bucket of that side, which no key after the
// query reads).
func minHalf(group []int, maxRel int, bidir bool) int {
	before, after := map[int]bool{}, map[int]bool{}
	for k, g := range group {
		switch {
		case g < 0:
		case k <= maxRel || !bidir:
			before[g] = true
		default:
			after[g] = true
		}
	}
	return max(len(before), len(after)+1)
}

// settle sets bidirectional, num_buckets and max_distance where one value
// fits, and returns the notes of those left null, with their candidates.
func settle(fits []partitionFit, p *Params, maxRel int) []string {
	held := fmt.Sprintf("the stored bias holds relative positions up to %d", maxRel)
	var notes []string
	if slices.ContainsFunc(fits, func(ft partitionFit) bool { return ft.tailFrom > 0 }) {
		notes = append(notes, "buckets: every relative position the stored bias holds has a value of its own, so no bucketing shows in the graph: T5's bias with enough buckets gives it, as would a learned bias per distance")
	}
	return append(notes, settleFits(fits, p, held)...)
}

// settleFits is settle's params and notes of the candidate settings.
func settleFits(fits []partitionFit, p *Params, held string) []string {
	if len(fits) > 1 {
		return []string{
			"bidirectional: the stored bias masks every key after its query (a causal mask stored with it), and the bias of those keys is what tells T5's directions apart: both reproduce it",
			fmt.Sprintf("num_buckets: %s, which %s (causal) or %s (bidirectional) partition as its values do", held, fits[0].nbText(), fits[1].nbText()),
			"max_distance: " + mdText(fits),
		}
	}
	ft := fits[0]
	p.Bidirectional = passes.Ptr(ft.bidir)
	if len(ft.nbs) != 1 || ft.tailFrom > 0 {
		return []string{
			fmt.Sprintf("num_buckets: %s, which %s partition as its values do", held, ft.nbText()),
			"max_distance: " + mdText(fits),
		}
	}
	nb := ft.nbs[0]
	p.NumBuckets = passes.Ptr(nb)
	switch mds := ft.mds[nb]; {
	case len(mds) == 1 && mds[0] < maxSearchDistance:
		p.MaxDistance = passes.Ptr(mds[0])
		return nil
	case mds[len(mds)-1] == maxSearchDistance:
		return []string{fmt.Sprintf("max_distance: %s, which every value from %d on partitions as its values do", held, mds[0])}
	default:
		return []string{fmt.Sprintf("max_distance: %s, which %s partition as its values do", held, intRanges(mds, 1))}
	}
}

// nbText names the candidate bucket counts.
func (ft partitionFit) nbText() string {
	nbs, from := ft.nbs, ft.tailFrom
	for from > 0 && len(nbs) > 0 && nbs[len(nbs)-1] == from-ft.step() {
		nbs, from = nbs[:len(nbs)-1], from-ft.step()
	}
	ft.tailFrom = from
	s := intRanges(nbs, ft.step())
	tail := ""
	if ft.tailFrom > 0 {
		tail = fmt.Sprintf("every count from %d on", ft.tailFrom)
		if ft.bidir {
			tail = fmt.Sprintf("every even count from %d on", ft.tailFrom)
		}
	}
	switch {
	case s == "":
		return tail
	case tail == "":
		return s
	}
	return s + " and " + tail
}

// mdText names the max_distance values of some candidate setting.
func mdText(fits []partitionFit) string {
	lo, hi := math.MaxInt, 0
	for _, ft := range fits {
		if ft.tailFrom > 0 {
			return "with num_buckets open, any value (with enough buckets every distance held is exact)"
		}
		for _, nb := range ft.nbs {
			lo, hi = min(lo, ft.mds[nb][0]), max(hi, ft.mds[nb][len(ft.mds[nb])-1])
		}
	}
	if hi == maxSearchDistance {
		return fmt.Sprintf("with num_buckets open, any value from %d on", lo)
	}
	return fmt.Sprintf("with num_buckets open, values from %d to %d", lo, hi)
}

// intRanges writes sorted integers as runs of the step: "18-22, 24"
// (step 1), "18-30 (even)" (step 2).
func intRanges(xs []int, step int) string {
	var parts []string
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1]-xs[j] == step {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, fmt.Sprint(xs[i]))
		case step == 2:
			parts = append(parts, fmt.Sprintf("%d-%d (even)", xs[i], xs[j]))
		default:
			parts = append(parts, fmt.Sprintf("%d-%d", xs[i], xs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
