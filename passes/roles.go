package passes

import (
	"github.com/onnxpe/onnxpe/graph"
)

// Role is what a graph input carries, as far as detection needs to know:
// it decides the values probes give it.
type Role string

// Input roles, read from how each input is used (never from its name).
const (
	// RoleTokens: integer ids gathered from the largest table (the token
	// embedding).
	RoleTokens Role = "input_ids"
	// RoleTokenType: integer ids gathered from a table of a few rows.
	RoleTokenType Role = "token_type_ids"
	// RolePositions: integer positions (gathered from a position table or
	// a cos/sin cache, or turned into angles).
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
)

// roles holds the input roles and which values carry activations (depend
// on the content of the tokens, through the content inputs).
type roles struct {
	of  map[*graph.Value]Role
	act map[*graph.Value]bool
}

// Role is the role of a main-graph input.
func (w *Work) Role(v *graph.Value) Role { return w.roles.of[v] }

// IsAct reports whether v carries activations: it depends on the tokens'
// content (token ids, content inputs) and not only on positions, shapes,
// masks and constants.
func (w *Work) IsAct(v *graph.Value) bool { return v != nil && w.roles.act[v] }

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
// same indices.
var indexPreserving = map[string]bool{"Reshape": true, "Unsqueeze": true, "Squeeze": true, "Cast": true,
	"Flatten": true, "Expand": true, "Identity": true, "Tile": true, "Slice": true}

// reachUses calls f for every (node, input index) reading v directly or
// through index-preserving ops.
func reachUses(v *graph.Value, f func(n *graph.Node, i int)) {
	seen := map[*graph.Value]bool{}
	var walk func(v *graph.Value, depth int)
	walk = func(v *graph.Value, depth int) {
		if seen[v] || depth > 8 {
			return
		}
		seen[v] = true
		for _, u := range v.Uses() {
			f(u.Node, u.Index)
			if indexPreserving[u.Node.OpType] && u.Index == 0 && isONNX(u.Node) {
				for _, o := range u.Node.Outputs() {
					walk(o, depth+1)
				}
			}
		}
	}
	walk(v, 0)
}

func (w *Work) findRoles() *roles {
	r := &roles{of: map[*graph.Value]Role{}, act: map[*graph.Value]bool{}}
	ins := w.Inputs()
	// Tables gathered by each integer input.
	rows := map[*graph.Value]int64{}
	angle := map[*graph.Value]bool{}
	var batchSym Dim = unknownDim
	for _, v := range ins {
		dt := w.ElemType(v)
		s := w.Shape(v)
		if isIntType(dt) {
			if s.Ranked && len(s.Dims) >= 2 && s.Dims[0].IsSym() && batchSym == unknownDim {
				batchSym = s.Dims[0]
			}
			reachUses(v, func(n *graph.Node, i int) {
				switch {
				case n.OpType == "ATen" && n.AttrString("operator", "") == "embedding" && i == 1:
					// PyTorch's embedding kept as an ATen op (ORTModule).
					if t := w.Shape(n.Input(0)); t.Rank() == 2 && t.Dims[0].Known() {
						rows[v] = max(rows[v], int64(t.Dims[0]))
					}
				case n.OpType == "Gather" && i == 1:
					t := w.Shape(n.Input(0))
					if t.Rank() == 2 && t.Dims[0].Known() && isFloatType(w.ElemType(n.Input(0))) {
						rows[v] = max(rows[v], int64(t.Dims[0]))
					} else if t.Rank() >= 2 {
						angle[v] = true // a cos/sin cache or a table of unknown size
					}
				case n.OpType == "GatherElements" && i == 1:
					angle[v] = true
				case n.OpType == "RotaryEmbedding" && (n.Domain == "com.microsoft" && i == 1 || isONNX(n) && i == 3):
					angle[v] = true // the position_ids of the fused rotation
				case n.OpType == "EmbedLayerNormalization":
					switch i {
					case 0:
						rows[v] = 1 << 40
					case 1:
						rows[v] = max(rows[v], 1)
					default:
						angle[v] = true
					}
				}
			})
		}
	}
	// The token ids gather the table as wide as the logits the model
	// predicts (the vocabulary); without such an output, the largest.
	var tokens *graph.Value
	vocab := w.logitWidths()
	for v, n := range rows {
		if vocab[n] && (tokens == nil || !vocab[rows[tokens]] || w.inputIndex(v) < w.inputIndex(tokens)) {
			tokens = v
		}
	}
	if tokens == nil {
		for v, n := range rows {
			if tokens == nil || n > rows[tokens] || n == rows[tokens] && w.inputIndex(v) < w.inputIndex(tokens) {
				tokens = v
			}
		}
	}
	// A table gathered by positions the graph computes itself leaves the
	// other gathered inputs the role of token types.
	inGraphPositions := w.gathersComputedPositions()
	for _, v := range ins {
		dt := w.ElemType(v)
		s := w.Shape(v)
		switch {
		case v == tokens:
			r.of[v] = RoleTokens
		case isIntType(dt) && rows[v] > 0 && (rows[v] < 8 || inGraphPositions && !angle[v] && !w.feedsAngles(v)):
			r.of[v] = RoleTokenType
		case isIntType(dt) && (rows[v] >= 8 || angle[v] || w.feedsAngles(v)):
			r.of[v] = RolePositions
		case isIntType(dt) || dt == graph.Bool:
			r.of[v] = RoleMask
		case isFloatType(dt) && s.Rank() >= 3:
			r.of[v] = RoleContent
		case isFloatType(dt) && s.Rank() == 2 && s.Dims[0] == batchSym && batchSym != unknownDim:
			r.of[v] = RoleMask
		default:
			r.of[v] = RoleParam
		}
	}
	w.roles = r
	w.markAct(w.M.Graph)
	return r
}

