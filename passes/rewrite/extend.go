package rewrite

import (
	"cmp"
	"errors"
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/work"
	"math"
	"slices"
	"strings"
)

// Methods of the extension (ExtendOptions.Method).
const (
	MethodLinear       = "linear"
	MethodNTK          = "ntk"
	MethodDynamicNTK   = "dynamic-ntk"
	MethodYaRN         = "yarn"
	MethodLlama3       = "llama3"
	MethodHierarchical = "hierarchical"
	// MethodOwnFormula is what the report names the extension of tables
	// whose values follow a formula (sinusoidal tables, ALiBi bias
	// constants, masks, 0, 1, 2, ... buffers): the formula measured from
	// the model, continued.
	MethodOwnFormula = "own_formula"
)

// RoPEMethods are the scaling rules of RoPE that ExtendOptions.Method
// takes, in the order help texts list them.
var RoPEMethods = []string{MethodLinear, MethodNTK, MethodDynamicNTK, MethodYaRN, MethodLlama3}

// Values of ExtendOptions.ReplaceScaling.
const (
	// ReplaceScaling drops the rule the model has (its frequencies are
	// recomputed from the fitted base) and applies the new one.
	ReplaceScaling = "replace"
	// ComposeScaling applies the new rule to the frequencies the model
	// has, scaled as they are.
	ComposeScaling = "compose"
)

// Published defaults of the rules (Hugging Face transformers'
// modeling_rope_utils).
const (
	DefaultLowFreqFactor  = 1.0
	DefaultHighFreqFactor = 4.0
	DefaultBetaFast       = 32.0
	DefaultBetaSlow       = 1.0
	DefaultAlpha          = 0.4
)

// ExtendOptions are the flags of onnxpe extend.
type ExtendOptions struct {
	// To is the new maximum number of positions (N).
	To int
	// Method is the RoPE scaling rule (RoPEMethods) or hierarchical for
	// learned tables; "" takes hierarchical for learned tables and is
	// refused for RoPE.
	Method string
	// Factor of the RoPE rule; 0 takes To / the original maximum.
	Factor float64
	// OriginalMax is the number of positions the model was trained for;
	// 0 takes what the model says (its stored table, its rule's
	// original_max_positions).
	OriginalMax int
	// Rule parameters; 0 takes the published default.
	LowFreqFactor, HighFreqFactor float64
	BetaFast, BetaSlow            float64
	AttentionFactor               float64
	// ReplaceScaling says how to combine the new rule with one the model
	// has (ReplaceScaling, ComposeScaling); "" refuses such a model.
	ReplaceScaling string
	// Alpha of the hierarchical decomposition; 0 takes DefaultAlpha.
	Alpha float64
}

// ErrExtend marks an extension the request or the model does not allow: a
// length below the model's maximum, a method that does not fit the scheme,
// a factor ≤ 1, a model that already has a scaling rule. The command
// line says it in one line and exits 2.
var ErrExtend = errors.New("cannot extend")

func ExtendErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrExtend, fmt.Sprintf(format, args...))
}

// ExtendReport is what onnxpe extend prints: the old and new maximum
// length, and per encoding the rule, its parameters and what changed
// where.
type ExtendReport struct {
	// OldMax is the largest number of positions the model supported (nil
	// when nothing in the graph bounds them); NewMax is N.
	OldMax *int `json:"old_max_positions"`
	NewMax int  `json:"new_max_positions"`
	// OldMaxFrom says where OldMax comes from.
	OldMaxFrom string        `json:"old_max_from"`
	Items      []*ExtendItem `json:"encodings"`
	// Bounded are the other constants read at positions that were
	// enlarged (causal masks, 0, 1, 2, ... buffers).
	Bounded []ExtendEdit `json:"other_constants,omitempty"`
	Notes   []string     `json:"notes,omitempty"`
}

// Changed reports whether the extension changed the model.
func (r *ExtendReport) Changed() bool {
	if len(r.Bounded) > 0 {
		return true
	}
	for _, it := range r.Items {
		if len(it.Edits) > 0 {
			return true
		}
	}
	return false
}

// ExtendItem is the extension of one finding.
type ExtendItem struct {
	Scheme string `json:"scheme"`
	Layers []int  `json:"layers"`
	// Form is how the model holds the encoding: computed (frequencies in
	// the graph), stored (tables), fused (caches of fused ops), table.
	Form string `json:"form"`
	// Method is the rule applied (RoPEMethods, hierarchical, own_formula)
	// or "none" when nothing needed to change.
	Method string `json:"method"`
	// Params are the rule's parameters as applied.
	Params map[string]any `json:"params"`
	OldMax *int           `json:"old_max_positions"`
	Edits  []ExtendEdit   `json:"edits"`
	Notes  []string       `json:"notes,omitempty"`

	// Expect are the params the audit of the extended model must report
	// (nil: not checked): the scheme's params with the new rule.
	Expect passes.Params `json:"-"`
	// Rule is the rule applied when it has a published formula the
	// extension is checked against (RoPE's scaling rules), else nil.
	Rule ExtendRule `json:"-"`
	// OldMaxFrom says where OldMax comes from.
	OldMaxFrom string `json:"-"`
	// Finding is the finding extended; Plan what its scheme's extension
	// keeps between planning and applying.
	Finding *passes.Finding `json:"-"`
	Plan    any             `json:"-"`
}

