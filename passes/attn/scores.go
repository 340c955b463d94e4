package attn

import (
	"fmt"
	"math"
	"slices"
	"strings"

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
		sc := newScorer(w)
		for b, bs := range passes.Result(c, Sides) {
			if b.Softmax == nil {
				continue
			}
			t := sc.test(b, bs)
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

// scorer holds the probes of the score tests: one for all blocks, so
// that what the blocks share (cos/sin, masks, positions) is evaluated
// once and only what depends on a block's cuts again.
type scorer struct {
	w *work.Work
	// empty binds an empty KV cache, past the model's default one (for
	// shapes that do not allow an empty cache); shifted moves every
	// position by shift (made when a block is relative).
	empty, past, shifted *probe.Probe
	positions            bool // the model takes positions as an input
	// moved holds the shift test of the first block reading each set of
	// position-side values: blocks reading the same (the layers sharing
	// one cos/sin, one bias) move alike.
	moved map[string]float64
	// done holds the test of each computation of scores from the cut q
	// and k (scoreKey): the layers of a stack compute the same.
	done map[string]*ScoreTest
}

const shift = 5

func newScorer(w *work.Work) *scorer {
	sc := &scorer{w: w, empty: probe.NewProbe(w, 1, scoreLen, 0), past: probe.NewProbe(w, 1, scoreLen, 0), positions: readsPositionInput(w),
		moved: map[string]float64{}, done: map[string]*ScoreTest{}}
	sc.empty.Past = 0
	return sc
}

func (sc *scorer) test(b *Block, bs *BlockSides) *ScoreTest {
	if bs.Q == nil || bs.K == nil {
		return &ScoreTest{Why: "q or k of the block does not come from one projected value: " + bs.QWhy + bs.KWhy}
	}
	key := scoreKey(sc.w, b, bs)
	if t, ok := sc.done[key]; ok {
		c := *t
		return &c
	}
	t := sc.run(b, bs)
	sc.done[key] = t
	return t
}

func (sc *scorer) run(b *Block, bs *BlockSides) *ScoreTest {
	w := sc.w
	p := sc.empty
	s, err := blockScores(w, p, b, bs, 1)
	if err != nil {
		// The model's shapes may not allow an empty cache.
		p = sc.past
		s, err = blockScores(w, p, b, bs, 1)
	}
	if err != nil {
		return &ScoreTest{Why: "the scores could not be evaluated: " + err.Error()}
	}
	if p.Synthetic(b.Softmax.Input(0)) {
		return &ScoreTest{Why: "the scores depend on values the file does not hold (parameters given as graph inputs, or weights in an absent side file)"}
	}
	t := &ScoreTest{Len: s.q, Tol: scoreTol(w.ElemType(b.Softmax.Input(0)), s.max)}
	t.Change, t.Residual = s.change(), s.residual()
	if !t.Relative() || !sc.positions {
		return t
	}
	// Move every position by shift: a relative scheme does not see it.
	key := positionSide(b, bs)
	if d, ok := sc.moved[key]; ok {
		t.Shift, t.Shifted = shift, d
		return t
	}
	if sc.shifted == nil || sc.shifted.Past != p.Past {
		sc.shifted = probe.NewProbe(w, 1, scoreLen, shift)
		sc.shifted.Past = p.Past
	}
	s2, err := blockScores(w, sc.shifted, b, bs, 1)
	if err != nil || !slices.Equal(s2.shape, s.shape) {
		return t
	}
	t.Shift, t.Shifted = shift, s.relDiff(s2)
	sc.moved[key] = t.Shifted
	return t
}

// scoreKey says what a block's scores compute from the cut q and k: the
// ops from the graph's inputs and constants to the Softmax (types,
// attributes, how they connect; small constants by value, large ones and
// the inputs by identity), with q and k as leaves and their shapes. Two
// blocks of one key give the same scores for the same cuts: the layers of
// a stack, each reading the shared cos/sin through its own Unsqueeze.
func scoreKey(w *work.Work, b *Block, bs *BlockSides) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %s|%s %s|", w.ShapeString(w.Shape(bs.Q.In)), w.ElemType(bs.Q.In), w.ShapeString(w.Shape(bs.K.In)), w.ElemType(bs.K.In))
	id := map[*graph.Node]int{}
	var write func(v *graph.Value, depth int)
	write = func(v *graph.Value, depth int) {
		switch {
		case v == nil:
			sb.WriteString("_ ")
		case v == bs.Q.In:
			sb.WriteString("Q ")
		case v == bs.K.In:
			sb.WriteString("K ")
		case w.IsConst(v):
			if t := w.Const(v); t != nil && t.Len() <= 64 {
				fmt.Fprintf(&sb, "c%v%v ", t.Shape, t.Float64s())
			} else {
				fmt.Fprintf(&sb, "c%p ", w.Const(v))
			}
		case v.Producer() == nil || depth > 64:
			fmt.Fprintf(&sb, "%p ", v)
		default:
			n := v.Producer()
			if i, ok := id[n]; ok {
				fmt.Fprintf(&sb, "#%d.%d ", i, slices.Index(n.Outputs(), v))
				return
			}
			id[n] = len(id)
			fmt.Fprintf(&sb, "(%s.%s", n.Domain, n.OpType)
			for _, a := range n.Attrs {
				fmt.Fprintf(&sb, " %s=%v", a.Name(), attrKey(a))
			}
			sb.WriteString(" <- ")
			for _, in := range n.Inputs() {
				write(in, depth+1)
			}
			fmt.Fprintf(&sb, ").%d ", slices.Index(n.Outputs(), v))
		}
	}
	write(b.Softmax.Input(0), 0)
	for _, a := range b.Softmax.Attrs {
		fmt.Fprintf(&sb, " %s=%v", a.Name(), attrKey(a))
	}
	return sb.String()
}

// attrKey is what an attribute holds, for scoreKey (the graph or tensor
// it holds by identity).
func attrKey(a *graph.Attr) any {
	switch {
	case a.Graph != nil:
		return fmt.Sprintf("%p", a.Graph)
	case a.Tensor != nil:
		return fmt.Sprintf("%p", a.Tensor)
	case a.Tensors != nil || a.Graphs != nil:
		return fmt.Sprintf("%p %p", a.Tensors, a.Graphs)
	}
	return a.Value()
}

// positionSide names the position-side values a block's scores read: the
// values entering its q and k regions, its bias and its score terms.
func positionSide(b *Block, bs *BlockSides) string {
	var sb strings.Builder
	for _, s := range []*Side{bs.Q, bs.K} {
		for _, v := range s.Pos {
			fmt.Fprintf(&sb, "%p ", v)
		}
		sb.WriteString("|")
	}
	for _, t := range b.Bias {
		fmt.Fprintf(&sb, "%p ", t.Value)
	}
	for _, n := range b.Terms {
		for _, v := range n.Inputs() {
			fmt.Fprintf(&sb, "%p ", v)
		}
	}
	return sb.String()
}

// readsPositionInput reports whether the model takes positions as an
// input.
func readsPositionInput(w *work.Work) bool {
	return slices.ContainsFunc(w.Inputs(), func(v *graph.Value) bool { return w.Role(v) == work.RolePositions })
}

// scoreTol is the tolerance of scores of type dt whose largest magnitude
// is m: 16 rounding steps of the type, relative.
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
	return 16 * eps * (1 + m)
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
}

