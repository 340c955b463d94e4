package verify

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// Role is what an input means to the model, as read from the graph.
type Role string

// The roles of inputs. They decide the values the sweep feeds.
const (
	// RoleTokenIDs indexes the largest embedding table (its rows are the
	// vocabulary): uniform ids within it.
	RoleTokenIDs Role = "token_ids"
	// RoleTableIndex indexes another small table (token types, segments):
	// uniform values within its rows.
	RoleTableIndex Role = "table_index"
	// RolePositionIDs feeds the positional path: 0..S-1 offset by the
	// past length, and positions near the largest the model supports.
	RolePositionIDs Role = "position_ids"
	// RoleAttentionMask marks real tokens (1) and padding (0): all ones,
	// left and right padding.
	RoleAttentionMask Role = "attention_mask"
	// RolePastKV is a key or value cache from earlier steps, concatenated
	// with the new keys along its past axis.
	RolePastKV Role = "past_kv"
	// RolePastLength is a scalar count of cached tokens.
	RolePastLength Role = "past_length"
	// RoleStaticCache is a preallocated key or value cache that the model
	// writes the new keys or values into (TensorScatter's past_cache):
	// its cache axis is longer than the tokens it holds.
	RoleStaticCache Role = "static_cache"
	// RoleWriteIndex is where each row's new tokens are written into a
	// static cache (TensorScatter's write_indices): the number of tokens
	// the row already holds.
	RoleWriteIndex Role = "write_index"
	// RoleKVLength is the number of valid keys of each row after this
	// call (opset-24 Attention's nonpad_kv_seqlen): the tokens held plus
	// the new ones.
	RoleKVLength Role = "kv_length"
	// RoleFeatures is float data (embeddings, image or audio features):
	// standard normal values.
	RoleFeatures Role = "features"
	// RoleUnknown is an input whose use the analysis does not recognise:
	// ones (true), valid as a mask, a count or an index.
	RoleUnknown Role = "unknown"
)

// DimKind says what a dimension of an input or output counts.
type DimKind string

// The kinds of dimensions.
const (
	DimFixed DimKind = "fixed"
	DimBatch DimKind = "batch"
	DimSeq   DimKind = "sequence"
	DimPast  DimKind = "past"
	// DimTotal counts past and current tokens (masks and presents of
	// models with a cache).
	DimTotal DimKind = "total"
	// DimCapacity is the length of a static cache's cache axis: longer
	// than past and current tokens together (the slots after them hold
	// values the model must not read).
	DimCapacity DimKind = "capacity"
	// DimOther is any other symbolic dimension: it is bound to the
	// sequence length.
	DimOther DimKind = "other"
	// DimImageRows and DimImageCols are the height and width of an image
	// cut into patches (a convolution of stride Size reads it): they are
	// bound to a grid of patches (streams.go), rows and columns unequal.
	DimImageRows DimKind = "image_rows"
	DimImageCols DimKind = "image_cols"
)

// DimSpec is one dimension of an input.
type DimSpec struct {
	Kind  DimKind `json:"kind"`
	Size  int     `json:"size,omitempty"`
	Param string  `json:"param,omitempty"`
}

// InputInfo is what the analysis found about one input.
type InputInfo struct {
	Name  string    `json:"name"`
	DType string    `json:"dtype"`
	Dims  []DimSpec `json:"dims"`
	Role  Role      `json:"role"`
	// Rows is the number of rows of the table an index input reads (the
	// vocabulary for token ids); 0 when unknown.
	Rows int `json:"rows,omitempty"`
	// MaxPosition is, for position ids, the largest position a stored
	// table indexed by them allows; 0 when no table bounds them.
	MaxPosition int `json:"max_position,omitempty"`
	// Evidence says which uses in the graph decided the role.
	Evidence string `json:"evidence"`

	dt graph.DataType
	v  *graph.Value
	ev *inputEvents
	// firm: the role rests on a use that says it (a mask operation, a
	// rotation, arithmetic on positions, a concatenation with new keys),
	// not on table sizes or the lack of any use; suggestions do not
	// change a firm role.
	firm bool
	// tie: an index input whose table the graph does not tell from
	// another's (same size, neither the vocabulary of an output).
	tie bool
}

// Table is a stored table the model reads at positions (a position
// table, a cos/sin cache, a bias table): its size bounds the positions
// the model accepts.
type Table struct {
	// Value is the table's name in the graph.
	Value string `json:"value"`
	// Node is the node that reads it (Gather, Slice, RotaryEmbedding...).
	Node string `json:"node"`
	Op   string `json:"op"`
	// Rows is its size along the axis that is read.
	Rows int `json:"rows"`
	// BySequence is true when the table is cut to the sequence length
	// before it is read (its rows then follow the input).
	BySequence bool `json:"by_sequence,omitempty"`
}

