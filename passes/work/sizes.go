package work

import (
	"slices"

	"github.com/onnxpe/onnxpe/graph"
)

// symKind is what a symbolic size of the model's inputs counts, for the
// binding of a probe.
type symKind uint8

const (
	symSeq    symKind = iota // new tokens (and any other size)
	SymBatch                 // the leading size of inputs of rank 2 or more
	SymPast                  // tokens held in a KV cache given as input
	SymTotal                 // past and new tokens (a mask over both)
	SymImageH                // the height of an image cut into patches
	SymImageW                // its width
)

// sizes classifies the symbols of the inputs' shapes.
type sizes struct {
	kind map[Dim]symKind
	// pastZero: the model declares a mask over the keys as long as the new
	// tokens (the same symbol), so only an empty cache agrees with its
	// shapes (a probe then binds the past to 0).
	pastZero bool
	// patch is the patch size along an image's open height or width.
	Patch map[Dim]int
	// fixedPast is the length of a KV cache given as input that the
	// model's shapes fix (0: none, or open).
	fixedPast int
}

// findSizes reads, once roles are known, which symbols count the batch,
// the KV cache (the axis along which a cache input is concatenated with
// new keys, or a fused attention op's past axis), past plus new tokens
// (the other sizes of masks, when the model has a cache), and the height
// and width of images a patch convolution reads.
func (w *Work) findSizes() *sizes {
	sz := &sizes{kind: map[Dim]symKind{}}
	ins := w.Inputs()
	keys := w.softmaxLengths()
	for _, v := range ins {
		if d, ok := w.batchDim(w.Shape(v), keys); ok {
			sz.kind[d] = SymBatch
		}
	}
	set := func(d Dim, k symKind) {
		d = w.Syms.Canon(d)
		if _, ok := sz.kind[d]; d.IsSym() && !ok {
			sz.kind[d] = k
		}
	}
	for _, v := range ins {
		if w.Role(v) == RoleContent {
			w.cacheAxes(v, func(d Dim) {
				set(d, SymPast)
				if d = w.Syms.Canon(d); d.Known() && d > 0 {
					sz.fixedPast = int(d)
				}
			})
		}
	}
	// Images of open size [batch, channels, height, width] cut into
	// patches: a probe gives them a grid of whole patches.
	for _, v := range ins {
		s := w.Shape(v)
		if s.Rank() != 4 || !IsFloatType(w.ElemType(v)) {
			continue
		}
		st := patchStrides(v)
		if st == nil {
			continue
		}
		for i, k := range []symKind{SymImageH, SymImageW} {
			d := w.Syms.Canon(s.Dims[2+i])
			if _, ok := sz.kind[d]; d.IsSym() && !ok {
				sz.kind[d] = k
				if sz.Patch == nil {
					sz.Patch = map[Dim]int{}
				}
				sz.Patch[d] = int(st[i])
			}
		}
	}
	if !sz.hasPast() {
		return sz
	}
	// The sequence: the second size of token, position and token-type ids.
	seq := map[Dim]bool{}
	for _, v := range ins {
		switch w.Role(v) {
		case RoleTokens, RolePositions, RoleTokenType:
			if s := w.Shape(v); s.Rank() == 2 {
				seq[w.Syms.Canon(s.Dims[1])] = true
			}
		}
	}
	for _, v := range ins {
		if w.Role(v) != RoleMask {
			continue
		}
		s := w.Shape(v)
		for i, d := range s.Dims {
			d = w.Syms.Canon(d)
			switch {
			case i == s.Rank()-1 && seq[d]:
				sz.pastZero = true
			case !seq[d]:
				set(d, SymTotal)
			}
		}
	}
	return sz
}

// batchDim is the symbol that counts the batch of an input of shape s:
// its leading one, unless attention's softmax runs over that many keys
// (a time-major [seq, batch] input) and the next is a symbol that counts
// no keys.
func (w *Work) batchDim(s Shape, keys map[Dim]bool) (Dim, bool) {
	if s.Rank() < 2 || !s.Dims[0].IsSym() {
		return 0, false
	}
	d := w.Syms.Canon(s.Dims[0])
	if !keys[d] {
		return d, true
	}
	if d1 := w.Syms.Canon(s.Dims[1]); d1.IsSym() && !keys[d1] {
		return d1, true
	}
	return 0, false
}

// softmaxLengths are the symbols of the axes Softmax runs over (opset 13
// on, or the last axis): the number of keys of an attention's scores.
func (w *Work) softmaxLengths() map[Dim]bool {
	out := map[Dim]bool{}
	w.M.Graph.Walk(func(n *graph.Node) {
		if n.OpType != "Softmax" || !IsONNX(n) || n.Input(0) == nil {
			return
		}
		s := w.Shape(n.Input(0))
		if s.Rank() < 2 {
			return
		}
		def := int64(-1)
		if w.Opset(n) < 13 {
			def = 1
		}
		ax := NormAxis(n.AttrInt("axis", def), s.Rank())
		if ax < 0 || ax >= s.Rank() || w.Opset(n) < 13 && ax != s.Rank()-1 {
			return
		}
		if d := w.Syms.Canon(s.Dims[ax]); d.IsSym() {
			out[d] = true
		}
	})
	return out
}

