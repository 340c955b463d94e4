package t5

import (
	"errors"
	"fmt"
	"github.com/onnxpe/onnxpe/passes/attn"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/work"
)

// RewriteT5 replaces T5's bucketed relative bias by a table read at the
// relative positions.
var Rewrite = &passes.Pass[*rewrite.Change]{
	Name: "rewrite_t5",
	Doc: `Replace the T5 bucket computation by a table gathered at key - query.

Default: the bias of every relative position -(N-1)..N-1 (N is
--max-positions, else 4096) is what the model's own bucket function and
[buckets, heads] table give (evaluated with the kernels with the
relative positions replaced): a constant table of 2N-1 rows of heads,
gathered at key - query + N-1 into the [q, k, heads] the model's own
Gather gave, where the model computed buckets with logarithms. (Rows of
heads rather than [heads, 2N-1]: ONNX Runtime gathers whole rows much
faster than single elements along a second axis; with [heads, 2N-1] the
rewritten T5 models were slower than the originals.)
When the buckets no longer change from some distance below N on (they
stop at max_distance), the relative positions are clipped to ±(N-1), so
that any length reads the right bias. ONNX Runtime's CPU provider runs
it. A decoder with a KV cache is rewritten the same way: its key - query
is [S, past + S] (queries after the cache). --t5-op com.microsoft emits
com.microsoft RelativePositionBias instead (ONNX Runtime has it on CUDA
only; after a cache it covers past + S queries, the last S kept).`,
	Requires: []passes.Analyzer{work.Normalize, attn.Blocks, attn.Sides, Detect, rewrite.Edit},
	Run:      runRewriteT5,
}

func runRewriteT5(c *passes.Context) (*rewrite.Change, error) {
	r := rewrite.Of(c)
	return r.Findings(c, rewrite.Findings{Pass: "rewrite_t5", Scheme: Name, Detect: Detect,
		Do: func(w *work.Work, f *passes.Finding, ch *rewrite.Change) error {
			err := t5(r, w, f)
			if err != nil && !errors.Is(err, rewrite.ErrUnchanged) {
				return err
			}
			// --attention fused: each block, its bias (the table's, with
			// the masks the model adds to it) the op's mask.
			// A block's bias reads a table of the finding (UMT5: a table
			// per layer).
			table := func(n *graph.Node) bool {
				return n.OpType == "Gather" && w.IsConst(n.Input(0)) && slices.Contains(f.Nodes, w.OrigName(n))
			}
			bias := map[int]*graph.Value{}
			for _, b := range passes.Result(c, attn.Blocks) {
				if !slices.Contains(f.Layers, b.Index) {
					continue
				}
				for _, bt := range b.Bias {
					if bt.Add != nil && bt.Add.OpType != "Where" && slices.ContainsFunc(w.Cone(bt.Value), table) {
						bias[b.Index] = bt.Value
					}
				}
			}
			fused, ferr := r.FuseBiased(w, ch, passes.Result(c, attn.Blocks), passes.Result(c, attn.Sides), f.Layers, bias, "the T5 bias")
			if ferr != nil {
				return ferr
			}
			if err != nil && len(fused) > 0 {
				return nil
			}
			return err
		}})
}

// tableGather is the Gather reading the bias table at the buckets (nil
// when there is none).
func tableGather(w *work.Work, ev *Evidence) *graph.Node {
	buckets := rewrite.WorkValue(w, ev.Buckets)
	if buckets == nil {
		return nil
	}
	var gather *graph.Node
	for _, u := range buckets.Uses() {
		if u.Node.OpType == "Gather" && u.Index == 1 && w.IsConst(u.Node.Input(0)) {
			gather = u.Node
		}
	}
	return gather
}