// Analysis is what verify knows about a model's inputs: roles, symbolic
// dimensions, the vocabulary, the tables that bound positions, and the
// longest sequence the sweep feeds.
type Analysis struct {
	Inputs []InputInfo `json:"inputs"`
	// HasCache is true when the model takes past keys/values.
	HasCache bool `json:"has_cache"`
	// FixedSeq is the sequence length when the model's shapes fix it.
	FixedSeq int     `json:"fixed_seq,omitempty"`
	Tables   []Table `json:"tables,omitempty"`
	// MaxLength is the longest sequence (past plus current tokens) the
	// sweep feeds: the largest a stored table allows, checked by running
	// the model, or DefaultLongSequence when no table bounds it.
	MaxLength int `json:"max_length"`
	// MaxLengthFrom says where MaxLength comes from.
	MaxLengthFrom string `json:"max_length_from"`
	// MaxPosition is the largest position id the sweep feeds.
	MaxPosition int `json:"max_position,omitempty"`
	// OneRowChunks, when set, says why several tokens after a cache run
	// for one sequence only (the sweep's sets of that shape have batch
	// 1): an op's contract refuses more.
	OneRowChunks string `json:"one_row_chunks,omitempty"`
	// Notes are things the analysis could not settle.
	Notes []string `json:"notes,omitempty"`

	model  *graph.Model
	feeds  []*graph.Value
	d      *deps
	params map[string]DimKind
	reads  []*boundedRead
	// fixedRows is the batch of a model that fixes it (fixedBatch): the
	// rows of its position inputs are the batch's; 0 otherwise.
	fixedRows int
}

// boundedRead is a Gather/Slice/RotaryEmbedding reading a table that
// depends on no input's values at indices that depend on the inputs.
type boundedRead struct {
	node  *graph.Node
	data  *graph.Value
	axis  int  // Gather axis; -1 for a Slice (found from the probe)
	slice bool // data is cut by a Slice (output compared with the data)
	// token: the indices come straight from a token-id or table-index
	// input (a vocabulary lookup, not a position bound).
	token bool
	rows  [2]int // probed sizes at two sequence lengths
	// value is the table as the first probe read it (kept for the
	// precision audit; dropped for vocabulary tables).
	value *kernels.Tensor
	// static reads are in subgraphs: their table is a constant whose
	// size is read from the graph, not probed.
	static bool
}

// inputEvents are the uses of one input reached through ops that keep
// its values (Reshape, Unsqueeze, Cast to an integer type, ...).
type inputEvents struct {
	gathers  []*graph.Node // Gather*/index input reached directly
	arithGat []*graph.Node // Gather* reached after integer arithmetic
	rotary   []*graph.Node // fused RotaryEmbedding position input
	mask     []string      // mask-like uses
	position []string      // position-like uses (arithmetic, comparisons with ranges)
	concat   []*graph.Node // float: concatenated with non-constant values
	concatAx []int
	scatter  []*graph.Node // float: the cache TensorScatter writes into
	scatterA []int         // its cache axis (as the op's attribute says)
	writeIdx []*graph.Node // TensorScatter's write_indices
	kvLen    []*graph.Node // opset-24 Attention's nonpad_kv_seqlen
	rng      bool          // an operand of Range
	other    []string
}

func (e *inputEvents) add(list *[]string, n *graph.Node) {
	s := n.OpType
	if !slices.Contains(*list, s) {
		*list = append(*list, s)
	}
}

