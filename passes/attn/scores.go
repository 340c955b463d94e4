package attn

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// ScoreTest is what a block's scores show when the content of its q and
// k is held fixed over the positions (the projected q and k cut to one
// vector per head, the same at every position): whatever still changes
// the scores is position information the block receives between its
// projections and its Softmax (a rotation, a bias of the scores, a term
// of q with position embeddings).
type ScoreTest struct {
	// Len is the number of queries probed (and of new keys).
	Len int
	// Change is the largest difference between two scores of one query
	// over the keys it sees: 0 (within Tol) when the block receives no
	// position information of its own.
	Change float64
	// Residual is the largest departure of the scores, less each query's
	// score of its own position, from a function of key − query alone.
	Residual float64
	// Shift is the shift of every position under which the scores stayed
	// the same (0 when the model counts its positions itself: the shift
	// is then the one along the diagonal), and Shifted the largest change
	// it made.
	Shift   int64
	Shifted float64
	// Tol is the tolerance of the scores' element type.
	Tol float64
	// Why says why the test could not run ("" when it ran).
	Why string
}

// Uniform reports that every query's scores are the same over the keys
// it sees: no position information enters the block's scores.
func (t *ScoreTest) Uniform() bool { return t.Why == "" && t.Change <= t.Tol }

// Relative reports that the scores change with the keys' positions and
// depend on key − query alone (and stay under a shift of every position).
func (t *ScoreTest) Relative() bool {
	return t.Why == "" && t.Change > t.Tol && t.Residual <= t.Tol && t.Shifted <= t.Tol
}

// Scores holds each unfused block's score test.
var Scores = &passes.Pass[map[*Block]*ScoreTest]{
	Name: "scores",
	Doc: `Measure what each block's scores receive from the positions.

The projected q and k of every unfused block are cut to one random vector
per head, the same at every position, and the scores (the Softmax's
input) are evaluated over 11 positions: a query's scores that differ over
the keys it sees (masked keys left out) show position information between
the projections and the Softmax; scores that, less the query's score of
its own position, depend on key − query alone (and stay the same when
every position moves by 5, where the positions are an input) show a
relative scheme. The evidence of nope and of the relative schemes.`,
	Requires: []passes.Analyzer{work.Normalize, Blocks, Sides},
	Run: func(c *passes.Context) (map[*Block]*ScoreTest, error) {
		w := work.Of(c)
		out := map[*Block]*ScoreTest{}
		for b, bs := range passes.Result(c, Sides) {
			if b.Softmax == nil {
				continue
			}
			t := scoreTest(w, b, bs)
			if t.Why != "" {
				c.Miss("scores", w.OrigName(b.Node()), t.Why, 0)
			}
			out[b] = t
		}
		return out, nil
	},
}

// scoreLen is the number of positions the score test probes: prime, so
// that the axis of positions is not taken for a head or feature axis.
const scoreLen = 11

func scoreTest(w *work.Work, b *Block, bs *BlockSides) *ScoreTest {
	if bs.Q == nil || bs.K == nil {
		return &ScoreTest{Why: "q or k of the block does not come from one projected value: " + bs.QWhy + bs.KWhy}
	}
	p := probe.NewProbe(w, 1, scoreLen, 0)
	p.Past = 0
	s, err := blockScores(w, p, b, bs, 1)
	if err != nil {
		// The model's shapes may not allow an empty cache.
		p = probe.NewProbe(w, 1, scoreLen, 0)
		s, err = blockScores(w, p, b, bs, 1)
	}
	if err != nil {
		return &ScoreTest{Why: "the scores could not be evaluated: " + err.Error()}
	}
	t := &ScoreTest{Len: s.q, Tol: scoreTol(w.ElemType(b.Softmax.Input(0)), s.max)}
	t.Change, t.Residual = s.change(), s.residual()
	if !t.Relative() || !readsPositionInput(w) {
		return t
	}
	// Move every position by 5: a relative scheme does not see it.
	const shift = 5
	p2 := probe.NewProbe(w, 1, scoreLen, shift)
	p2.Past = p.Past
	s2, err := blockScores(w, p2, b, bs, 1)
	if err != nil || !slices.Equal(s2.shape, s.shape) {
		return t
	}
	t.Shift, t.Shifted = shift, s.relDiff(s2)
	return t
}

