package work

import (
	"cmp"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// Role is what a graph input carries, as far as detection needs to know:
// it decides the values probes give it.
type Role string

// Input roles, read from how each input is used (never from its name):
// what its values meet, followed forward through ops that keep them.
// Firm uses decide first (the position input of a fused rotation, rows
// that multiply another value: a cos/sin cache; EmbedLayerNormalization's
// and the attention ops' inputs by their contracts); then tables: the
// token ids read the table whose rows are the vocabulary of the logits,
// else the largest, and the other table readers are positions, or token
// types when the graph computes its positions itself or their table has
// at most maxSegmentRows rows; then a mask's own uses (logic, CumSum,
// 1 - m, m·-1e4, comparison with a constant); then use as a number
// (angles, offsets by computed values, Range, ReduceMax) makes positions.
//
// One ambiguity stays: a model without logits whose token table is
// smaller than its position table (both gathered and added) is read with
// the larger table as tokens; nothing in such a graph tells them apart.
const (
	// RoleTokens: integer ids gathered from the token embedding (the
	// vocabulary of the logits, else the largest table).
	RoleTokens Role = "input_ids"
	// RoleTokenType: integer ids gathered from a segment table.
	RoleTokenType Role = "token_type_ids"
	// RolePositions: integer positions (gathered from a position table or
	// a cos/sin cache, turned into angles, or the position input of a
	// fused rotation).
	RolePositions Role = "position_ids"
	// RoleMask: an attention mask (integers, booleans, or floats over the
	// batch and sequence).
	RoleMask Role = "attention_mask"
	// RoleContent: floating-point activations given as inputs (embeddings,
	// pixels, audio features, the KV cache of past tokens).
	RoleContent Role = "content"
	// RoleParam: weights, caches or frequencies given as inputs (exporters
	// that keep parameters out of the file).
	RoleParam Role = "param"
	// RoleOther: integers or booleans whose uses say none of the above
	// (a sequence length given to a fused op); probes give them ones.
	RoleOther Role = "other"
	// RoleUnused: an input whose values nothing reads (only its shape, or
	// nothing at all).
	RoleUnused Role = "unused"
)

// roles holds the input roles and which values carry activations (depend
// on the content of the tokens, through the content inputs).
type roles struct {
	Of  map[*graph.Value]Role
	act byValue[bool]
}

// Role is the role of a main-graph input.
func (w *Work) Role(v *graph.Value) Role { return w.Roles.Of[v] }

// IsAct reports whether v carries activations: it depends on the tokens'
// content (token ids, content inputs) and not only on positions, shapes,
// masks and constants.
func (w *Work) IsAct(v *graph.Value) bool { return v != nil && w.Roles.act.Of(v) }

// Inputs lists the main graph's inputs that are not initializers.
func (w *Work) Inputs() []*graph.Value {
	var out []*graph.Value
	for _, v := range w.M.Graph.Inputs {
		if v.Const == nil {
			out = append(out, v)
		}
	}
	return out
}

// indexPreserving are the ops through which an index tensor is still the
// same indices (at their input 0).
var indexPreserving = map[string]bool{"Reshape": true, "Unsqueeze": true, "Squeeze": true, "Cast": true,
	"Flatten": true, "Expand": true, "Identity": true, "Tile": true, "Slice": true, "Gather": true, "Transpose": true}

// maxSegmentRows is the most rows a token-type (segment) table has: BERT's
// has 2, ONNX Runtime's BERT test models 16. A second table read by an
// input, with more rows and no other evidence, is read at positions.
const maxSegmentRows = 16

// inputUses is what the uses of one integer or boolean input say about
// its values, read forward through ops that keep them (reshapes, casts,
// slices, repeats) and, for positions only, through arithmetic.
type inputUses struct {
	valued bool  // some node reads its values, not only its shape
	rows   int64 // the most rows of a float [rows, dim] table it gathers
	// tables are the float [rows, dim] tables it gathers rows of (directly,
	// without arithmetic on the ids).
	tables []*graph.Value
	// rotates: the rows it gathers multiply a value computed apart from
	// them (rotation factors: a cos/sin cache); rotTables are the tables
	// whose rows do.
	rotates   bool
	rotTables []*graph.Value
	// position names a use only positions have: the position input of a
	// fused rotation, a gather from a cos/sin cache of rank 3 or more;
	// after arithmetic, also a table gathered at the computed indices.
	position string
	// direct: position was reached without arithmetic.
	direct bool
	mask   string // a use only masks have (logic, CumSum, 1-m, m·-1e4, ...)
	// number: used as a number (arithmetic with computed values, Range,
	// ReduceMax, comparisons with computed values, cast to float and
	// multiplied): positions unless a mask's own use says otherwise.
	number string
	eln    int // its input index of EmbedLayerNormalization, or -1
}

// fusedMaskInput is the input of each fused attention op that is a mask
// by its contract (ONNX's Attention, ContribOperators.md).
var fusedMaskInput = map[string]int{".Attention": 3, "com.microsoft.Attention": 3, "com.microsoft.MultiHeadAttention": 4,
	"com.microsoft.DecoderMaskedMultiHeadAttention": 3, "com.microsoft.DecoderMaskedSelfAttention": 3}

// readUses collects the uses of input v.
func (w *Work) readUses(v *graph.Value) *inputUses {
	u := &inputUses{eln: -1}
	pos := func(why string, arith bool) {
		if u.position == "" || !u.direct && !arith {
			u.position, u.direct = why, !arith
		}
	}
	seen := map[*graph.Value]bool{}
	same := w.sameIndices(v)
	var walk func(x *graph.Value, float, arith bool, depth int)
	walk = func(x *graph.Value, float, arith bool, depth int) {
		if x == nil || seen[x] || depth > 12 {
			return
		}
		seen[x] = true
		for _, use := range x.Uses() {
			n, i := use.Node, use.Index
			if IsONNX(n) && (n.OpType == "Shape" || n.OpType == "Size") {
				continue
			}
			u.valued = true
			if spec, ok := FusedSpecs[OpKey(n)]; ok && spec.PosIDs >= 0 && spec.PosIDs == i {
				pos("the position_ids of "+n.OpType, arith)
				continue
			}
			if mi, ok := fusedMaskInput[OpKey(n)]; ok && mi == i && !arith {
				u.mask = "the mask input of " + n.OpType
				continue
			}
			switch {
			case n.OpType == "RotaryEmbedding" && (n.Domain == "com.microsoft" && i == 1 || IsONNX(n) && i == 3):
				pos("the position_ids of RotaryEmbedding", arith)
			case n.OpType == "EmbedLayerNormalization" && n.Domain == "com.microsoft":
				if !arith {
					u.eln = i
				}
			case n.OpType == "ATen" && n.AttrString("operator", "") == "embedding" && i == 1:
				// PyTorch's embedding kept as an ATen op (ORTModule).
				if t := w.Shape(n.Input(0)); t.Rank() == 2 && t.Dims[0].Known() && !arith {
					u.rows = max(u.rows, int64(t.Dims[0]))
				}
			case !IsONNX(n):
			case n.OpType == "Cast":
				to := graph.DataType(n.AttrInt("to", 0))
				switch {
				case to == graph.Bool:
					if !arith {
						u.mask = "Cast to bool"
					}
				case IsFloatType(to):
					walk(n.Output(0), true, arith, depth+1)
				default:
					walk(n.Output(0), float, arith, depth+1)
				}
			case n.OpType == "Mul" && w.constScalarIs(n.Input(1-i), func(f float64) bool { return math.Abs(f) >= 1e4 }):
				u.mask = "mask times a large number"
			case n.OpType == "Mul" && len(n.Inputs()) == 2 && same[n.Input(1-i)] && !arith:
				// m·mᵀ: a pair of tokens is visible when both are (DeBERTa's
				// mask); positions are subtracted from themselves, never
				// multiplied.
				u.mask = "multiplied by itself (m·mᵀ)"
			case float && (n.OpType == "MatMul" || n.OpType == "Mul" || n.OpType == "Einsum" || n.OpType == "Sin" || n.OpType == "Cos" || n.OpType == "Div"):
				// Angles (positions times frequencies), or a float
				// mask multiplied: weaker than a mask's own uses.
				if u.number == "" {
					u.number = "cast to float and multiplied (angles)"
				}
			case (n.OpType == "Gather" || n.OpType == "GatherElements") && i == 1 && !float:
				t := w.Shape(n.Input(0))
				switch {
				case n.OpType == "Gather" && t.Rank() == 2 && t.Dims[0].Known() && IsFloatType(w.ElemType(n.Input(0))):
					if arith {
						pos("a table gathered at computed indices", true)
					} else {
						u.rows = max(u.rows, int64(t.Dims[0]))
						u.tables = append(u.tables, n.Input(0))
						if w.rowsMultiply(n.Output(0)) {
							u.rotates = true
							if w.cosSinPair(append(u.rotTables, n.Input(0))) {
								pos("gathers a cos and a sin cache (two tables of one shape whose rows multiply other values)", false)
							}
							u.rotTables = append(u.rotTables, n.Input(0))
						}
					}
				case t.Rank() >= 2:
					pos("gathers from a cos/sin cache or a table of unknown size", arith)
				}
			case indexPreserving[n.OpType] && i == 0:
				walk(n.Output(0), float, arith, depth+1)
			case n.OpType == "Not" || n.OpType == "And" || n.OpType == "Or" || n.OpType == "Xor" || n.OpType == "Where" && i == 0:
				u.mask = n.OpType
			case n.OpType == "Sub" && i == 1 && w.constScalarIs(n.Input(0), func(f float64) bool { return f == 1 }):
				u.mask = "1 - mask"
			case arith && n.OpType == "Equal" && float && w.constScalarIs(n.Input(1-i), func(f float64) bool { return f == 0 }):
				// Added to a causal mask, then compared with 0 (Hugging
				// Face's padding of a float mask: causal + m == 0).
				u.mask = "added to a float mask and compared with 0"
			case arith:
				// After arithmetic only the uses above say mask (a
				// mask combined with a causal one, then 1 - m).
				if isArith(n.OpType) {
					walk(n.Output(0), float, true, depth+1)
				}
			case n.OpType == "CumSum" || n.OpType == "ReduceSum":
				u.mask = n.OpType
			case n.OpType == "Equal" || n.OpType == "Less" || n.OpType == "Greater" || n.OpType == "LessOrEqual" || n.OpType == "GreaterOrEqual":
				if w.IsConst(n.Input(1 - i)) {
					u.mask = "compared with a constant"
				} else {
					u.number = n.OpType
				}
			case n.OpType == "Range" || n.OpType == "ReduceMax" || n.OpType == "ReduceMin" || n.OpType == "ArgMax" || n.OpType == "ArgMin":
				u.number = n.OpType
			case isArith(n.OpType):
				// Offsets by constants keep indices (OPT's +2); by
				// computed values (a past length) they make counts.
				if len(n.Inputs()) == 2 && !w.IsConst(n.Input(1-i)) {
					u.number = n.OpType
				}
				walk(n.Output(0), float, true, depth+1)
			}
		}
	}
	walk(v, false, false, 0)
	return u
}

// sameIndices are the values that hold v's values unchanged (through
// reshapes, casts, slices and repeats).
func (w *Work) sameIndices(v *graph.Value) map[*graph.Value]bool {
	out := map[*graph.Value]bool{v: true}
	stack := []*graph.Value{v}
	for len(stack) > 0 && len(out) < 64 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, use := range x.Uses() {
			n := use.Node
			if !IsONNX(n) || use.Index != 0 || !indexPreserving[n.OpType] && n.OpType != "Cast" {
				continue
			}
			for _, o := range n.Outputs() {
				if !out[o] {
					out[o] = true
					stack = append(stack, o)
				}
			}
		}
	}
	return out
}