func (w *Work) inputIndex(v *graph.Value) int {
	for i, x := range w.M.Graph.Inputs {
		if x == v {
			return i
		}
	}
	return -1
}

// feedsAngles reports whether integer input v is cast to a float type and
// multiplied (positions times frequencies), through layout changes.
func (w *Work) feedsAngles(v *graph.Value) bool {
	found := false
	seen := map[*graph.Value]bool{}
	var walk func(v *graph.Value, float bool, depth int)
	walk = func(v *graph.Value, float bool, depth int) {
		if seen[v] || depth > 12 || found {
			return
		}
		seen[v] = true
		for _, u := range v.Uses() {
			n := u.Node
			switch {
			case n.OpType == "Cast":
				walk(n.Output(0), isFloatType(graph.DataType(n.AttrInt("to", 0))), depth+1)
			case layoutOps[n.OpType] || n.OpType == "Slice" || n.OpType == "Gather" && u.Index == 0:
				if u.Index == 0 {
					walk(n.Output(0), float, depth+1)
				}
			case float && (n.OpType == "MatMul" || n.OpType == "Mul" || n.OpType == "Einsum" || n.OpType == "Sin" || n.OpType == "Cos" || n.OpType == "Div"):
				found = true
			}
		}
	}
	walk(v, false, 0)
	return found
}

func isFloatType(dt graph.DataType) bool {
	switch dt {
	case graph.Float, graph.Double, graph.Float16, graph.BFloat16:
		return true
	}
	return false
}

// markAct propagates the activation flag forward through g (and its
// subgraphs). Shape and Size outputs never carry activations.
func (w *Work) markAct(g *graph.Graph) {
	r := w.roles
	for _, v := range g.Inputs {
		if role := r.of[v]; role == RoleTokens || role == RoleContent {
			r.act[v] = true
		}
	}
	for _, n := range g.Nodes() {
		if n.OpType == "Shape" || n.OpType == "Size" {
			continue
		}
		act := false
		for _, v := range n.Inputs() {
			if r.act[v] {
				act = true
			}
		}
		if sgs := n.Subgraphs(); len(sgs) > 0 {
			for _, sg := range sgs {
				// Loop-carried inputs take the flags of the node's inputs.
				if n.OpType == "Loop" {
					for i, bi := range sg.Inputs {
						if i >= 2 && r.act[n.Input(i)] {
							r.act[bi] = true
						}
					}
				}
				w.markAct(sg)
				for _, o := range sg.Outputs {
					if r.act[o] {
						act = true
					}
				}
			}
		}
		if act {
			for _, o := range n.Outputs() {
				r.act[o] = true
			}
		}
	}
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
			if n.OpType != "Add" && !layoutOps[n.OpType] {
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
		if found || n.OpType != "Gather" || !isONNX(n) {
			return
		}
		t := w.Shape(n.Input(0))
		if t.Rank() != 2 || !isFloatType(w.ElemType(n.Input(0))) || w.IsConst(n.Input(1)) || w.Shape(n.Input(1)).Rank() < 1 {
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