func (sz *sizes) hasPast() bool {
	for _, k := range sz.kind {
		if k == SymPast {
			return true
		}
	}
	return false
}

// fusedPastAxis gives, for the fused attention ops that take a KV cache,
// the axis of their past key/value inputs that holds past tokens.
var fusedPastAxis = map[string]map[int]int{
	".Attention":                                    {4: 2, 5: 2},
	"com.microsoft.GroupQueryAttention":             {3: 2, 4: 2},
	"com.microsoft.SparseAttention":                 {3: 2, 4: 2},
	"com.microsoft.MultiHeadAttention":              {6: 2, 7: 2},
	"com.microsoft.DecoderMaskedMultiHeadAttention": {5: 2, 6: 2},
	"com.microsoft.Attention":                       {4: 3},
}

// cacheAxes calls f with the size of past tokens of content input v when
// v is a KV cache: followed through layout ops, splits and gathers, it is
// concatenated with a value the graph computes, or it is a fused
// attention op's past input.
func (w *Work) cacheAxes(v *graph.Value, f func(Dim)) {
	seen := map[*graph.Value]bool{}
	var walk func(x *graph.Value, depth int)
	walk = func(x *graph.Value, depth int) {
		if seen[x] || depth > 6 {
			return
		}
		seen[x] = true
		s := w.Shape(x)
		for _, u := range x.Uses() {
			n := u.Node
			if ax, ok := fusedPastAxis[OpKey(n)][u.Index]; ok {
				if ax < s.Rank() {
					f(s.Dims[ax])
				}
				continue
			}
			if !IsONNX(n) {
				continue
			}
			switch {
			case n.OpType == "Concat":
				ax := NormAxis(n.AttrInt("axis", 0), s.Rank())
				other := false
				for _, in := range n.Inputs() {
					other = other || in != nil && in != x && !w.IsConst(in)
				}
				if other && ax >= 0 && ax < s.Rank() {
					f(s.Dims[ax])
				}
			case LayoutOps[n.OpType] || n.OpType == "Split" || n.OpType == "Slice" || n.OpType == "Gather" && u.Index == 0:
				for _, o := range n.Outputs() {
					walk(o, depth+1)
				}
			}
		}
	}
	walk(v, 0)
}

// FixedPast is the length of a KV cache given as input when the model's
// shapes fix it (a static export after some past tokens), else 0: a probe
// cannot then vary the cache's length.
func (w *Work) FixedPast() int {
	if w.Sizes == nil {
		return 0
	}
	return w.Sizes.fixedPast
}

// symKindOf is the kind of symbol d.
func (w *Work) SymKindOf(d Dim) symKind {
	if w.Sizes == nil {
		return symSeq
	}
	return w.Sizes.kind[w.Syms.Canon(d)]
}

// isBatchSym reports whether d is the leading symbol of an input of rank
// two or more (the batch).
func (w *Work) IsBatchSym(d Dim) bool { return w.SymKindOf(d) == SymBatch }

// defaultPast is the length of the KV cache a probe of seq new tokens
// binds: 0 for models without a cache or whose shapes allow only an empty
// one, otherwise a length other than seq, so that masks over past and new
// tokens and positions counted from the cache are exercised.
func (w *Work) DefaultPast(seq int) int {
	if w.Sizes == nil || w.Sizes.pastZero || !w.Sizes.hasPast() {
		return 0
	}
	if seq == 3 {
		return 2
	}
	return 3
}

// patchStrides are the strides of the 2-D convolution reading v (through
// casts) whose kernel is its stride, without padding: a patch embedding
// (nil when there is none).
func patchStrides(v *graph.Value) []int64 {
	for steps := 0; steps < 4 && v != nil; steps++ {
		var next *graph.Value
		for _, u := range v.Uses() {
			n := u.Node
			if !IsONNX(n) {
				continue
			}
			switch {
			case n.OpType == "Conv" && u.Index == 0:
				st, k := n.AttrInts("strides"), n.AttrInts("kernel_shape")
				pads := n.AttrInts("pads")
				if len(st) == 2 && slices.Equal(st, k) && st[0] > 1 && st[1] > 1 &&
					!slices.ContainsFunc(pads, func(p int64) bool { return p != 0 }) &&
					n.AttrString("auto_pad", "NOTSET") == "NOTSET" && len(n.AttrInts("dilations")) == 0 {
					return st
				}
			case n.OpType == "Cast":
				next = n.Output(0)
			}
		}
		v = next
	}
	return nil
}

// probeGrid is the patch grid a probe of seq tokens gives an image of
// open size: rows × (rows+1) patches, at most seq (more columns than rows,
// so that the axes are not confused).
func ProbeGrid(seq int) (rows, cols int) {
	rows = 1
	for (rows+1)*(rows+2) <= seq {
		rows++
	}
	return rows, rows + 1
}