// sameTable reports whether a table of as is one of bs (one value of the
// copy: an initializer read by both).
func sameTable(as, bs []*graph.Value) bool {
	return slices.ContainsFunc(as, func(a *graph.Value) bool { return slices.Contains(bs, a) })
}

// boolOrder sorts true first.
func boolOrder(first bool) int {
	if first {
		return -1
	}
	return 1
}

func isArith(op string) bool {
	switch op {
	case "Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Clip", "Neg", "Abs":
		return true
	}
	return false
}

// constScalarIs reports whether v is a one-element constant satisfying f.
func (w *Work) constScalarIs(v *graph.Value, f func(float64) bool) bool {
	t := w.Const(v)
	if t == nil || t.Len() != 1 {
		return false
	}
	return f(t.Float64s()[0])
}

// cosSinPair reports whether the last of tables and another, distinct
// one of its shape hold the cosine and the sine of the same angles
// (a² + b² = 1 element by element, within a half type's rounding): what an
// index gathering both reads are the cos and the sin of a rotation, not
// the embeddings of tokens (complex-order word embeddings gather an
// amplitude and a frequency table of one shape too).
func (w *Work) cosSinPair(tables []*graph.Value) bool {
	last := tables[len(tables)-1]
	for _, t := range tables[:len(tables)-1] {
		if t != last && SameShape(w.Shape(t), w.Shape(last)) && onCircle(w.Const(t), w.Const(last)) {
			return true
		}
	}
	return false
}