func t5(r *rewrite.Rewrite, w *work.Work, f *passes.Finding) error {
	ev, ok := f.Evidence.(*Evidence)
	p, ok2 := f.Params.(*Params)
	if !ok || !ok2 {
		return fmt.Errorf("%w: the finding has no T5 evidence", rewrite.ErrRewrite)
	}
	if ev.Stored != "" {
		return rewrite.Unchanged("the bias is stored already (%s)", ev.Stored)
	}
	buckets := rewrite.WorkValue(w, ev.Buckets)
	if buckets == nil || buckets.NumUses() == 0 {
		return fmt.Errorf("%w: the bucket index %q is not a value of the model", rewrite.ErrRewrite, ev.Buckets)
	}
	gather := tableGather(w, ev)
	if gather == nil {
		return fmt.Errorf("%w: no Gather reads the bias table at the buckets", rewrite.ErrRewrite)
	}
	// The relative positions key - query the buckets are computed from:
	// [queries, keys], the queries the last S of the keys (a decoder with
	// a KV cache of length past: query i at past + i, key j at j, so the
	// value holds j - i - past over [S, past + S]; without a cache j - i
	// over [S, S]).
	var rel *graph.Value
	pr := probe.NewProbe(w, 1, 6, 0)
	cached := false // the probe's queries sit after a cache
	for _, n := range w.Cone(buckets) {
		for _, o := range n.Outputs() {
			if rel != nil || !w.ElemType(o).IsInt() || w.OrigValue(o) == "" {
				continue
			}
			t, err := pr.Value(o)
			if err != nil || t.Rank() != 2 || t.Shape[0] != pr.Seq || t.Shape[1] < pr.Seq {
				continue
			}
			q, k := t.Shape[0], t.Shape[1]
			x := t.Float64s()
			okRel := true
			for i := 0; i < q && okRel; i++ {
				for j := 0; j < k; j++ {
					if x[i*k+j] != float64(j-i-(k-q)) {
						okRel = false
						break
					}
				}
			}
			if okRel {
				rel, cached = o, k > q
			}
		}
	}
	if rel == nil {
		return fmt.Errorf("%w: no value holds key - query for the buckets (queries at the last %d of the keys, past %d)", rewrite.ErrRewrite, pr.Seq, pr.Past)
	}
	dt := w.ElemType(gather.Output(0))
	gout, err := r.Lookup(rewrite.MainName(w, gather.Output(0)))
	if err != nil {
		return err
	}
	relV, err := r.Lookup(rewrite.MainName(w, rel))
	if err != nil {
		return err
	}
	if r.Opts.T5Op == passes.T5Microsoft {
		return t5Fused(r, w, p, ev, gather, relV, dt, cached)
	}
	n := r.Opts.MaxPositions
	if n <= 0 {
		n = passes.DefaultMaxPositions
	}
	// The bias of every relative position, as the model computes it.
	row := make([]int64, 2*n-1)
	for i := range row {
		row[i] = int64(i - (n - 1))
	}
	pr = probe.NewProbe(w, 1, 2*n-1, 0)
	pr.Budget = 1 << 20
	relT := kernels.FromSlice([]int{1, 2*n - 1}, row)
	if dt := w.ElemType(rel); dt != graph.Int64 {
		relT = work.CastInts(relT, dt)
	}
	pr.SetCuts(map[*graph.Value]*kernels.Tensor{rel: relT})
	t, err := pr.Value(gather.Output(0))
	if err != nil {
		return fmt.Errorf("%w: evaluating the bias at relative positions ±%d: %v", rewrite.ErrRewrite, n-1, err)
	}
	h := p.NumHeads
	if t.Len() != (2*n-1)*h {
		return fmt.Errorf("%w: the bias at %d relative positions has shape %v", rewrite.ErrRewrite, 2*n-1, t.Shape)
	}
	src := t.Float64s() // [1, 2n-1, h]
	// [2N-1, heads]: row n+N-1 is the bias of relative position n for
	// every head, which one Gather reads at key - query + N-1 into the
	// [q, k, heads] the model's own Gather gave (whole rows: the layout
	// that gathers fastest; the model's Transpose to [heads, q, k] stays).
	table, err := r.Table("onnxpe_t5_bias_table", dt, []int64{int64(2*n - 1), int64(h)}, src)
	if err != nil {
		return err
	}
	// Clip where the buckets stop changing within the table.
	idx := r.CastInt64(relV, w.ElemType(rel))
	if sat := t5Saturation(ev); sat > 0 && sat < n && r.Opset() >= 12 {
		idx = r.Op1("Clip", []*graph.Value{idx, r.ScalarInt(int64(-(n - 1))), r.ScalarInt(int64(n - 1))})
	}
	idx = r.Op1("Add", []*graph.Value{idx, r.ScalarInt(int64(n - 1))})
	y := rewrite.Typed(r.Op1("Gather", []*graph.Value{table, idx}, graph.IntAttr("axis", 0)), dt, 3)
	gout.ReplaceKeepingName(y)
	return nil
}