// readsPositionInput reports whether the model takes positions as an
// input.
func readsPositionInput(w *work.Work) bool {
	return slices.ContainsFunc(w.Inputs(), func(v *graph.Value) bool { return w.Role(v) == work.RolePositions })
}

// scoreTol is the tolerance of scores of type dt whose largest magnitude
// is m: 64 rounding steps of the type, relative.
func scoreTol(dt graph.DataType, m float64) float64 {
	eps := 0x1p-23
	switch dt {
	case graph.Float16:
		eps = 0x1p-10
	case graph.BFloat16:
		eps = 0x1p-7
	case graph.Double:
		eps = 0x1p-52
	}
	return 64 * eps * (1 + m)
}

// scoreMatrices are a block's scores as matrices of q queries by k keys
// (the Softmax's axis holds the keys, the other axis that follows the
// number of tokens the queries), the new keys the last q.
type scoreMatrices struct {
	shape      []int
	v          []float64
	q, k       int
	qAx, kAx   int
	qStr, kStr int // the strides of the two axes
	max        float64
	// top is the largest score: a row of a query whose visible scores all
	// lie more than maskGap below it is masked whole (a query whose keys
	// are all masked, as the first query's are in a window of later keys).
	top float64
}

// blockScores evaluates b's scores with its q and k cut to fixed vectors.
func blockScores(w *work.Work, p *probe.Probe, b *Block, bs *BlockSides, seed uint64) (*scoreMatrices, error) {
	sm := b.Softmax
	// The tokens of q and k: the axis that follows the probe's length,
	// or (the model's shapes fixed) the one as long as the scores' axis
	// of keys (the Softmax's) or of queries (the one before it: [.., q,
	// k], or Transformer-XL's [q, k, batch, heads]).
	nq, nk := -1, -1
	if shape, ok := p.BindShape(w.Shape(sm.Input(0))); ok && len(shape) >= 2 {
		if kAx, err := softmaxAxis(w, sm, len(shape)); err == nil && kAx > 0 {
			nq, nk = shape[kAx-1], shape[kAx]
		}
	}
	cuts := map[*graph.Value]*kernels.Tensor{}
	for i, v := range []*graph.Value{bs.Q.In, bs.K.In} {
		if _, done := cuts[v]; done {
			continue
		}
		t, n, err := fixedContent(w, p, v, []int{nq, nk}[i], seed+uint64(i))
		if err != nil {
			return nil, err
		}
		if i == 0 {
			nq = n
		}
		cuts[v] = t
	}
	p.SetCuts(cuts)
	x, err := p.Value(sm.Input(0))
	if err != nil {
		return nil, err
	}
	kAx, err := softmaxAxis(w, sm, x.Rank())
	if err != nil {
		return nil, fmt.Errorf("the Softmax of the scores %v is not over one axis", x.Shape)
	}
	qAx := sizedAxis(x.Shape, kAx, nq)
	if qAx < 0 {
		return nil, fmt.Errorf("the scores %v have no axis of the %d queries", x.Shape, nq)
	}
	shape := x.Shape
	s := &scoreMatrices{shape: shape, v: x.Float64s(), q: shape[qAx], k: shape[kAx], qAx: qAx, kAx: kAx,
		qStr: stride(shape, qAx), kStr: stride(shape, kAx)}
	if s.q < 2 || s.k < s.q {
		return nil, fmt.Errorf("the scores are %v: fewer keys than queries, or one query", x.Shape)
	}
	s.top = math.Inf(-1)
	for _, f := range s.v {
		if !math.IsNaN(f) && !math.IsInf(f, 0) {
			s.top = max(s.top, f)
		}
	}
	s.each(func(_, _ int, row []float64) {
		for _, f := range row {
			if !math.IsNaN(f) {
				s.max = max(s.max, math.Abs(f))
			}
		}
	})
	return s, nil
}