// blockScores evaluates b's scores with its q and k cut to fixed vectors.
func blockScores(w *work.Work, p *probe.Probe, b *Block, bs *BlockSides, seed uint64) (*scoreMatrices, error) {
	sm := b.Softmax
	cuts := map[*graph.Value]*kernels.Tensor{}
	for i, v := range []*graph.Value{bs.Q.In, bs.K.In} {
		if _, done := cuts[v]; done {
			continue
		}
		t, err := FixedContent(w, p, v, seed+uint64(i))
		if err != nil {
			return nil, err
		}
		cuts[v] = t
	}
	p.SetCuts(cuts)
	x, err := p.Value(sm.Input(0))
	if err != nil {
		return nil, err
	}
	// The keys are on the Softmax's axis, the queries on the one before
	// (as every exporter lays scores out: [..., q, k], [q, k, batch, heads]).
	r := x.Rank()
	axis := sm.AttrInt("axis", -1)
	if w.Opset(sm) < 13 && sm.Attr("axis") == nil {
		axis = 1
	}
	kAx := work.NormAxis(axis, r)
	if r < 2 || kAx < 1 || kAx >= r || w.Opset(sm) < 13 && kAx != r-1 {
		return nil, fmt.Errorf("the Softmax of the scores %v is not over one axis after the queries'", x.Shape)
	}
	qAx, shape := kAx-1, x.Shape
	s := &scoreMatrices{shape: shape, v: x.Float64s(), q: shape[qAx], k: shape[kAx], qAx: qAx, kAx: kAx,
		qStr: stride(shape, qAx), kStr: stride(shape, kAx)}
	if s.q < 2 || s.k < s.q {
		return nil, fmt.Errorf("the scores are %v: fewer keys than queries, or one query", x.Shape)
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

func stride(shape []int, ax int) int {
	n := 1
	for _, d := range shape[ax+1:] {
		n *= d
	}
	return n
}

// FixedContent is a value of v's shape under p holding one random vector
// on its last axis (the features, of every head when they are packed)
// repeated over all other axes: the same content at every position.
func FixedContent(w *work.Work, p *probe.Probe, v *graph.Value, seed uint64) (*kernels.Tensor, error) {
	shape, ok := p.BindShape(w.Shape(v))
	if !ok || len(shape) == 0 {
		return nil, fmt.Errorf("the shape %s of %s is not known", w.ShapeString(w.Shape(v)), w.Name(v))
	}
	d := shape[len(shape)-1]
	total := 1
	for _, x := range shape {
		total *= x
	}
	vals := make([]float64, total)
	for i := range vals {
		vals[i] = unitRandom(seed, uint64(i%d))
	}
	t := probe.FromFloat64Any(w.ElemType(v), shape, vals)
	if t == nil {
		return nil, fmt.Errorf("%s of element type %v cannot be probed", w.Name(v), w.ElemType(v))
	}
	return t, nil
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

// maskFloor: a query whose largest score is below -maskFloor sees no key
// (every score a mask value).
const maskFloor = 1e4

// each calls f for every matrix's query row i with its scores over the
// new keys (row[j] is key j's, NaN where masked).
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
				// Masked: far below the query's largest score, or a row
				// whose every key is masked (its largest is a mask value).
				if math.IsNaN(x) || math.IsInf(x, 0) || x < top-maskGap || top < -maskFloor {
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
