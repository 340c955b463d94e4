package passes

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
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

func extendErr(format string, args ...any) error {
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
	// (RoPE rules): the scheme's params with the new rule.
	Expect *RoPEParams `json:"-"`
	// Rule is the RoPE rule applied (nil for other schemes).
	Rule  *RoPERule `json:"-"`
	f     *Finding
	plan  *ropePlan
	tplan *tablePlan
}

// ExtendEdit is one change of the model: where (a node, an initializer) and
// what.
type ExtendEdit struct {
	Where string `json:"where"`
	What  string `json:"what"`
}

func (it *ExtendItem) edit(where, format string, args ...any) {
	it.Edits = append(it.Edits, ExtendEdit{Where: where, What: fmt.Sprintf(format, args...)})
}

func (it *ExtendItem) note(format string, args ...any) {
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
	Audit *Report
	Opts  ExtendOptions

	ctx     *Context
	r       *Rewrite
	plans   []*ropePlan
	changed []*graph.Value // constants replaced or enlarged
	widened []widened      // the other constants read at positions, enlarged
}

// widened is a constant widenBounded enlarged: its original name and new
// tensor.
type widened struct {
	name string
	t    *graph.Tensor
}

// ExtendModel gives m a longer context: it audits m, checks the request
// against what the audit found, and rewrites the encodings of a copy so
// that it supports opts.To positions (RoPE frequencies and caches under a
// scaling rule, learned tables by hierarchical decomposition, sinusoidal
// tables and ALiBi constants continued with their own formula, masks and
// position buffers fixed at export widened). Requests the model does not
// allow return ErrExtend; the checks (equal where it must be, the
// reference, the runs at N) are the caller's (the command uses verify).
func ExtendModel(m *graph.Model, opts ExtendOptions) (*Extended, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	ctx, err := Run(m, Options{}, Audit, Edit)
	if err != nil {
		return nil, err
	}
	rep := ctx.ResultOf[Audit].(*Report)
	r := ctx.rewrite()
	x := &Extended{M: r.M, Audit: rep, Opts: opts, ctx: ctx, r: r, Report: &ExtendReport{NewMax: opts.To}}
	if err := x.extend(); err != nil {
		return nil, err
	}
	if err := r.finish(); err != nil {
		return nil, err
	}
	return x, nil
}

func (o *ExtendOptions) validate() error {
	switch {
	case o.To < 2:
		return extendErr("--to must be at least 2, not %d", o.To)
	case o.Factor != 0 && !(o.Factor > 1):
		return extendErr("--factor must be larger than 1, not %g", o.Factor)
	case o.OriginalMax < 0:
		return extendErr("--original-max-positions must be positive")
	case o.Alpha != 0 && (!(o.Alpha > 0 && o.Alpha < 1) || o.Alpha == 0.5):
		return extendErr("--alpha must lie in (0, 1) and differ from 0.5 (at 0.5 position (i, j) and (j, i) get the same vector), not %g", o.Alpha)
	case o.LowFreqFactor < 0 || o.HighFreqFactor < 0 || o.BetaFast < 0 || o.BetaSlow < 0 || o.AttentionFactor < 0:
		return extendErr("rule parameters must be positive")
	case o.ReplaceScaling != "" && o.ReplaceScaling != ReplaceScaling && o.ReplaceScaling != ComposeScaling:
		return extendErr("--replace-scaling must be %s or %s, not %q", ReplaceScaling, ComposeScaling, o.ReplaceScaling)
	}
	if o.Method != "" && o.Method != MethodHierarchical && !slices.Contains(RoPEMethods, o.Method) {
		return extendErr("unknown --method %q (methods: %s, %s)", o.Method, strings.Join(RoPEMethods, ", "), MethodHierarchical)
	}
	rope := slices.Contains(RoPEMethods, o.Method)
	if !rope && (o.Factor != 0 || o.LowFreqFactor != 0 || o.HighFreqFactor != 0 || o.BetaFast != 0 || o.BetaSlow != 0 || o.AttentionFactor != 0 || o.ReplaceScaling != "") {
		return extendErr("--factor, --replace-scaling and the rule parameters apply to the RoPE methods (%s)", strings.Join(RoPEMethods, ", "))
	}
	if o.Method != MethodLlama3 && (o.LowFreqFactor != 0 || o.HighFreqFactor != 0) {
		return extendErr("--low-freq-factor and --high-freq-factor are parameters of --method llama3")
	}
	if o.Method != MethodYaRN && (o.BetaFast != 0 || o.BetaSlow != 0 || o.AttentionFactor != 0) {
		return extendErr("--beta-fast, --beta-slow and --attention-factor are parameters of --method yarn")
	}
	if o.Method != MethodHierarchical && o.Alpha != 0 {
		return extendErr("--alpha is the parameter of --method hierarchical")
	}
	if o.Method == MethodLlama3 {
		lo, hi := cmpOr(o.LowFreqFactor, DefaultLowFreqFactor), cmpOr(o.HighFreqFactor, DefaultHighFreqFactor)
		if hi <= lo {
			return extendErr("--high-freq-factor (%g) must be larger than --low-freq-factor (%g)", hi, lo)
		}
	}
	if o.Method == MethodYaRN && cmpOr(o.BetaFast, DefaultBetaFast) < cmpOr(o.BetaSlow, DefaultBetaSlow) {
		return extendErr("--beta-fast must not be smaller than --beta-slow")
	}
	return nil
}