// softmaxAxis is the axis of a rank-r input sm's Softmax normalises (an
// error before opset 13 unless it is the last: the op then flattens).
func softmaxAxis(w *work.Work, sm *graph.Node, r int) (int, error) {
	axis := sm.AttrInt("axis", -1)
	if w.Opset(sm) < 13 && sm.Attr("axis") == nil {
		axis = 1
	}
	kAx := work.NormAxis(axis, r)
	if r < 2 || kAx < 0 || kAx >= r || w.Opset(sm) < 13 && kAx != r-1 {
		return -1, fmt.Errorf("not over one axis")
	}
	return kAx, nil
}

// sizedAxis is the axis of shape, other than skip, of size n (the one
// next to skip when several are), or -1.
func sizedAxis(shape []int, skip, n int) int {
	out := -1
	for i, d := range shape {
		if i != skip && d == n {
			if out >= 0 && i != skip-1 {
				continue
			}
			out = i
		}
	}
	return out
}

func stride(shape []int, ax int) int {
	n := 1
	for _, d := range shape[ax+1:] {
		n *= d
	}
	return n
}

// fixedContent is a value of v's shape under p holding, on its axis of n
// tokens (n < 0: the axis that follows the probe's length), the same
// random vector at every token (a different one for every index of the
// other axes). It returns the value and its number of tokens.
func fixedContent(w *work.Work, p *probe.Probe, v *graph.Value, n int, seed uint64) (*kernels.Tensor, int, error) {
	shape, ok := p.BindShape(w.Shape(v))
	if !ok {
		return nil, 0, fmt.Errorf("the shape %s of %s is not known", w.ShapeString(w.Shape(v)), w.Name(v))
	}
	ax := tokenAxis(w, p, v, shape, len(shape)-1, n)
	if ax < 0 {
		return nil, 0, fmt.Errorf("%s %v has no single axis of tokens", w.Name(v), shape)
	}
	inner := stride(shape, ax)
	total := 1
	for _, d := range shape {
		total *= d
	}
	vals := make([]float64, total)
	for i := range vals {
		// The index with the axis of tokens left out.
		outer, rest := i/(inner*shape[ax]), i%inner
		vals[i] = unitRandom(seed, uint64(outer*inner+rest))
	}
	t := probe.FromFloat64Any(w.ElemType(v), shape, vals)
	if t == nil {
		return nil, 0, fmt.Errorf("%s of element type %v cannot be probed", w.Name(v), w.ElemType(v))
	}
	return t, shape[ax], nil
}

// tokenAxis is the axis of v, other than skip, whose size follows the
// probe's number of tokens (bound at two lengths), or when no axis does
// (the model's shapes are fixed) the one axis of size n; -1 when there is
// not exactly one.
func tokenAxis(w *work.Work, p *probe.Probe, v *graph.Value, shape []int, skip, n int) int {
	other := probe.NewProbe(w, p.Batch, p.Seq+2, p.Start)
	other.Past = p.Past
	more, ok := other.BindShape(w.Shape(v))
	if !ok || len(more) != len(shape) {
		return -1
	}
	follows, sized := -1, -1
	for i := range shape {
		if i == skip {
			continue
		}
		if more[i] != shape[i] {
			if follows != -1 {
				return -1
			}
			follows = i
		}
		if shape[i] == n {
			if sized != -1 {
				sized = -2
			} else {
				sized = i
			}
		}
	}
	if follows >= 0 {
		return follows
	}
	return max(sized, -1)
}

// unitRandom is a pseudo-random number in [-1, 1) from a seed and an index.
func unitRandom(seed, i uint64) float64 {
	x := seed*0x9e3779b97f4a7c15 + i*0xbf58476d1ce4e5b9 + 1
	x ^= x >> 31
	x *= 0x94d049bb133111eb
	x ^= x >> 29
	return float64(x>>11)/float64(1<<52) - 1
}