// t5Saturation is the distance from which the bucket map no longer
// changes, in both directions (0 when it changes up to the map's end).
func t5Saturation(ev *Evidence) int {
	bm, m := ev.BucketMap, ev.MaxRel
	if len(bm) != 2*m+1 {
		return 0
	}
	sat := 0
	for d := m; d > 0; d-- {
		if bm[m+d] != bm[2*m] || bm[m-d] != bm[0] {
			sat = d + 1
			break
		}
	}
	if sat >= m-8 {
		return 0
	}
	return sat
}

// t5Fused replaces the bias by com.microsoft RelativePositionBias.
//
// RelativePositionBias numbers the queries from 0; when they sit after a
// KV cache (cached: rel is [S, past + S]), the op gives the bias of all
// past + S positions as queries and the last S rows are kept.
func t5Fused(r *rewrite.Rewrite, w *work.Work, p *Params, ev *Evidence, gather *graph.Node, rel *graph.Value, dt graph.DataType, cached bool) error {
	if p.MaxDistance == nil || p.Bidirectional == nil {
		return fmt.Errorf("%w: max_distance or the direction is not known exactly; RelativePositionBias needs them", rewrite.ErrRewrite)
	}
	// The [1, heads, q, k] value the model makes of the gathered rows.
	v := gather.Output(0)
	for steps := 0; steps < 4; steps++ {
		s := w.Shape(v)
		if s.Rank() == 4 && s.Dims[0] == 1 && s.Dims[1] == work.Dim(p.NumHeads) {
			break
		}
		var next *graph.Value
		for _, u := range v.Uses() {
			if (u.Node.OpType == "Transpose" || u.Node.OpType == "Unsqueeze" || u.Node.OpType == "Reshape") && u.Index == 0 {
				next = u.Node.Output(0)
			}
		}
		if next == nil {
			return fmt.Errorf("%w: the gathered bias is not laid out as [1, heads, q, k]", rewrite.ErrRewrite)
		}
		v = next
	}
	s := w.Shape(v)
	if s.Rank() != 4 || s.Dims[0] != 1 {
		return fmt.Errorf("%w: the gathered bias is not laid out as [1, heads, q, k]", rewrite.ErrRewrite)
	}
	out, err := r.Lookup(rewrite.MainName(w, v))
	if err != nil {
		return err
	}
	table, err := r.Lookup(ev.Table)
	if err != nil {
		return err
	}
	// The lengths are those of the relative positions [q, k].
	q := r.Op1("Reshape", []*graph.Value{r.DimOf(rel, 0), r.Ints([]int64{0})})
	k := r.Op1("Reshape", []*graph.Value{r.DimOf(rel, 1), r.Ints([]int64{0})})
	bi := int64(0)
	if *p.Bidirectional {
		bi = 1
	}
	qs := q
	if cached {
		if r.Opset() < 10 {
			return fmt.Errorf("%w: the queries sit after a KV cache and the last rows of RelativePositionBias are kept by a Slice with inputs, which opset %d lacks (10 has it)", rewrite.ErrRewrite, r.Opset())
		}
		qs = k
	}
	y := rewrite.Typed(r.Op("RelativePositionBias", rewrite.DomainMicrosoft, []*graph.Value{table, qs, k}, 1,
		graph.IntAttr("max_distance", int64(*p.MaxDistance)), graph.IntAttr("is_bidirectional", bi))[0], dt, 4)
	if cached {
		last := r.Op1("Neg", []*graph.Value{q})
		y = rewrite.Typed(r.Op1("Slice", []*graph.Value{y, last, r.VecInt(math.MaxInt64), r.VecInt(2)}), dt, 4)
	}
	out.ReplaceKeepingName(y)
	return nil
}
