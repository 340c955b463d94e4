package t5

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/scorebias"
	"github.com/onnxpe/onnxpe/passes/work"
	"math"
	"slices"
)

// T5Pass finds T5's bucketed relative bias.
var Detect = &passes.Pass[[]*passes.Finding]{
	Name: "t5",
	Doc: `Find T5's bucketed relative bias added to the attention scores.

A bias of the scores (the score_bias pass) that depends only on key -
query but not linearly is a relative bias, T5's when it gathers a
[buckets, heads] table by a bucket index: evaluating the index over all
relative positions gives the bucket map, from which the number of
buckets, bidirectionality and max_distance are fitted. RelativePositionBias
(and GatedRelativePositionBias gating one) on a block's bias input is T5's
bias fused, its parameters read from the attributes and the table's shape.`,
	Requires: []passes.Analyzer{work.Normalize, attn.Blocks, scorebias.ScoreBias},
	Run: func(c *passes.Context) ([]*passes.Finding, error) {
		w := work.Of(c)
		fused := relPosBiases(w, c, passes.Result(c, attn.Blocks))
		return scorebias.ClaimBiases(c, func(b *scorebias.Bias) *passes.Finding {
			if b.Slopes != nil || !b.Toeplitz {
				return nil
			}
			sharers := func(v *graph.Value) []int {
				return passes.SortedUnique(append(slices.Clone(b.Readers[b.Term.Value]), scorebias.Sharers(c, v)...))
			}
			f, why := t5Finding(w, b.Block, b.Term, b.Cone, sharers)
			if f == nil && why == noTable {
				f, why = storedFinding(w, b, sharers)
			}
			if f == nil {
				c.Miss("t5", b.At, why, 3)
			}
			return f
		}, fused), nil
	},
}

// T5Evidence is what the T5 detector read.
type Evidence struct {
	// Bias is the original value added to the scores; Table the bias table
	// [num_buckets, heads]; Buckets the bucket value; Distance the matrix
	// of relative positions the buckets are computed from ("" when no
	// node of the cone is one position vector minus another).
	Bias, Table, Buckets, Distance string
	// Stored names the constant [.., heads, queries, keys] a stored bias
	// is read from ("" for a bias gathered from a bucket table); Groups
	// are its relative positions grouped by their values, index n +
	// MaxRel (-1 where every entry of n is masked).
	Stored string
	Groups []int
	// BucketMap is the bucket of every relative position key - query from
	// -MaxRel to MaxRel (index n + MaxRel); nil for a stored bias whose
	// num_buckets or max_distance the graph does not fix.
	BucketMap []int
	MaxRel    int
	// MaxDistances are all max_distance values reproducing the map.
	MaxDistances []int
	// Weights are the table's values, [num_buckets][heads].
	Weights [][]float64
	// LogRatio is the constant the bucket function divides the log of
	// large distances by (log(max_distance / max_exact), in the graph's
	// float type), and LogRatioFrom the value holding it; "" when no
	// constant of the cone is one.
	LogRatio     float64
	LogRatioFrom string
}

// noTable is t5Finding's reason when the bias gathers no bucket table.
const noTable = "the relative bias does not gather a [buckets, heads] table by an index"