// ExtendRule is a rule an extension applies that has a published formula:
// the extended model is checked against a reference built from it, and
// the audit of the extended model must read it back.
type ExtendRule interface {
	// String names the rule and its parameters.
	String() string
	// Dynamic reports whether the rule changes with the length of each
	// call; OriginalLength is the length it changes at.
	Dynamic() bool
	OriginalLength() int
	// Equivalent reports whether params the audit reads describe the same
	// encoding as the rule (settings the graph cannot tell apart).
	Equivalent(got passes.Params) bool
}

// ExtendEdit is one change of the model: where (a node, an initializer) and
// what.
type ExtendEdit struct {
	Where string `json:"where"`
	What  string `json:"what"`
}

func (it *ExtendItem) Edit(where, format string, args ...any) {
	it.Edits = append(it.Edits, ExtendEdit{Where: where, What: fmt.Sprintf(format, args...)})
}

func (it *ExtendItem) Note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if !slices.Contains(it.Notes, s) {
		it.Notes = append(it.Notes, s)
	}
}

// Extended is the result of ExtendModel.
type Extended struct {
	// M is the extended model; the caller's model is not changed.
	M      *graph.Model
	Report *ExtendReport
	// Audit is the audit of the original model.
	Audit *passes.Report
	Opts  ExtendOptions

	Ctx     *passes.Context
	R       *Rewrite
	Changed []*graph.Value // constants replaced or enlarged
	Widened []Widened      // the other constants read at positions, enlarged
}

// widened is a constant widenBounded enlarged: its original name and new
// tensor.
type Widened struct {
	Name string
	T    *graph.Tensor
}

func (o *ExtendOptions) Validate() error {
	switch {
	case o.To < 2:
		return ExtendErr("--to must be at least 2, not %d", o.To)
	case o.Factor != 0 && !(o.Factor > 1):
		return ExtendErr("--factor must be larger than 1, not %g", o.Factor)
	case o.OriginalMax < 0:
		return ExtendErr("--original-max-positions must be positive")
	case o.Alpha != 0 && (!(o.Alpha > 0 && o.Alpha < 1) || o.Alpha == 0.5):
		return ExtendErr("--alpha must lie in (0, 1) and differ from 0.5 (at 0.5 position (i, j) and (j, i) get the same vector), not %g", o.Alpha)
	case o.LowFreqFactor < 0 || o.HighFreqFactor < 0 || o.BetaFast < 0 || o.BetaSlow < 0 || o.AttentionFactor < 0:
		return ExtendErr("rule parameters must be positive")
	case o.ReplaceScaling != "" && o.ReplaceScaling != ReplaceScaling && o.ReplaceScaling != ComposeScaling:
		return ExtendErr("--replace-scaling must be %s or %s, not %q", ReplaceScaling, ComposeScaling, o.ReplaceScaling)
	}
	if o.Method != "" && o.Method != MethodHierarchical && !slices.Contains(RoPEMethods, o.Method) {
		return ExtendErr("unknown --method %q (methods: %s, %s)", o.Method, strings.Join(RoPEMethods, ", "), MethodHierarchical)
	}
	rope := slices.Contains(RoPEMethods, o.Method)
	if !rope && (o.Factor != 0 || o.LowFreqFactor != 0 || o.HighFreqFactor != 0 || o.BetaFast != 0 || o.BetaSlow != 0 || o.AttentionFactor != 0 || o.ReplaceScaling != "") {
		return ExtendErr("--factor, --replace-scaling and the rule parameters apply to the RoPE methods (%s)", strings.Join(RoPEMethods, ", "))
	}
	if o.Method != MethodLlama3 && (o.LowFreqFactor != 0 || o.HighFreqFactor != 0) {
		return ExtendErr("--low-freq-factor and --high-freq-factor are parameters of --method llama3")
	}
	if o.Method != MethodYaRN && (o.BetaFast != 0 || o.BetaSlow != 0 || o.AttentionFactor != 0) {
		return ExtendErr("--beta-fast, --beta-slow and --attention-factor are parameters of --method yarn")
	}
	if o.Method != MethodHierarchical && o.Alpha != 0 {
		return ExtendErr("--alpha is the parameter of --method hierarchical")
	}
	if o.Method == MethodLlama3 {
		lo, hi := CmpOr(o.LowFreqFactor, DefaultLowFreqFactor), CmpOr(o.HighFreqFactor, DefaultHighFreqFactor)
		if hi <= lo {
			return ExtendErr("--high-freq-factor (%g) must be larger than --low-freq-factor (%g)", hi, lo)
		}
	}
	if o.Method == MethodYaRN && CmpOr(o.BetaFast, DefaultBetaFast) < CmpOr(o.BetaSlow, DefaultBetaSlow) {
		return ExtendErr("--beta-fast must not be smaller than --beta-slow")
	}
	return nil
}