// onCircle reports whether a² + b² = 1 for the first elements (at most
// 4096) of two tables of one size.
func onCircle(a, b *kernels.Tensor) bool {
	if a == nil || b == nil || a.Len() != b.Len() || a.Len() == 0 {
		return false
	}
	x, y := headFloats(a, 4096), headFloats(b, 4096)
	if x == nil || y == nil {
		return false
	}
	for i := range x {
		if math.Abs(x[i]*x[i]+y[i]*y[i]-1) > 4e-3 {
			return false
		}
	}
	return true
}

// headFloats are t's first n elements (fewer when t has fewer) as
// float64, without converting the rest of a large table (nil for a large
// table of a type it does not read in place).
func headFloats(t *kernels.Tensor, n int) []float64 {
	switch d := t.Raw().(type) {
	case []float32:
		out := make([]float64, min(n, len(d)))
		for i := range out {
			out[i] = float64(d[i])
		}
		return out
	case []float64:
		return d[:min(n, len(d))]
	}
	if t.Len() > 1<<20 {
		return nil
	}
	v := t.Float64s()
	return v[:min(n, len(v))]
}

// rowsMultiply reports whether rows gathered into g multiply, through
// layout ops, slices and negation, a value that is neither constant nor
// computed from g within a few steps (a norm of the rows is): the rows
// are rotation factors (cos or sin).
func (w *Work) rowsMultiply(g *graph.Value) bool {
	near := map[*graph.Value]bool{g: true}
	front := []*graph.Value{g}
	for step := 0; step < 16 && len(front) > 0; step++ {
		var next []*graph.Value
		for _, x := range front {
			for _, n := range x.Consumers() {
				for _, o := range n.Outputs() {
					if !near[o] {
						near[o] = true
						next = append(next, o)
					}
				}
			}
		}
		front = next
	}
	seen := map[*graph.Value]bool{}
	var walk func(x *graph.Value, depth int) bool
	walk = func(x *graph.Value, depth int) bool {
		if seen[x] || depth > 8 {
			return false
		}
		seen[x] = true
		for _, use := range x.Uses() {
			n := use.Node
			switch {
			case !IsONNX(n):
			case n.OpType == "Mul" && len(n.Inputs()) == 2:
				if o := n.Input(1 - use.Index); !w.IsConst(o) && !near[o] {
					return true
				}
			case LayoutOps[n.OpType] || n.OpType == "Slice" || n.OpType == "Split" || n.OpType == "Neg" || n.OpType == "Concat":
				for _, out := range n.Outputs() {
					if walk(out, depth+1) {
						return true
					}
				}
			}
		}
		return false
	}
	return walk(g, 0)
}

