package rewrite

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

// A KV cache added to a model exported without one (--add-kv-cache):
// each fused block's op takes past_key_values.L.key/value [batch,
// kv_heads, past_sequence_length, head] and returns present.L.key/value
// [batch, kv_heads, total_sequence_length, head]; the op's causal mask
// counts the past. What the model computed for the prompt alone must then
// be read over past and new tokens:
//   - the padding mask: the model's terms are replaced by one read from
//     its attention_mask input over all tokens (as ONNX Runtime GenAI's
//     models take it, [batch, past + seq]), after checking on numbers
//     that the terms hide exactly the keys that input marks 0;
//   - the positions: the op's own (do_rotary counts from the cache's
//     length), given as an input, or counted from 0 in every call, which
//     become the cache's length onwards (cachePositions); positions the
//     graph computes otherwise (from a constant, from the mask) are
//     refused.
// Anything else that counts the prompt's tokens (a learned position
// table, the mask read elsewhere) makes the model unfit for a cache:
// FinishKVCache says so after the passes, and verify's prompt-then-decode
// check catches what the graph alone does not tell.

// KVCache is what --add-kv-cache added.
type KVCache struct {
	// Layers are the blocks given a cache; Masks the attention-mask
	// inputs now read over past and new tokens.
	Layers []int
	Masks  []*graph.Value
	// Had are the fused blocks that had a cache already.
	Had []int
}

// lowestOf is the mask fill of type dt: its most negative finite value.
func lowestOf(dt graph.DataType) float64 {
	switch dt {
	case graph.Float16:
		return -65504
	case graph.Double:
		return -math.MaxFloat64
	}
	return -math.MaxFloat32 // float32; bfloat16 rounds it to its own lowest
}

// addCache makes the cache inputs of block a (layer a.Block.Index).
func (r *Rewrite) addCache(a *Attention) (pk, pv *graph.Value, err error) {
	g := r.M.Graph
	batch := graph.Dim{Param: "batch"}
	for _, in := range g.Inputs {
		if dims, ok := in.Type.Shape(); ok && in.Const == nil && len(dims) > 0 && dims[0].Param != "" {
			batch = graph.Dim{Param: dims[0].Param}
			break
		}
	}
	dims := []graph.Dim{batch, {Value: int64(a.KVHeads), Known: true}, {Param: "past_sequence_length"}, {Value: int64(a.HeadDim), Known: true}}
	var ins []*graph.Value
	for _, kind := range []string{"key", "value"} {
		for _, name := range []string{fmt.Sprintf("past_key_values.%d.%s", a.Block.Index, kind), fmt.Sprintf("present.%d.%s", a.Block.Index, kind)} {
			if g.Lookup(name) != nil {
				return nil, nil, refuse("a KV cache cannot be added: the model already has a value named %q", name)
			}
		}
		ins = append(ins, g.AddInput(fmt.Sprintf("past_key_values.%d.%s", a.Block.Index, kind), graph.TensorType(a.Type, slices.Clone(dims))))
	}
	return ins[0], ins[1], nil
}

// addPresents makes the op's present caches outputs of the model.
func (r *Rewrite) addPresents(a *Attention, outs []*graph.Value) error {
	g := r.M.Graph
	for i, kind := range []string{"key", "value"} {
		p := outs[1+i]
		if err := g.RenameValue(p, fmt.Sprintf("present.%d.%s", a.Block.Index, kind)); err != nil {
			return err
		}
		dims := []graph.Dim{{Param: "batch"}, {Value: int64(a.KVHeads), Known: true}, {Param: "total_sequence_length"}, {Value: int64(a.HeadDim), Known: true}}
		if in := g.Lookup(fmt.Sprintf("past_key_values.%d.%s", a.Block.Index, kind)); in != nil {
			if d, ok := in.Type.Shape(); ok {
				dims[0] = d[0]
			}
		}
		p.Type = graph.TensorType(a.Type, dims)
		g.AddOutput(p)
	}
	if r.KV == nil {
		r.KV = &KVCache{}
	}
	r.KV.Layers = append(r.KV.Layers, a.Block.Index)
	return nil
}