// cmpOr is v, or def when v is 0.
func cmpOr(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// extend plans and applies the extension of every finding.
func (x *Extended) extend() error {
	rep, o := x.Report, x.Opts
	var ropeF, learned, other []*Finding
	for _, f := range x.Audit.Findings {
		if f.Subgraph != "" {
			return extendErr("the %s encoding of layers %v is inside %s (a generation op's graph): extend the decoder model it runs", f.Scheme, f.Layers, f.Subgraph)
		}
		switch f.Scheme {
		case RoPEScheme:
			ropeF = append(ropeF, f)
		case LearnedAbsolute:
			learned = append(learned, f)
		case NoPE:
		default:
			other = append(other, f)
		}
	}
	rope := slices.Contains(RoPEMethods, o.Method)
	switch {
	case rope && len(ropeF) == 0:
		return extendErr("--method %s is a RoPE rule; the model has no RoPE (schemes: %s)", o.Method, strings.Join(x.Audit.Schemes, ", "))
	case !rope && len(ropeF) > 0:
		if o.Method == "" {
			return extendErr("the model uses RoPE: give --method (%s)", strings.Join(RoPEMethods, ", "))
		}
		return extendErr("--method %s does not fit RoPE (methods: %s)", o.Method, strings.Join(RoPEMethods, ", "))
	case o.Method == MethodHierarchical && len(learned) == 0:
		return extendErr("--method hierarchical decomposes learned position tables; the model has none (schemes: %s)", strings.Join(x.Audit.Schemes, ", "))
	case rope && len(learned) > 0:
		return extendErr("the model has a learned position table besides RoPE: --method %s does not fit it", o.Method)
	}
	// The largest length the model supports now: the smallest bound of
	// its encodings.
	bound := func(n int, from string) {
		if n > 0 && (rep.OldMax == nil || n < *rep.OldMax) {
			rep.OldMax, rep.OldMaxFrom = ptr(n), from
		}
	}
	var items []*ExtendItem
	for _, f := range ropeF {
		it, err := x.planRoPE(f)
		if err != nil {
			return err
		}
		items = append(items, it)
		if it.OldMax != nil {
			bound(*it.OldMax, fmt.Sprintf("the RoPE of layers %s (%s)", layerList(f.Layers), it.Params["old_max_from"]))
		}
		delete(it.Params, "old_max_from")
	}
	for _, f := range append(learned, other...) {
		it, err := x.planTable(f)
		if err != nil {
			return err
		}
		if it == nil {
			continue
		}
		items = append(items, it)
		if it.OldMax != nil {
			bound(*it.OldMax, fmt.Sprintf("the %s table of layers %s", f.Scheme, layerList(f.Layers)))
		}
	}
	if o.OriginalMax > 0 && len(ropeF) == 0 {
		bound(o.OriginalMax, "--original-max-positions")
	}
	if rep.OldMax != nil && o.To <= *rep.OldMax {
		return extendErr("--to %d is not longer than what the model supports already (%d positions: %s)", o.To, *rep.OldMax, rep.OldMaxFrom)
	}
	if rep.OldMax == nil {
		rep.OldMaxFrom = "no table or constant of the graph bounds the positions"
	}
	rep.Items = items
	for _, it := range items {
		var err error
		switch it.Scheme {
		case RoPEScheme:
			err = x.applyRoPE(it)
		default:
			err = x.applyTable(it)
		}
		if err != nil {
			return err
		}
	}
	if rep.OldMax != nil {
		if err := x.widenBounded(*rep.OldMax); err != nil {
			return err
		}
	}
	x.forgetShapes()
	return nil
}

// layerList prints layer indexes compactly: 0-3,5 ("-" for none).
func layerList(ls []int) string { return cmp.Or(LayerRanges(ls, "-", ","), "-") }

// roundTrip is v rounded to element type dt (what a tensor of dt stores).
func roundTrip(dt graph.DataType, v float64) float64 {
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
func finite(v []float64) bool {
	return !slices.ContainsFunc(v, func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) })
}