func (w *Work) findRoles() *roles {
	// Most values of a model carry activations: the flags are kept per
	// value number of the copy (a map grew or, presized, cost 5 MB).
	r := &roles{Of: map[*graph.Value]Role{}, act: newByValue[bool](w.M)}
	ins := w.Inputs()
	uses := map[*graph.Value]*inputUses{}
	var batchSym Dim = unknownDim
	for _, v := range ins {
		dt := w.ElemType(v)
		s := w.Shape(v)
		if IsIntType(dt) || dt == graph.Bool {
			if s.Ranked && len(s.Dims) >= 2 && s.Dims[0].IsSym() && batchSym == unknownDim {
				batchSym = s.Dims[0]
			}
			uses[v] = w.readUses(v)
		}
	}
	// Inputs that read tables and nothing says more about: the token ids
	// read the table whose rows are the vocabulary of the logits, else the
	// largest (rows that rotate another value are a cos/sin cache, not
	// tokens; equal tables: the first input); the others read positions,
	// or token types when the graph computes its positions itself or
	// their table is as small as a segment table.
	firmPos := func(u *inputUses) bool { return u.position != "" && u.direct || u.eln == 8 }
	vocab := w.logitWidths()
	var readers []*graph.Value
	for _, v := range ins {
		if u := uses[v]; u != nil && u.rows > 0 && u.eln < 0 && !firmPos(u) {
			readers = append(readers, v)
		}
	}
	slices.SortStableFunc(readers, func(a, b *graph.Value) int {
		ua, ub := uses[a], uses[b]
		if va, vb := vocab[ua.rows], vocab[ub.rows]; va != vb {
			return boolOrder(va)
		}
		if ua.rotates != ub.rotates {
			return boolOrder(ub.rotates)
		}
		return cmp.Compare(ub.rows, ua.rows)
	})
	tokens := map[*graph.Value]bool{}
	if len(readers) > 0 && !slices.ContainsFunc(ins, func(v *graph.Value) bool { return uses[v] != nil && uses[v].eln == 0 }) {
		tokens[readers[0]] = true
		// Positions never index the token table: every input gathering a
		// table the token ids gather (the shared embedding of an
		// encoder-decoder's two stacks) is token ids too.
		for _, v := range readers[1:] {
			if sameTable(uses[v].tables, uses[readers[0]].tables) {
				tokens[v] = true
			}
		}
	}
	inGraphPositions := w.gathersComputedPositions()
	for _, v := range ins {
		dt := w.ElemType(v)
		s := w.Shape(v)
		u := uses[v]
		switch {
		case u == nil:
		case firmPos(u) || u.rotates && !tokens[v]:
			r.Of[v] = RolePositions
		case u.eln == 0 || tokens[v]:
			r.Of[v] = RoleTokens
		case u.eln == 1:
			r.Of[v] = RoleTokenType
		case u.eln == 7:
			r.Of[v] = RoleMask
		case u.rows > 0 && u.number == "" && (inGraphPositions || u.rows <= maxSegmentRows):
			r.Of[v] = RoleTokenType
		case u.rows > 0:
			r.Of[v] = RolePositions
		case u.mask != "":
			r.Of[v] = RoleMask
		case u.number != "" || u.position != "":
			r.Of[v] = RolePositions
		case u.valued:
			r.Of[v] = RoleOther
		default:
			r.Of[v] = RoleUnused
		}
		if u != nil {
			continue
		}
		switch {
		case IsFloatType(dt) && s.Rank() >= 3:
			r.Of[v] = RoleContent
		case IsFloatType(dt) && s.Rank() == 2 && s.Dims[0] == batchSym && batchSym != unknownDim:
			r.Of[v] = RoleMask
		default:
			r.Of[v] = RoleParam
		}
	}
	w.Roles = r
	w.markAct(w.M.Graph)
	w.Sizes = w.findSizes()
	return r
}