// cachePadding is the op's mask over past and new tokens when a cache is
// added: nil when the block has no mask that depends on the inputs, else
// Where(attention_mask, 0, lowest) as [batch, 1, 1, past + seq], read
// from the one mask input the block's terms depend on, after checking on
// numbers that those terms hide, for every query, exactly the keys up to
// its own that the input marks 0 (the op hides those after it).
func (r *Rewrite) cachePadding(w *work.Work, a *Attention) (*graph.Value, error) {
	var terms []*graph.Value
	terms = append(terms, a.Masks...)
	for _, wm := range a.wheres {
		terms = append(terms, wm.cond)
	}
	if len(terms) == 0 {
		return nil, nil
	}
	if len(a.bias) > 0 {
		return nil, refuse("a KV cache is added to RoPE blocks only: the scheme's bias is computed for the prompt's positions")
	}
	var mask *graph.Value
	for _, in := range w.Inputs() {
		if w.Role(in) != work.RoleMask || w.Shape(in).Rank() != 2 {
			continue
		}
		for _, t := range terms {
			if slices.ContainsFunc(work.ProducersUpTo(t, 4096), func(n *graph.Node) bool { return slices.Contains(n.Inputs(), in) }) {
				if mask != nil && mask != in {
					return nil, refuse("a KV cache cannot be added: the masks read two mask inputs (%s, %s)", w.Name(mask), w.Name(in))
				}
				mask = in
			}
		}
	}
	if mask == nil {
		return nil, refuse("a KV cache cannot be added: the block's masks depend on the inputs but on no attention mask")
	}
	if err := a.checkPadding(w, mask); err != nil {
		return nil, refuse("a KV cache cannot be added: %v", err)
	}
	key := fmt.Sprintf("kvpad|%s|%v", mask.Name, a.Type)
	if v, ok := r.Memo[key]; ok {
		return v, nil
	}
	m, err := r.Lookup(MainName(w, mask))
	if err != nil {
		return nil, err
	}
	if w.ElemType(mask) != graph.Bool {
		m = Typed(r.Op1("Cast", []*graph.Value{m}, graph.IntAttr("to", int64(graph.Bool))), graph.Bool, 2)
	}
	fill, err := r.Table("onnxpe_mask_fill", a.Type, nil, []float64{lowestOf(a.Type)})
	if err != nil {
		return nil, err
	}
	zero, err := r.Table("onnxpe_zero", a.Type, nil, []float64{0})
	if err != nil {
		return nil, err
	}
	v := Typed(r.Unsqueeze(Typed(r.Op1("Where", []*graph.Value{m, zero, fill}), a.Type, 2), 1, 2), a.Type, 4)
	r.Memo[key] = v
	if r.KV == nil {
		r.KV = &KVCache{}
	}
	if orig, err := r.Lookup(MainName(w, mask)); err == nil && !slices.Contains(r.KV.Masks, orig) {
		r.KV.Masks = append(r.KV.Masks, orig)
	}
	return v, nil
}

// paddingRows are the attention masks checkPadding feeds: all tokens,
// left padding, right padding, holes.
var paddingRows = [][]int{
	{1, 1, 1, 1, 1, 1},
	{0, 0, 1, 1, 1, 1},
	{1, 1, 1, 1, 0, 0},
	{1, 0, 1, 1, 0, 1},
}

// checkPadding evaluates the block's mask terms with mask holding
// paddingRows: for every query, a key up to its own must be hidden (an
// additive term at most maskedBelow, or a Where that drops it) exactly
// when its column of mask is 0, and the additive terms must be 0 on the
// keys it sees.
func (a *Attention) checkPadding(w *work.Work, mask *graph.Value) error {
	B, S := len(paddingRows), len(paddingRows[0])
	pr := probe.NewProbe(w, B, S, 0)
	pr.Past = 0
	vals := make([]float64, 0, B*S)
	for _, row := range paddingRows {
		for _, x := range row {
			vals = append(vals, float64(x))
		}
	}
	pr.SetCuts(map[*graph.Value]*kernels.Tensor{mask: probe.FromFloat64Any(w.ElemType(mask), []int{B, S}, vals)})
	hidden := make([]bool, B*S*S)
	nonzero := make([]bool, B*S*S)
	// at reads t [.., q, k] (batch and heads broadcast) at b, q, k for
	// every head it has.
	each := func(t *kernels.Tensor, f func(i int, x float64)) error {
		sh := t.Shape
		if len(sh) < 2 || sh[len(sh)-1] != S && sh[len(sh)-1] != 1 || sh[len(sh)-2] != S && sh[len(sh)-2] != 1 {
			return fmt.Errorf("a mask of shape %v for %d tokens", sh, S)
		}
		tb := 1
		if len(sh) == 4 {
			tb = sh[0]
		}
		if tb != 1 && tb != B {
			return fmt.Errorf("a mask of shape %v for a batch of %d", sh, B)
		}
		Q, K := sh[len(sh)-2], sh[len(sh)-1]
		per := t.Len() / (tb * Q * K) // heads
		x := t.Float64s()
		for b := range B {
			for h := range per {
				for q := range S {
					for k := range S {
						f((b*S+q)*S+k, x[(((b%tb)*per+h)*Q+q%Q)*K+k%K])
					}
				}
			}
		}
		return nil
	}
	for _, m := range a.Masks {
		t, err := pr.Value(m)
		if err != nil {
			return fmt.Errorf("the mask %s cannot be evaluated: %v", w.Name(m), err)
		}
		if err := each(t, func(i int, x float64) {
			hidden[i] = hidden[i] || x <= maskedBelow
			nonzero[i] = nonzero[i] || x != 0
		}); err != nil {
			return err
		}
	}
	for _, wm := range a.wheres {
		t, err := pr.Value(wm.cond)
		if err != nil {
			return fmt.Errorf("the condition %s cannot be evaluated: %v", w.Name(wm.cond), err)
		}
		if err := each(t, func(i int, x float64) { hidden[i] = hidden[i] || (x != 0) != wm.keep }); err != nil {
			return err
		}
	}
	for b, row := range paddingRows {
		for q := range S {
			for k := 0; k <= q; k++ {
				i := (b*S+q)*S + k
				switch want := row[k] == 0; {
				case hidden[i] != want:
					return fmt.Errorf("with attention mask row %v, query %d, key %d is hidden: %v (the mask says %v)", row, q, k, hidden[i], want)
				case !hidden[i] && nonzero[i]:
					return fmt.Errorf("with attention mask row %v, the masks add a value other than 0 at query %d, key %d", row, q, k)
				}
			}
		}
	}
	return nil
}