// maskGap is how far below a query's largest score a score is taken for
// masked (masks add -1e4, -1e9, the type's lowest or -inf).
const maskGap = 1e3

// each calls f for every matrix's query row i with its scores over the
// new keys (row[j] is key j's, NaN where masked; all NaN for a row masked
// whole).
func (s *scoreMatrices) each(f func(m, i int, row []float64)) {
	row := make([]float64, s.q)
	full := make([]float64, s.k)
	off := s.k - s.q
	m := 0
	for base := range s.matrices() {
		for i := 0; i < s.q; i++ {
			top := math.Inf(-1)
			for j := range full {
				full[j] = s.v[base+i*s.qStr+j*s.kStr]
				if j >= off && !math.IsNaN(full[j]) {
					top = max(top, full[j])
				}
			}
			for j := range row {
				x := full[off+j]
				if math.IsNaN(x) || math.IsInf(x, 0) || x < top-maskGap || top < s.top-maskGap {
					x = math.NaN()
				}
				row[j] = x
			}
			f(m, i, row)
		}
		m++
	}
}

// matrices yields the offset of every matrix: each index of the axes
// other than the queries' and the keys'.
func (s *scoreMatrices) matrices() func(yield func(int) bool) {
	return func(yield func(int) bool) {
		idx := make([]int, len(s.shape))
		for {
			off := 0
			for a, i := range idx {
				off += i * stride(s.shape, a)
			}
			if !yield(off) {
				return
			}
			a := len(idx) - 1
			for ; a >= 0; a-- {
				if a == s.qAx || a == s.kAx {
					continue
				}
				if idx[a]++; idx[a] < s.shape[a] {
					break
				}
				idx[a] = 0
			}
			if a < 0 {
				return
			}
		}
	}
}

// change is the largest spread of a query's visible scores.
func (s *scoreMatrices) change() float64 {
	out := 0.0
	s.each(func(_, _ int, row []float64) {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, x := range row {
			if !math.IsNaN(x) {
				lo, hi = min(lo, x), max(hi, x)
			}
		}
		if hi >= lo {
			out = max(out, hi-lo)
		}
	})
	return out
}

// relative is each query's visible scores less its score at its own
// position, by matrix, query and key (NaN where masked or where the
// query's own position is masked).
func (s *scoreMatrices) relative() [][][]float64 {
	var out [][][]float64
	s.each(func(m, i int, row []float64) {
		if i == 0 {
			out = append(out, nil)
		}
		r := make([]float64, len(row))
		for j, x := range row {
			r[j] = x - row[i]
		}
		out[m] = append(out[m], r)
	})
	return out
}

// residual is the largest spread, over the pairs of one distance
// key − query, of the relative scores.
func (s *scoreMatrices) residual() float64 {
	out := 0.0
	for _, mat := range s.relative() {
		lo, hi := map[int]float64{}, map[int]float64{}
		for i, r := range mat {
			for j, x := range r {
				if math.IsNaN(x) {
					continue
				}
				d := j - i
				if _, ok := lo[d]; !ok {
					lo[d], hi[d] = x, x
				}
				lo[d], hi[d] = min(lo[d], x), max(hi[d], x)
			}
		}
		for d := range lo {
			out = max(out, hi[d]-lo[d])
		}
	}
	return out
}

// relDiff is the largest difference of the relative scores of s and t
// (the same block at other positions).
func (s *scoreMatrices) relDiff(t *scoreMatrices) float64 {
	a, b := s.relative(), t.relative()
	out := 0.0
	for m := range min(len(a), len(b)) {
		for i := range a[m] {
			for j, x := range a[m][i] {
				if y := b[m][i][j]; !math.IsNaN(x) && !math.IsNaN(y) {
					out = max(out, math.Abs(x-y))
				} else if math.IsNaN(x) != math.IsNaN(y) {
					out = math.Inf(1)
				}
			}
		}
	}
	return out
}