func IsFloatType(dt graph.DataType) bool {
	switch dt {
	case graph.Float, graph.Double, graph.Float16, graph.BFloat16:
		return true
	}
	return false
}

// markAct propagates the activation flag forward through g (and its
// subgraphs). Shape and Size outputs never carry activations.
func (w *Work) markAct(g *graph.Graph) {
	r := w.Roles
	for _, v := range g.Inputs {
		if role := r.Of[v]; role == RoleTokens || role == RoleContent {
			r.act.set(v, true)
		}
	}
	for n := range g.All() {
		if n.OpType == "Shape" || n.OpType == "Size" {
			continue
		}
		act := false
		for _, v := range n.Inputs() {
			if r.act.Of(v) {
				act = true
			}
		}
		if sgs := n.Subgraphs(); len(sgs) > 0 {
			for _, sg := range sgs {
				// Loop-carried inputs take the flags of the node's inputs.
				if n.OpType == "Loop" {
					for i, bi := range sg.Inputs {
						if i >= 2 && r.act.Of(n.Input(i)) {
							r.act.set(bi, true)
						}
					}
				}
				w.markAct(sg)
				for _, o := range sg.Outputs {
					if r.act.Of(o) {
						act = true
					}
				}
			}
		}
		if act && w.indicator(n) {
			act = false
		}
		if act {
			for _, o := range n.Outputs() {
				r.act.set(o, true)
			}
		}
	}
}