// walkUses follows v's values forward through ops that keep them and
// records the first uses that do something with them.
func walkUses(g *graph.Graph, v *graph.Value, isFloat bool) *inputEvents {
	e := &inputEvents{}
	seen := map[*graph.Value]bool{}
	var walk func(v *graph.Value, float, arith bool, depth int)
	walk = func(v *graph.Value, float, arith bool, depth int) {
		if v == nil || seen[v] || depth > 24 {
			return
		}
		seen[v] = true
		for _, u := range v.Uses() {
			n := u.Node
			if n.Graph() != g {
				e.add(&e.other, n)
				continue
			}
			onnx := isONNX(n.Domain)
			pass := func() {
				for _, o := range n.Outputs() {
					walk(o, float, arith, depth+1)
				}
			}
			if ax, ok := fusedPast(n, u.Index); ok && isFloat {
				e.concat = append(e.concat, n)
				e.concatAx = append(e.concatAx, ax)
				continue
			}
			switch {
			case onnx && n.OpType == "TensorScatter" && u.Index == 0 && isFloat:
				e.scatter = append(e.scatter, n)
				e.scatterA = append(e.scatterA, int(n.AttrInt("axis", -2)))
			case onnx && n.OpType == "TensorScatter" && u.Index == 2 && !float:
				e.writeIdx = append(e.writeIdx, n)
			case onnx && n.OpType == "Attention" && u.Index == 6 && !float:
				e.kvLen = append(e.kvLen, n)
			case fusedMask(n, u.Index) && !arith && !(onnx && (float || isFloat)):
				e.add(&e.mask, n) // a mask by the op's contract
			case !onnx && n.OpType == "RotaryEmbedding" && n.Domain == "com.microsoft" && u.Index == 1,
				onnx && n.OpType == "RotaryEmbedding" && u.Index == 3:
				e.rotary = append(e.rotary, n)
			case !onnx:
				e.add(&e.other, n)
			case n.OpType == "Shape" || n.OpType == "Size":
				// only the shape is read
			case n.OpType == "Cast" || n.OpType == "CastLike":
				to := graph.DataType(n.AttrInt("to", 0))
				if n.OpType == "CastLike" {
					if u.Index != 0 {
						continue
					}
					if n.Input(1) != nil && n.Input(1).Type != nil {
						to = n.Input(1).Type.ElemType()
					}
				}
				switch {
				case to == graph.Bool:
					e.add(&e.mask, n)
				case to.IsFloat():
					if isFloat {
						pass()
					} else {
						for _, o := range n.Outputs() {
							walk(o, true, arith, depth+1)
						}
					}
				default:
					pass()
				}
			case (n.OpType == "Gather" || n.OpType == "GatherElements" || n.OpType == "GatherND") && u.Index == 1 && !float:
				if arith {
					e.arithGat = append(e.arithGat, n)
				} else {
					e.gathers = append(e.gathers, n)
				}
			case isFloat && n.OpType == "Concat":
				other := false
				for _, in := range n.Inputs() {
					if in != nil && in != v {
						if _, c := graph.ConstantValue(in); !c {
							other = true
						}
					}
				}
				if other {
					e.concat = append(e.concat, n)
					e.concatAx = append(e.concatAx, int(n.AttrInt("axis", 0)))
				} else {
					pass()
				}
			case keepsValues(n, u.Index):
				pass()
			case n.OpType == "CumSum" || n.OpType == "ReduceSum" || n.OpType == "Not" || n.OpType == "And" || n.OpType == "Or" || n.OpType == "Xor" ||
				(n.OpType == "Where" && u.Index == 0):
				e.add(&e.mask, n)
			case n.OpType == "Equal":
				if _, c := graph.ConstantValue(n.Input(1 - u.Index)); c {
					e.add(&e.mask, n) // compared with 0 or a pad id
				} else {
					e.add(&e.position, n)
				}
			case n.OpType == "Less" || n.OpType == "Greater" || n.OpType == "LessOrEqual" || n.OpType == "GreaterOrEqual":
				if _, c := graph.ConstantValue(n.Input(1 - u.Index)); c {
					e.add(&e.mask, n)
				} else {
					e.add(&e.position, n)
				}
			case n.OpType == "Range":
				e.rng = true
				e.add(&e.position, n)
			case n.OpType == "ReduceMax" || n.OpType == "ReduceMin" || n.OpType == "ArgMax" || n.OpType == "ArgMin":
				e.add(&e.position, n)
			case n.OpType == "Sub" && u.Index == 1 && isConstOne(n.Input(0)):
				e.add(&e.mask, n) // 1 - mask
			case n.OpType == "Mul" && isConstHuge(n.Input(1-u.Index)):
				e.add(&e.mask, n) // mask * finfo.min
			case float && (n.OpType == "Add" || n.OpType == "Sub") && comparedWithConstant(n.Output(0), 4):
				// Added to another mask and the sum compared with 0
				// (Hugging Face's padding_mask = causal_mask + mask; == 0).
				e.add(&e.mask, n)
			case float:
				e.add(&e.position, n) // arithmetic on the value as a number
			case isIntArith(n.OpType):
				e.add(&e.position, n)
				for _, o := range n.Outputs() {
					walk(o, float, true, depth+1)
				}
			default:
				e.add(&e.other, n)
			}
		}
	}
	walk(v, false, false, 0)
	return e
}

// comparedWithConstant reports whether v reaches, through ops that keep
// its values (up to depth of them), a comparison with a constant.
func comparedWithConstant(v *graph.Value, depth int) bool {
	if v == nil || depth < 0 {
		return false
	}
	for _, u := range v.Uses() {
		n := u.Node
		if !isONNX(n.Domain) {
			continue
		}
		switch n.OpType {
		case "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual":
			if _, c := graph.ConstantValue(n.Input(1 - u.Index)); c {
				return true
			}
		}
		if keepsValues(n, u.Index) {
			for _, o := range n.Outputs() {
				if comparedWithConstant(o, depth-1) {
					return true
				}
			}
		}
	}
	return false
}

// fusedPast reports whether input i of n is the past key or value of a
// fused attention op, and the axis that holds past positions.
func fusedPast(n *graph.Node, i int) (int, bool) {
	switch {
	case n.Domain == "com.microsoft" && (n.OpType == "GroupQueryAttention" || n.OpType == "SparseAttention") && (i == 3 || i == 4):
		return 2, true // [batch, kv_heads, past, head_size]
	case n.Domain == "com.microsoft" && (n.OpType == "MultiHeadAttention" || n.OpType == "DecoderMaskedMultiHeadAttention") && (i == 6 || i == 7):
		return 2, true
	case n.Domain == "com.microsoft" && n.OpType == "Attention" && i == 4:
		return 3, true // past [2, batch, heads, past, head_size]
	case isONNX(n.Domain) && n.OpType == "Attention" && (i == 4 || i == 5):
		return 2, true
	}
	return 0, false
}