// FinishKVCache says why the model cannot decode with the cache
// --add-kv-cache added ("" when it can): findings are the audit's (RoPE
// and NoPE only), blocks is the number of the model's attention blocks,
// each of which must have one; the mask inputs
// must be read by the added masks only; their width is declared
// past + seq (total_sequence_length).
func (r *Rewrite) FinishKVCache(blocks int, findings []*passes.Finding) string {
	for _, f := range findings {
		// Another encoding counts the positions of the call's tokens
		// (a learned or sinusoidal table read at 0..S-1, a bias):
		// decoding after a cache would read the prompt's first.
		if f.Scheme != "rope" && f.Scheme != "nope" {
			return fmt.Sprintf("the model's %s encoding counts the positions of each call's tokens from the prompt's first", f.Scheme)
		}
	}
	switch {
	case r.KV != nil && len(r.KV.Had) > 0:
		return "the model has a KV cache already"
	case r.KV == nil || len(r.KV.Layers) == 0:
		return "no attention block was fused (see the notes), so none takes a cache"
	}
	if len(r.KV.Layers) < blocks {
		return fmt.Sprintf("only layers %v of %d attention blocks were fused (see the notes): the others cannot take a cache", r.KV.Layers, blocks)
	}
	for _, m := range r.KV.Masks {
		for _, u := range m.Uses() {
			if !r.added[u.Node] {
				return fmt.Sprintf("%s is read outside the attention blocks (by %s): with a cache it holds past and new tokens", m.Name, work.NodeName(u.Node))
			}
		}
		if dims, ok := m.Type.Shape(); ok && len(dims) == 2 && !dims[1].Known {
			m.Type = graph.TensorType(m.Type.ElemType(), []graph.Dim{dims[0], {Param: "total_sequence_length"}})
		}
	}
	return ""
}

// cachePositions are the positions of rows q after the cache past:
// past .. past+S-1 for every row, [batch, seq] int64.
func (r *Rewrite) cachePositions(q, past *graph.Value) *graph.Value {
	key := "kvpos|" + q.Name + "|" + past.Name
	if v, ok := r.Memo[key]; ok {
		return v
	}
	sq := func(v *graph.Value) *graph.Value {
		return Typed(r.Op1("Reshape", []*graph.Value{v, r.Ints([]int64{0})}), graph.Int64, 0)
	}
	first := r.DimOf(past, 2)
	lim := Typed(r.Op1("Add", []*graph.Value{first, r.DimOf(q, 1)}), graph.Int64, 1)
	rg := Typed(r.Op1("Range", []*graph.Value{sq(first), sq(lim), r.ScalarInt(1)}), graph.Int64, 1)
	row := Typed(r.Op1("Reshape", []*graph.Value{rg, r.VecInt(1, -1)}), graph.Int64, 2)
	v := Typed(r.Op1("Expand", []*graph.Value{row, r.DimOf(q, 0, 1)}), graph.Int64, 2)
	r.Memo[key] = v
	return v
}