// indicator reports whether n only compares integer activations (token
// ids) and gives booleans: ids != pad is a mask of where the tokens are,
// not content (RoBERTa's positions are counted from it:
// cumsum(ids != pad)·mask + pad).
func (w *Work) indicator(n *graph.Node) bool {
	switch n.OpType {
	case "Equal", "Not", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor":
	default:
		return false
	}
	if !IsONNX(n) || len(n.Outputs()) != 1 || w.ElemType(n.Output(0)) != graph.Bool {
		return false
	}
	for _, v := range n.Inputs() {
		if w.Roles.act.Of(v) && !IsIntType(w.ElemType(v)) && w.ElemType(v) != graph.Bool {
			return false
		}
	}
	return true
}

// logitWidths are the last dimensions of the model's outputs computed by
// a product with weights (the vocabulary of a language model's logits).
func (w *Work) logitWidths() map[int64]bool {
	out := map[int64]bool{}
	for _, o := range w.M.Graph.Outputs {
		v := o
		for steps := 0; steps < 4 && v != nil && v.Producer() != nil; steps++ {
			n := v.Producer()
			if n.OpType == "MatMul" || n.OpType == "Gemm" || n.OpType == "FusedMatMul" {
				if d := w.Shape(o).Last(); d.Known() {
					out[int64(d)] = true
				}
				break
			}
			if n.OpType != "Add" && !LayoutOps[n.OpType] {
				break
			}
			v = n.Input(0)
			if w.IsConst(v) && len(n.Inputs()) > 1 {
				v = n.Input(1)
			}
		}
	}
	return out
}

// gathersComputedPositions reports whether a float table is gathered by
// indices the graph computes from shapes and constants only (positions
// made inside the model, such as BERT's arange).
func (w *Work) gathersComputedPositions() bool {
	found := false
	w.M.Graph.Walk(func(n *graph.Node) {
		if found || n.OpType != "Gather" || !IsONNX(n) {
			return
		}
		t := w.Shape(n.Input(0))
		if t.Rank() != 2 || !IsFloatType(w.ElemType(n.Input(0))) || w.IsConst(n.Input(1)) || w.Shape(n.Input(1)).Rank() < 1 {
			return
		}
		if len(w.valueInputs(n.Input(1))) == 0 {
			found = true
		}
	})
	return found
}

// valueInputs lists the graph inputs v depends on by value (not only
// through their shapes).
func (w *Work) valueInputs(v *graph.Value) []*graph.Value {
	seen := map[*graph.Value]bool{}
	var out []*graph.Value
	var walk func(v *graph.Value, depth int)
	walk = func(v *graph.Value, depth int) {
		if v == nil || seen[v] || depth > 200 || w.IsConst(v) {
			return
		}
		seen[v] = true
		n := v.Producer()
		if n == nil {
			if v.Graph() == w.M.Graph {
				out = append(out, v)
			}
			return
		}
		if n.OpType == "Shape" || n.OpType == "Size" {
			return
		}
		for _, in := range n.Inputs() {
			walk(in, depth+1)
		}
	}
	walk(v, 0)
	return out
}