// fusedMask reports whether input i of n is a mask by the op's contract
// (ContribOperators.md; ONNX's Attention, whose float masks are additive
// and so are only masks when they are bool).
func fusedMask(n *graph.Node, i int) bool {
	if isONNX(n.Domain) {
		return n.OpType == "Attention" && i == 3
	}
	if n.Domain != "com.microsoft" {
		return false
	}
	switch n.OpType {
	case "Attention", "DecoderMaskedMultiHeadAttention", "DecoderMaskedSelfAttention":
		return i == 3
	case "MultiHeadAttention":
		return i == 4
	}
	return false
}

// keepsValues reports whether input i of n passes its values through
// unchanged (moved, reshaped, repeated, cut).
func keepsValues(n *graph.Node, i int) bool {
	switch n.OpType {
	case "Identity", "Unsqueeze", "Squeeze", "Flatten", "Transpose", "Concat":
		return true
	case "Reshape", "Expand", "Tile", "Slice", "Split", "Gather", "GatherElements", "Pad":
		return i == 0
	}
	return false
}

func isIntArith(op string) bool {
	switch op {
	case "Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Clip", "Neg", "Abs":
		return true
	}
	return false
}

func constScalar(v *graph.Value) (float64, bool) {
	t, ok := graph.ConstantValue(v)
	if !ok || t.Len() != 1 {
		return 0, false
	}
	f, err := t.Float64s()
	if err != nil || len(f) != 1 {
		return 0, false
	}
	return f[0], true
}

func isConstOne(v *graph.Value) bool  { f, ok := constScalar(v); return ok && f == 1 }
func isConstHuge(v *graph.Value) bool { f, ok := constScalar(v); return ok && math.Abs(f) >= 1e4 }

// analyzeGraph reads roles, dimensions and bounded table reads from the
// graph alone (no run). Rows of tables come later, from probeTables.
func analyzeGraph(m *graph.Model) *Analysis {
	g := m.Graph
	a := &Analysis{model: m, feeds: kernels.FeedInputs(m), params: map[string]DimKind{}}
	a.d = computeDeps(g, a.feeds)
	for _, v := range a.feeds {
		info := InputInfo{Name: v.Name, v: v, Role: RoleUnknown}
		if v.Type != nil {
			info.dt = v.Type.ElemType()
		}
		info.DType = info.dt.String()
		dims, _ := v.Type.Shape()
		info.Dims = make([]DimSpec, len(dims))
		for i, d := range dims {
			info.Dims[i] = DimSpec{Kind: DimOther, Param: d.Param}
			if d.Known {
				info.Dims[i] = DimSpec{Kind: DimFixed, Size: int(d.Value)}
			}
		}
		info.ev = walkUses(g, v, info.dt.IsFloat())
		a.Inputs = append(a.Inputs, info)
	}
	for i := range a.Inputs {
		classify(&a.Inputs[i])
	}
	a.findReads()
	a.findSubgraphReads()
	a.OneRowChunks = oneRowChunks(g)
	return a
}

// oneRowChunks says why g runs several new tokens after a cache for one
// sequence only: a GroupQueryAttention with a past (its contract); "" when
// it has none.
func oneRowChunks(g *graph.Graph) string {
	for _, n := range g.Nodes() {
		if n.Domain == "com.microsoft" && n.OpType == "GroupQueryAttention" && n.Input(3) != nil {
			// group_query_attention_helper.h: "batch_size must be 1 when
			// sequence_length > 1 and past context is given".
			return fmt.Sprintf("%s runs several new tokens after a cache for one sequence only (ONNX Runtime's contract)", n)
		}
	}
	return ""
}

// classify decides the role of an input from its uses, before table
// sizes are known (index inputs are told apart later).
func classify(in *InputInfo) {
	defer func() { in.firm = in.Role != RoleUnknown && in.Role != RoleTableIndex }()
	e := in.ev
	rank := len(in.Dims)
	scalar := rank == 0 || (rank == 1 && in.Dims[0].Kind == DimFixed && in.Dims[0].Size == 1)
	switch {
	case in.dt.IsFloat():
		if len(e.scatter) > 0 && rank >= 2 && len(e.concat) == 0 {
			in.Role = RoleStaticCache
			in.Evidence = fmt.Sprintf("the cache %s writes into (axis %d)", e.scatter[0], e.scatterA[0])
			return
		}
		if len(e.mask) > 0 && len(e.concat) == 0 && rank >= 2 {
			in.Role = RoleAttentionMask
			in.Evidence = "float mask arithmetic: " + strings.Join(e.mask, ", ")
			return
		}
		if len(e.concat) > 0 && rank >= 2 {
			in.Role = RolePastKV
			in.Evidence = fmt.Sprintf("the past keys or values of %s (axis %d)", e.concat[0], e.concatAx[0])
			return
		}
		in.Role = RoleFeatures
		in.Evidence = "float data"
		return
	case in.dt != graph.Bool && !in.dt.IsInt():
		in.Evidence = fmt.Sprintf("element type %v", in.dt)
		return
	}
	switch {
	case len(e.writeIdx) > 0:
		in.Role = RoleWriteIndex
		in.Evidence = "write_indices of " + e.writeIdx[0].String()
	case len(e.kvLen) > 0:
		in.Role = RoleKVLength
		in.Evidence = "nonpad_kv_seqlen of " + e.kvLen[0].String()
	case scalar && (e.rng || len(e.position) > 0):
		in.Role = RolePastLength
		in.Evidence = "integer scalar used in " + strings.Join(e.position, ", ")
	case len(e.mask) > 0 && len(e.gathers) == 0 && len(e.rotary) == 0:
		in.Role = RoleAttentionMask
		in.Evidence = "mask arithmetic: " + strings.Join(e.mask, ", ")
	case len(e.rotary) > 0:
		in.Role = RolePositionIDs
		in.Evidence = "position input of " + e.rotary[0].String()
	case len(e.gathers) > 0:
		in.Role = RoleTableIndex
		in.Evidence = "indexes a table (" + e.gathers[0].String() + ")"
		if len(e.position) > 0 {
			in.Role = RolePositionIDs
			in.Evidence = "indexes a table and is used as a number (" + strings.Join(e.position, ", ") + ")"
		}
	case len(e.position) > 0 || len(e.arithGat) > 0:
		in.Role = RolePositionIDs
		in.Evidence = "used as a number: " + strings.Join(e.position, ", ")
	case in.dt == graph.Bool && len(e.mask) > 0:
		in.Role = RoleAttentionMask
		in.Evidence = "boolean mask: " + strings.Join(e.mask, ", ")
	default:
		in.Evidence = "no recognised use"
		if len(e.other) > 0 {
			in.Evidence += " (" + strings.Join(e.other, ", ") + ")"
		}
	}
}