// t5Finding reads a T5 bucket bias: the [buckets, heads] table gathered by
// a bucket index computed from positions.
func t5Finding(w *work.Work, b *attn.Block, bt attn.BiasTerm, cone []*graph.Node, sharers func(*graph.Value) []int) (*passes.Finding, string) {
	var gather *graph.Node
	for _, n := range cone {
		if n.OpType == "Gather" && w.IsConst(n.Input(0)) && len(n.Input(0).Const.Dims()) == 2 && !w.IsConst(n.Input(1)) && work.IsIntType(w.ElemType(n.Input(1))) {
			gather = n
		}
	}
	if gather == nil {
		return nil, noTable
	}
	table := gather.Input(0)
	nb, heads := int(table.Const.Dims()[0]), int(table.Const.Dims()[1])
	const S = 512
	p := probe.NewProbe(w, 1, S, 0)
	t, err := p.Value(gather.Input(1))
	if err != nil {
		return nil, "the bucket index could not be evaluated: " + err.Error()
	}
	bv, ok := scorebias.NewBiasView(t)
	if !ok || bv.Q != S || bv.K < S {
		return nil, fmt.Sprintf("the bucket index is not [query, key] (%v)", t.Shape)
	}
	// With a KV cache given as input the keys are the cached ones and then
	// the new: query i is at position off + i (a decoder's
	// Range(past, past + S) against Range(0, past + S)). The map is read
	// over the new keys, at the same distances as without a cache.
	off := bv.K - S
	bm := make([]int, 2*S-1) // n + S-1
	for i := range bm {
		bm[i] = -1
	}
	for i := 0; i < S; i++ {
		for j := 0; j < S; j++ {
			x := int(bv.At(0, i, off+j))
			k := j - i + S - 1
			if bm[k] >= 0 && bm[k] != x {
				return nil, "the bucket index is not a function of key - query"
			}
			bm[k] = x
		}
	}
	bidir := bm[S] >= nb/2 // n = +1
	half := nb
	if bidir {
		half = nb / 2
	}
	maxExact := half / 2
	var mds []int
	for md := maxExact + 1; md <= 1<<14; md++ {
		if t5Reproduces(bm, S, nb, bidir, md) {
			mds = append(mds, md)
		}
	}
	if len(mds) == 0 {
		// A table with a row per relative position (onnxpe rewrite's
		// form, or any export that precomputed the bias): the buckets are
		// the groups of relative positions that read equal rows.
		if tb, tnb, tbidir, tmds, ok := t5FromRows(w, table, bm, S); ok {
			bm, nb, bidir, mds = tb, tnb, tbidir, tmds
		}
	}
	if len(mds) == 0 {
		return nil, "the bucket map is not T5's (no max_distance reproduces it)"
	}
	params := &Params{NumBuckets: passes.Ptr(nb), Bidirectional: passes.Ptr(bidir), NumHeads: heads, ScaledScores: b.Scaled}
	var notes []string
	switch {
	case len(mds) == 1:
		params.MaxDistance = passes.Ptr(mds[0])
	case mds[len(mds)-1] == 1<<14:
		notes = append(notes, fmt.Sprintf("max_distance: every value from %d on reproduces the buckets of distances below %d", mds[0], S))
	default:
		md := mds[0]
		for _, x := range mds {
			if x&(x-1) == 0 {
				md = x // a power of two, as configurations use
				break
			}
		}
		params.MaxDistance = passes.Ptr(md)
		notes = append(notes, fmt.Sprintf("max_distance: %d to %d give the same buckets for distances below %d; reported %d", mds[0], mds[len(mds)-1], S, md))
	}
	users := sharers(table)
	params.SharedAcrossLayers = len(users) > 1
	ev := &Evidence{Bias: w.OrigValue(bt.Value), Table: w.Name(table), Buckets: w.Name(gather.Input(1)), BucketMap: bm, MaxRel: S - 1, MaxDistances: mds, Weights: probe.TableValues(w, table)}
	if d := attn.DistanceIn(w, cone); d != nil {
		ev.Distance = w.Name(d)
	}
	if params.MaxDistance != nil {
		ev.LogRatio, ev.LogRatioFrom = probe.LogRatio(w, cone, math.Log(float64(*params.MaxDistance)/float64(maxExact)))
	}
	f := &passes.Finding{Scheme: Name, Layers: users, Params: params, Notes: notes, Evidence: ev}
	if !slices.Contains(f.Layers, b.Index) {
		f.Layers = append(f.Layers, b.Index)
	}
	f.Nodes = w.OrigNames(append([]*graph.Node{bt.Add}, cone...))
	return f, ""
}

// t5FromRows reads T5's buckets from a table gathered at a row per
// relative position: relative positions whose rows are equal share a
// bucket. It returns the bucket map in T5's numbering, the number of
// buckets, the direction and the max_distance values whose buckets group
// the relative positions the same way.
func t5FromRows(w *work.Work, table *graph.Value, rowOf []int, S int) ([]int, int, bool, []int, bool) {
	t := w.Const(table)
	if t == nil || t.Rank() != 2 {
		return nil, 0, false, nil, false
	}
	width := t.Shape[1]
	vals := t.Float64s()
	group := make([]int, len(rowOf))
	ids := map[string]int{}
	for k, row := range rowOf {
		if row < 0 || (row+1)*width > len(vals) {
			return nil, 0, false, nil, false
		}
		key := fmt.Sprint(vals[row*width : (row+1)*width])
		id, ok := ids[key]
		if !ok {
			id = len(ids)
			ids[key] = id
		}
		group[k] = id
	}
	ng := len(ids)
	if ng < 2 || ng >= len(rowOf) {
		return nil, 0, false, nil, false
	}
	// The same partition: a bijection between groups and buckets.
	same := func(tb []int) bool {
		gb, bg := map[int]int{}, map[int]int{}
		for k, g := range group {
			b := tb[k]
			if x, ok := gb[g]; ok && x != b {
				return false
			}
			if x, ok := bg[b]; ok && x != g {
				return false
			}
			gb[g], bg[b] = b, g
		}
		return true
	}
	// Bidirectional maps never reach the first bucket of the positive
	// side (relative position +0): there is one bucket more than groups.
	for _, c := range []struct {
		bidir bool
		nb    int
	}{{true, ng + 1}, {true, ng}, {false, ng}} {
		if c.bidir && c.nb%2 != 0 {
			continue
		}
		half := c.nb
		if c.bidir {
			half = c.nb / 2
		}
		var mds []int
		var first []int
		for md := half/2 + 1; md <= 1<<14; md++ {
			tb := t5Map(S, c.nb, c.bidir, md)
			if same(tb) {
				if first == nil {
					first = tb
				}
				mds = append(mds, md)
			}
		}
		if len(mds) > 0 {
			return first, c.nb, c.bidir, mds, true
		}
	}
	return nil, 0, false, nil, false
}

// t5Map is Hugging Face's _relative_position_bucket of every relative
// position -(S-1)..S-1 (index n + S-1), in float32 as PyTorch computes it.
func t5Map(S, nb int, bidir bool, md int) []int {
	out := make([]int, 2*S-1)
	for k := range out {
		out[k] = t5BucketOf(k-(S-1), nb, md, bidir)
	}
	return out
}

// t5Reproduces evaluates Hugging Face's _relative_position_bucket (in
// float32, as PyTorch does) for every relative position of the map.
func t5Reproduces(bm []int, S, nb int, bidir bool, md int) bool {
	for k, want := range bm {
		if t5BucketOf(k-(S-1), nb, md, bidir) != want {
			return false
		}
	}
	return true
}