// cmpOr is v, or def when v is 0.
func CmpOr(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// extender is how one scheme is extended: the --method values it takes
// (absent: what the refusal says when the model has no finding of the
// scheme), the check of the request a model with the scheme refuses
// before anything else (nil: none), the plan of one finding (the request
// checked against it) and its application to the copy (nil: nothing to
// change).
type Extender struct {
	Methods []string
	Absent  string
	Check   func(o ExtendOptions) error
	Plan    func(x *Extended, f *passes.Finding) (*ExtendItem, error)
	Apply   func(x *Extended, it *ExtendItem) error
}

// layerList prints layer indexes compactly: 0-3,5 ("-" for none).
func LayerList(ls []int) string { return cmp.Or(passes.LayerRanges(ls, "-", ","), "-") }

// roundTrip is v rounded to element type dt (what a tensor of dt stores).
func RoundTrip(dt graph.DataType, v float64) float64 {
	t, err := graph.TensorFromFloat64("", dt, nil, []float64{v})
	if err != nil {
		return v
	}
	f, err := t.Float64s()
	if err != nil || len(f) != 1 {
		return v
	}
	return f[0]
}

// finite reports whether every value is finite.
func Finite(v []float64) bool {
	return !slices.ContainsFunc(v, func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) })
}

// Forms of an encoding in the report.
const (
	FormComputed = "computed"
	FormStored   = "stored"
	FormFused    = "fused"
	FormTable    = "table"
)

// scaleConst is the constant (a scalar equal to s) a Mul multiplies v by,
// looking through casts.
func (x *Extended) ScaleConst(v *graph.Value, s float64) *graph.Value {
	for steps := 0; steps < 4; steps++ {
		var next *graph.Value
		for _, u := range v.Uses() {
			n := u.Node
			switch {
			case n.OpType == "Mul" && work.IsONNX(n) && len(n.Inputs()) == 2:
				c := n.Input(1 - u.Index)
				if t := x.ConstTensor(c); t != nil && t.Len() == 1 {
					if f, err := t.Float64s(); err == nil && math.Abs(f[0]-s) <= 1e-6*math.Abs(s) {
						return c
					}
				}
			case n.OpType == "Cast" && work.IsONNX(n) && len(v.Uses()) == 1:
				next = n.Output(0)
			}
		}
		if next == nil {
			return nil
		}
		v = next
	}
	return nil
}

// replaceConst gives value v the tensor t: an initializer keeps its name
// and gets t; another value (a Constant node's output, a value computed
// from constants) is replaced by a new initializer.
func (x *Extended) ReplaceConst(v *graph.Value, t *graph.Tensor) {
	x.Changed = append(x.Changed, v)
	if v.Const != nil && v.Producer() == nil {
		t.SetName(v.Name)
		v.Const = t
		v.Type = graph.TensorType(t.DataType(), graph.Dims(t.Dims()...))
		return
	}
	nv, err := x.R.AddConst(t)
	if err != nil {
		panic("passes: " + err.Error())
	}
	v.ReplaceAllUsesWith(nv)
	x.Changed = append(x.Changed, nv)
}

// tableConst is a constant read as [rows, width]: every axis but the last
// has size 1 except the rows axis.
type TableConst struct {
	Dims  []int64
	Axis  int
	Rows  int
	Width int
	Dt    graph.DataType
	Vals  []float64
}

func (x *Extended) TableOf(v *graph.Value) (*TableConst, error) {
	t := x.ConstTensor(v)
	if t == nil {
		return nil, ExtendErr("%q is not a constant", v.Name)
	}
	dims := slices.Clone(t.Dims())
	if len(dims) < 2 {
		return nil, ExtendErr("the table %q has shape %v", v.Name, dims)
	}
	tc := &TableConst{Dims: dims, Axis: -1, Width: int(dims[len(dims)-1]), Dt: t.DataType(), Rows: 1}
	for i, d := range dims[:len(dims)-1] {
		if d != 1 {
			if tc.Axis >= 0 {
				return nil, ExtendErr("the table %q has shape %v: more than one axis of rows", v.Name, dims)
			}
			tc.Axis, tc.Rows = i, int(d)
		}
	}
	if tc.Axis < 0 {
		tc.Axis = len(dims) - 2
	}
	vals, err := t.Float64s()
	if err != nil {
		return nil, ExtendErr("the table %q: %v", v.Name, err)
	}
	tc.Vals = vals
	return tc, nil
}