// findReads lists the bounded table reads of the main graph.
func (a *Analysis) findReads() {
	g := a.model.Graph
	tokenGathers := map[*graph.Node]bool{}
	for _, in := range a.Inputs {
		if in.Role == RoleTableIndex {
			for _, n := range in.ev.gathers {
				tokenGathers[n] = true
			}
		}
	}
	for _, n := range g.Nodes() {
		if !isONNX(n.Domain) && !(n.Domain == "com.microsoft" && n.OpType == "RotaryEmbedding") {
			continue
		}
		var r *boundedRead
		switch {
		case n.OpType == "Gather" || n.OpType == "GatherElements":
			r = &boundedRead{node: n, data: n.Input(0), axis: int(n.AttrInt("axis", 0))}
			if !a.d.any[n.Input(1)].any() {
				continue
			}
		case n.OpType == "GatherND":
			r = &boundedRead{node: n, data: n.Input(0), axis: int(n.AttrInt("batch_dims", 0))}
			if !a.d.any[n.Input(1)].any() {
				continue
			}
		case n.OpType == "Slice":
			r = &boundedRead{node: n, data: n.Input(0), axis: -1, slice: true}
			if !a.d.any[n.Input(1)].any() && !a.d.any[n.Input(2)].any() {
				continue
			}
		case n.OpType == "RotaryEmbedding" && n.Domain == "com.microsoft":
			r = &boundedRead{node: n, data: n.Input(2), axis: 0}
		case n.OpType == "RotaryEmbedding":
			r = &boundedRead{node: n, data: n.Input(1), axis: 0}
			if n.Input(3) == nil { // positions are 0..S-1: the cache is read up to S
				r.axis = 1
			}
		default:
			continue
		}
		if r.data == nil || a.d.vals[r.data].any() {
			continue // a computed value, not a stored table
		}
		if a.d.any[r.data].any() && !r.slice && n.OpType != "GatherElements" && !bigEnough(r.data) {
			continue // indexing a shape vector
		}
		r.token = tokenGathers[n]
		a.reads = append(a.reads, r)
	}
}

// findSubgraphReads adds the reads of constant tables inside If, Loop
// and Scan bodies at indices that are not constant (their sizes are read
// from the constants: probes cannot expose subgraph values).
func (a *Analysis) findSubgraphReads() {
	g := a.model.Graph
	g.Walk(func(n *graph.Node) {
		if n.Graph() == g || !isONNX(n.Domain) {
			return
		}
		var data *graph.Value
		var idx []*graph.Value
		axis := -1
		switch n.OpType {
		case "Gather", "GatherElements":
			data, idx, axis = n.Input(0), []*graph.Value{n.Input(1)}, int(n.AttrInt("axis", 0))
		case "Slice":
			data, idx = n.Input(0), []*graph.Value{n.Input(1), n.Input(2)}
			if ax, ok := graph.ConstantValue(n.Input(3)); ok {
				if v, err := ax.Int64s(); err == nil && len(v) == 1 {
					axis = int(v[0])
				}
			}
		default:
			return
		}
		t, ok := graph.ConstantValue(data)
		if !ok || len(t.Dims()) < 2 {
			return
		}
		dims := t.Dims()
		if axis < 0 {
			axis += len(dims)
		}
		if axis < 0 || axis >= len(dims) {
			return
		}
		varies := false
		for _, v := range idx {
			if _, c := graph.ConstantValue(v); !c && v != nil {
				varies = true
			}
		}
		if !varies {
			return
		}
		r := &boundedRead{node: n, data: data, axis: axis, slice: n.OpType == "Slice", static: true}
		r.rows = [2]int{int(dims[axis]), int(dims[axis])}
		if kt, err := kernels.FromGraph(t); err == nil {
			r.value = kt
		}
		a.reads = append(a.reads, r)
	})
}

// bigEnough reports whether v may be a table rather than a shape vector:
// following first inputs back, it comes from a constant of rank 2 or more
// (or a declared shape of rank 2 or more), not from a Shape node.
func bigEnough(v *graph.Value) bool {
	for depth := 0; v != nil && depth < 16; depth++ {
		if t, ok := graph.ConstantValue(v); ok {
			return len(t.Dims()) >= 2
		}
		if dims, ok := v.Type.Shape(); ok {
			return len(dims) >= 2
		}
		p := v.Producer()
		if p == nil {
			return true
		}
		switch p.OpType {
		case "Shape", "Size", "Range":
			return false
		}
		v = p.Input(0)
	}
	return true
}

// finishRoles tells index inputs apart once table sizes are known: the
// input that reads the largest table holds token ids; another input whose
// table is larger than a segment table and whose gathered rows rotate
// another value, or that is bigger than 16 rows, holds positions.
func (a *Analysis) finishRoles() {
	var idx []*InputInfo
	for i := range a.Inputs {
		in := &a.Inputs[i]
		if in.Role == RoleTableIndex || in.Role == RolePositionIDs || in.Role == RoleTokenIDs {
			for _, n := range in.ev.gathers {
				if r := a.readOf(n); r != nil && r.rows[0] > 0 && r.rows[0] == r.rows[1] {
					if in.Rows == 0 || r.rows[0] < in.Rows {
						in.Rows = r.rows[0]
					}
				}
			}
		}
		if in.Role == RoleTableIndex {
			idx = append(idx, in)
		}
	}
	// Gathered rows that multiply a value which does not depend on this
	// input are rotation factors (a cos/sin cache read at positions).
	var rest []*InputInfo
	for _, in := range idx {
		if n := a.rotates(in); n != nil {
			in.Role, in.firm = RolePositionIDs, true
			in.Evidence = "indexes a table whose rows multiply other values (" + n.String() + ")"
			continue
		}
		rest = append(rest, in)
	}
	haveTokens := false
	for _, in := range a.Inputs {
		haveTokens = haveTokens || in.Role == RoleTokenIDs
	}
	if len(rest) > 0 && !haveTokens {
		// Token ids index the table whose rows some output counts (the
		// logits over the vocabulary), else the largest table; equal
		// evidence is a tie, which the name breaks, weakly.
		vocab := a.outputSizes()
		key := func(in *InputInfo) [2]int {
			k := [2]int{0, in.Rows}
			if vocab[in.Rows] {
				k[0] = 1
			}
			return k
		}
		sort.SliceStable(rest, func(i, j int) bool {
			ki, kj := key(rest[i]), key(rest[j])
			if ki != kj {
				return ki[0] > kj[0] || (ki[0] == kj[0] && ki[1] > kj[1])
			}
			return !looksLike(rest[i].Name, "pos") && looksLike(rest[j].Name, "pos")
		})
		tok := rest[0]
		tok.Role = RoleTokenIDs
		tok.Evidence = fmt.Sprintf("indexes the largest table (%d rows)", tok.Rows)
		if key(tok)[0] == 1 {
			tok.Evidence = fmt.Sprintf("indexes a table of %d rows, the size of an output's last axis (the vocabulary)", tok.Rows)
		}
		tie := len(rest) > 1 && key(rest[1]) == key(tok)
		tok.tie = tie
		tokTables := a.tablesOf(tok)
		for _, in := range rest[1:] {
			if t := a.sharedTable(in, tokTables); t != nil {
				// An encoder-decoder's decoder_input_ids read the table
				// its input_ids read (one token table, shared).
				in.Role = RoleTokenIDs
				in.Evidence = fmt.Sprintf("indexes the table %s that %s indexes (a shared token table)", t.Name, tok.Name)
				continue
			}
			in.tie = key(in) == key(tok)
			if in.Rows > 16 && !looksLike(in.Name, "type") && !looksLike(in.Name, "segment") {
				in.Role = RolePositionIDs
				in.Evidence = fmt.Sprintf("indexes a second table of %d rows (more than a segment table)", in.Rows)
			}
		}
	}

}

// positionBounds sets the largest position each position input may hold:
// the rows of a stored table it indexes (or of a fused op's cache), less
// one.
func (a *Analysis) positionBounds() {
	// Reads by token ids are vocabulary lookups, not position bounds.
	for _, r := range a.reads {
		for _, in := range a.Inputs {
			if slices.Contains(in.ev.gathers, r.node) {
				r.token = in.Role == RoleTokenIDs || in.Role == RoleTableIndex
			}
		}
		if r.token || r.rows[0] != r.rows[1] {
			r.value = nil
		}
	}
	for i := range a.Inputs {
		in := &a.Inputs[i]
		if in.Role != RolePositionIDs {
			continue
		}
		for _, n := range append(slices.Clone(in.ev.gathers), in.ev.rotary...) {
			r := a.readOf(n)
			if r == nil || r.rows[0] == 0 || r.rows[0] != r.rows[1] {
				continue
			}
			if in.MaxPosition == 0 || r.rows[0]-1 < in.MaxPosition {
				in.MaxPosition = r.rows[0] - 1
			}
		}
	}
}