// constTensor is the tensor of an initializer or of a Constant node's
// output (nil otherwise).
func (x *Extended) ConstTensor(v *graph.Value) *graph.Tensor {
	if v.Const != nil && v.Producer() == nil {
		return v.Const
	}
	if p := v.Producer(); p != nil && p.OpType == "Constant" && work.IsONNX(p) {
		if a := p.Attr("value"); a != nil && a.Tensor != nil {
			return a.Tensor
		}
	}
	return nil
}

// baseConst follows a table value of the model back through layout ops
// that keep its last axis and its row order (Unsqueeze, Squeeze, Expand,
// Reshape, Cast, Identity) to the constant holding it.
func (x *Extended) BaseConst(name string) (*graph.Value, error) {
	v, err := x.R.Lookup(name)
	if err != nil {
		return nil, err
	}
	if v = work.Back(v, work.SameValues, 16, func(v *graph.Value) bool { return x.ConstTensor(v) != nil }); x.ConstTensor(v) != nil {
		return v, nil
	}
	return nil, ExtendErr("the table %q is not a constant of the model (it is computed by %s)", name, work.ProducerString(v))
}

// planRelative is the plan of a relative scheme: computed for any
// distance.
func PlanRelative(x *Extended, f *passes.Finding) (*ExtendItem, error) {
	return planNothing(x, f, "computed for any distance (relative distances are bucketed, clipped or computed): nothing to enlarge")
}

// planComputed is the plan of an encoding computed for any position.
func PlanComputed(x *Extended, f *passes.Finding) (*ExtendItem, error) {
	return planNothing(x, f, "computed from the position for any position: nothing to enlarge")
}

func planNothing(x *Extended, f *passes.Finding, note string) (*ExtendItem, error) {
	it, where := NewTableItem(f)
	if o := x.Opts; o.Method != "" && o.Method != MethodHierarchical {
		return nil, ExtendErr("--method %s does not fit %s", o.Method, where)
	}
	it.Form, it.Method = FormComputed, "none"
	it.Note("%s", note)
	return it, nil
}

// newTableItem starts the item of a finding other than RoPE, with where
// refusals name it.
func NewTableItem(f *passes.Finding) (*ExtendItem, string) {
	it := &ExtendItem{Scheme: f.Scheme, Layers: f.Layers, Params: map[string]any{}, Finding: f,
		OldMaxFrom: fmt.Sprintf("the %s table of layers %s", f.Scheme, LayerList(f.Layers))}
	return it, fmt.Sprintf("the %s encoding of layers %s", f.Scheme, LayerList(f.Layers))
}

// record adds an edit to the item it belongs to, or to the report's
// other constants.
func (x *Extended) Record(it *ExtendItem, e ExtendEdit) {
	if it != nil {
		it.Edits = append(it.Edits, e)
		return
	}
	x.Report.Bounded = append(x.Report.Bounded, e)
}

// intSlice converts int64 values to the Go slice NewTensor wants for dt.
func IntSlice(dt graph.DataType, v []int64) any {
	switch dt {
	case graph.Int32:
		out := make([]int32, len(v))
		for i, x := range v {
			out[i] = int32(x)
		}
		return out
	case graph.Int16:
		out := make([]int16, len(v))
		for i, x := range v {
			out[i] = int16(x)
		}
		return out
	case graph.Int8:
		out := make([]int8, len(v))
		for i, x := range v {
			out[i] = int8(x)
		}
		return out
	case graph.Uint8:
		out := make([]uint8, len(v))
		for i, x := range v {
			out[i] = uint8(x)
		}
		return out
	}
	return v
}

// forgetShapes removes the value_info declarations of values computed
// from the constants the extension changed (their sizes may have
// changed); graph outputs keep theirs.
func (x *Extended) ForgetShapes() {
	g := x.R.M.Graph
	down := map[*graph.Value]bool{}
	stack := slices.Clone(x.Changed)
	for _, v := range stack {
		down[v] = true
	}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, u := range v.Uses() {
			for _, o := range u.Node.Outputs() {
				if !down[o] {
					down[o] = true
					stack = append(stack, o)
				}
			}
		}
	}
	g.ValueInfo = slices.DeleteFunc(g.ValueInfo, func(v *graph.Value) bool { return down[v] && !v.IsGraphOutput() })
}