// outputSizes are the sizes of the last axis of the graph's outputs (the
// declared ones).
func (a *Analysis) outputSizes() map[int]bool {
	out := map[int]bool{}
	for _, v := range a.model.Graph.Outputs {
		if dims, ok := v.Type.Shape(); ok && len(dims) > 0 && dims[len(dims)-1].Known {
			out[int(dims[len(dims)-1].Value)] = true
		}
	}
	return out
}

func looksLike(name, part string) bool { return strings.Contains(strings.ToLower(name), part) }

// tablesOf is the tables index input in gathers from.
func (a *Analysis) tablesOf(in *InputInfo) []*graph.Value {
	var out []*graph.Value
	for _, n := range in.ev.gathers {
		if r := a.readOf(n); r != nil && r.data != nil && !slices.Contains(out, r.data) {
			out = append(out, r.data)
		}
	}
	return out
}

// sharedTable is a table in gathers from that is one of tables, or nil.
func (a *Analysis) sharedTable(in *InputInfo, tables []*graph.Value) *graph.Value {
	for _, t := range a.tablesOf(in) {
		if slices.Contains(tables, t) {
			return t
		}
	}
	return nil
}

func (a *Analysis) readOf(n *graph.Node) *boundedRead {
	for _, r := range a.reads {
		if r.node == n {
			return r
		}
	}
	return nil
}

// rotates returns the node where rows gathered by in multiply a value
// that does not depend on in (and is not a constant), or nil.
func (a *Analysis) rotates(in *InputInfo) *graph.Node {
	idx := slices.Index(a.feeds, in.v)
	for _, gn := range in.ev.gathers {
		seen := map[*graph.Value]bool{}
		var found *graph.Node
		var walk func(v *graph.Value, depth int)
		walk = func(v *graph.Value, depth int) {
			if found != nil || seen[v] || depth > 8 {
				return
			}
			seen[v] = true
			for _, u := range v.Uses() {
				n := u.Node
				switch {
				case n.OpType == "Mul" && isONNX(n.Domain):
					o := n.Input(1 - u.Index)
					if _, c := graph.ConstantValue(o); !c && !a.d.vals[o].has(idx) && a.d.vals[o].any() && !a.masksOnly(a.d.vals[o]) {
						found = n
						return
					}
				case keepsValues(n, u.Index) || n.OpType == "Cast" || n.OpType == "Neg":
					for _, o := range n.Outputs() {
						walk(o, depth+1)
					}
				}
			}
		}
		walk(gn.Output(0), 0)
		if found != nil {
			return found
		}
	}
	return nil
}

// masksOnly reports whether the inputs of deps are all attention masks:
// rows multiplied by a mask are zeroed at padding (ESM's embeddings), not
// turned by a cos/sin read at positions.
func (a *Analysis) masksOnly(deps bits) bool {
	for i, f := range a.feeds {
		if !deps.has(i) {
			continue
		}
		if in := a.input(f.Name); in == nil || in.Role != RoleAttentionMask {
			return false
		}
	}
	return true
}

// assignDims gives every input dimension a kind.
func (a *Analysis) assignDims() {
	setParam := func(p string, k DimKind) {
		if p != "" {
			if _, ok := a.params[p]; !ok {
				a.params[p] = k
			}
		}
	}
	var seqParam string
	hasSeqInput := false
	// Token-like inputs [batch, sequence] first.
	for i := range a.Inputs {
		in := &a.Inputs[i]
		switch in.Role {
		case RoleTokenIDs, RoleTableIndex, RolePositionIDs:
		default:
			continue
		}
		if len(in.Dims) == 2 {
			hasSeqInput = true
			a.setDim(in, 0, DimBatch)
			a.setDim(in, 1, DimSeq)
			setParam(in.Dims[0].Param, DimBatch)
			setParam(in.Dims[1].Param, DimSeq)
			if seqParam == "" {
				seqParam = in.Dims[1].Param
			}
		}
	}
	for i := range a.Inputs {
		in := &a.Inputs[i]
		if in.Role != RolePastKV {
			continue
		}
		a.HasCache = true
		ax := in.ev.concatAx[0]
		if ax < 0 {
			ax += len(in.Dims)
		}
		if ax >= 0 && ax < len(in.Dims) {
			a.setDim(in, ax, DimPast)
			setParam(in.Dims[ax].Param, DimPast)
		}
		if len(in.Dims) > 0 {
			a.setDim(in, 0, DimBatch)
			setParam(in.Dims[0].Param, DimBatch)
		}
	}
	for i := range a.Inputs {
		in := &a.Inputs[i]
		switch in.Role {
		case RoleStaticCache:
			a.HasCache = true
			ax := in.ev.scatterA[0]
			if ax < 0 {
				ax += len(in.Dims)
			}
			if ax > 0 && ax < len(in.Dims) {
				a.setDim(in, ax, DimCapacity)
				setParam(in.Dims[ax].Param, DimCapacity)
			}
		case RoleWriteIndex, RoleKVLength:
		default:
			continue
		}
		if len(in.Dims) > 0 {
			a.setDim(in, 0, DimBatch)
			setParam(in.Dims[0].Param, DimBatch)
		}
	}
	for i := range a.Inputs {
		in := &a.Inputs[i]
		if in.Role != RoleAttentionMask || len(in.Dims) < 2 {
			continue
		}
		a.setDim(in, 0, DimBatch)
		setParam(in.Dims[0].Param, DimBatch)
		last := len(in.Dims) - 1
		p := in.Dims[last].Param
		k := DimSeq
		switch {
		case p != "" && a.params[p] != "":
			k = a.params[p]
		case a.HasCache && (p != seqParam || p == ""):
			k = DimTotal // a mask over cached and new tokens
		case !hasSeqInput:
			hasSeqInput = true
		}
		a.setDim(in, last, k)
		setParam(p, k)
		if len(in.Dims) == 4 {
			a.setDim(in, 2, DimSeq)
		}
	}
	// Float inputs without a token input carry the sequence themselves
	// ([batch, sequence, features]).
	for i := range a.Inputs {
		in := &a.Inputs[i]
		if in.Role != RoleFeatures || len(in.Dims) == 0 {
			continue
		}
		a.setDim(in, 0, DimBatch)
		setParam(in.Dims[0].Param, DimBatch)
		if !hasSeqInput && len(in.Dims) == 3 {
			hasSeqInput = true
			a.setDim(in, 1, DimSeq)
			setParam(in.Dims[1].Param, DimSeq)
		}
	}
	a.imageDims()
	for i := range a.Inputs {
		in := &a.Inputs[i]
		for j := range in.Dims {
			d := &in.Dims[j]
			if d.Kind == DimOther {
				if k, ok := a.params[d.Param]; ok && d.Param != "" {
					d.Kind = k
				}
			}
		}
	}
	for _, in := range a.Inputs {
		if (in.Role == RoleTokenIDs || in.Role == RoleTableIndex || in.Role == RolePositionIDs) && len(in.Dims) == 2 {
			if d := in.v.Type; d != nil {
				if dims, ok := d.Shape(); ok && dims[1].Known {
					a.FixedSeq = int(dims[1].Value)
				}
			}
		}
	}
}

// fixedBatch is the batch of a model that declares it of a fixed size:
// assignDims takes axis 0 of a [batch, sequence] position input as the
// batch but leaves a size the model fixes as it is (setDim). That axis is
// still the batch when no input has an open batch axis and every input
// whose axis 0 assignDims takes as the batch agrees on its size: token
// ids and indices [batch, sequence], masks, past keys and values, static
// caches, write indices, valid key counts and float data [batch,
// sequence, features] (float data of rank 2 may be a table the model is
// given, as cos/sin caches fed as inputs are: it says nothing). It is 0
// when some position input is not [batch, sequence] with a fixed batch
// of two or more, or when an input disagrees.
func (a *Analysis) fixedBatch() int {
	if a.hasDim(DimBatch) {
		return 0
	}
	n := 0
	for i := range a.Inputs {
		in := &a.Inputs[i]
		if in.Role != RolePositionIDs {
			continue
		}
		if len(in.Dims) != 2 || in.Dims[0].Kind != DimFixed || in.Dims[0].Size < 2 || (n > 0 && in.Dims[0].Size != n) {
			return 0
		}
		n = in.Dims[0].Size
	}
	if n == 0 {
		return 0
	}
	for i := range a.Inputs {
		in := &a.Inputs[i]
		if batchLed(in) && (in.Dims[0].Kind != DimFixed || in.Dims[0].Size != n) {
			return 0
		}
	}
	return n
}

// batchLed reports whether assignDims takes axis 0 of in as the batch
// (position ids excepted).
func batchLed(in *InputInfo) bool {
	r := len(in.Dims)
	switch in.Role {
	case RoleTokenIDs, RoleTableIndex:
		return r == 2
	case RolePastKV, RoleStaticCache, RoleWriteIndex, RoleKVLength:
		return r > 0
	case RoleAttentionMask:
		return r >= 2
	case RoleFeatures:
		return r == 3
	}
	return false
}

// rowAxis reports whether axis 0 of in holds the rows of a batch: an open
// batch axis, or the fixed batch of a model that declares it so
// (fixedBatch).
func (a *Analysis) rowAxis(in *InputInfo) bool {
	if len(in.Dims) == 0 {
		return false
	}
	if in.Dims[0].Kind == DimBatch {
		return true
	}
	return a.fixedRows > 0 && in.Dims[0].Kind == DimFixed && in.Dims[0].Size == a.fixedRows &&
		(in.Role == RolePositionIDs || batchLed(in))
}

// setDim sets the kind of axis i of in unless the model fixes its size.
func (a *Analysis) setDim(in *InputInfo, i int, k DimKind) {
	if i < len(in.Dims) && in.Dims[i].Kind != DimFixed {
		in.Dims[i].Kind = k
	}
}

// input returns the analysis of the named input.
func (a *Analysis) input(name string) *InputInfo {
	for i := range a.Inputs {
		if a.Inputs[i].Name == name {
			return &a.Inputs[i]
		}
	}
	return nil
}
