package passes

import (
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strconv"
)

// Finding is one positional-encoding scheme found in a model: the layers
// it reaches, the original nodes that carry it, its parameters in the
// report's vocabulary, and typed evidence for the passes that act on it.
type Finding struct {
	Scheme string
	// Layers are the indexes of the attention blocks it reaches.
	Layers []int
	// Nodes are the names of the original model's nodes that carry the
	// encoding (what a rewrite replaces), in the original order. Constant
	// nodes are left out.
	Nodes []string
	// Fused reports whether the encoding is already a fused op.
	Fused bool
	// Params are the scheme's parameters (the vocabulary of DESIGN.md):
	// *RoPEParams, *SinusoidalParams, ... They are what reports print.
	Params Params
	// Notes say why a parameter is null (the graph does not hold it) or
	// how an ambiguous one was decided.
	Notes []string
	// Evidence is what the detector measured and matched, for rewrites,
	// codegen and plots: *RoPEEvidence, *TableEvidence, ... Not printed in
	// the JSON report.
	Evidence any
	// Subgraph names the graph the finding lives in when it is not the
	// main graph but a graph a generation op runs as a model of its own
	// ("BeamSearch_0/decoder"); Nodes are then names inside that graph.
	Subgraph string
	// Measured is how the finding was confirmed from the graph's own
	// computation (the report's "evidence").
	Measured *Measured
}

// Measured is the record of the measurement that confirmed a finding
// (or, for unknown, of what was measured and did not fit): a finding is a
// claim with evidence, read from what the graph computes at probe
// positions, never from names.
type Measured struct {
	// Test names the measurement: one of the Test* constants.
	Test string `json:"test"`
	// Summary says what was measured, with its numbers, in one sentence.
	Summary string `json:"summary"`
	// Change is how much the measured value changes with the position
	// (its unit is the measured value's), null when not measured.
	Change *Num `json:"change"`
	// Residual is the largest departure of the measurement from what the
	// finding claims (0 for an exact fit), null when not measured.
	Residual *Num `json:"residual"`
}

// Sig3 is x to three significant digits, for Measured's numbers (nil for
// a number that is not finite).
func Sig3(x float64) *Num {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	if x == 0 {
		return Ptr(Num(0))
	}
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 3, 64), 64)
	return Ptr(Num(v))
}

// The measurements of Measured.Test.
const (
	// TestPositionRows: the value an absolute encoding adds differs
	// between positions of one repeated token, and not between tokens at
	// one position.
	TestPositionRows = "position_rows"
	// TestRelativeScores: with q and k held fixed over the positions, the
	// scores depend on key − query alone, and change with it.
	TestRelativeScores = "relative_scores"
	// TestRotation: pairs of lanes turned by angles linear in the position
	// (unit vectors probed through the rotation).
	TestRotation = "rotation"
	// TestScoreBias: a bias of the scores measured over query and key
	// positions and fitted by the scheme's function (ALiBi's slopes, T5's
	// buckets).
	TestScoreBias = "score_bias"
	// TestFusedContract: a fused op whose contract takes the encoding,
	// with the inputs it reads evaluated.
	TestFusedContract = "fused_contract"
	// TestUniformScores: with q and k held fixed over the positions, every
	// query's scores are the same over the keys it sees, and no value that
	// changes with the position joins the block's inputs (nope).
	TestUniformScores = "uniform_scores"
	// TestNoAttention: no attention block was found.
	TestNoAttention = "no_attention"
	// TestProbeFailed: a probe the finding needed could not run.
	TestProbeFailed = "probe_failed"
)

// Params are the parameters of a scheme, printed as a JSON object.
type Params interface {
	Scheme() string
	// Map is the JSON object of the params: the vocabulary keys (null
	// where unknown) and the scheme's extra keys where they apply.
	Map() map[string]any
}

// MarshalJSON prints a finding in the report's shape.
func (f *Finding) MarshalJSON() ([]byte, error) {
	type out struct {
		Scheme   string         `json:"scheme"`
		Layers   []int          `json:"layers"`
		Nodes    []string       `json:"nodes"`
		Fused    bool           `json:"fused"`
		Params   map[string]any `json:"params"`
		Notes    []string       `json:"notes,omitempty"`
		Subgraph string         `json:"subgraph,omitempty"`
		Evidence *Measured      `json:"evidence"`
	}
	o := out{Scheme: f.Scheme, Layers: f.Layers, Nodes: f.Nodes, Fused: f.Fused, Notes: f.Notes, Subgraph: f.Subgraph, Evidence: f.Measured}
	if o.Layers == nil {
		o.Layers = []int{}
	}
	if o.Nodes == nil {
		o.Nodes = []string{}
	}
	if f.Params != nil {
		o.Params = f.Params.Map()
	} else {
		o.Params = map[string]any{}
	}
	return json.Marshal(o)
}

// num prints a float as JSON: integers without a fraction, and no noise
// digits (the shortest decimal that reads back as the same float64).
type Num float64

func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return []byte(strconv.FormatInt(int64(f), 10)), nil
	}
	return []byte(strconv.FormatFloat(f, 'g', -1, 64)), nil
}

func OptFloat(p *float64) any {
	if p == nil {
		return nil
	}
	return Num(*p)
}

func OptInt(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func OptBool(p *bool) any {
	if p == nil {
		return nil
	}
	return *p
}

func OptString(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func Floats(v []float64) []Num {
	out := make([]Num, len(v))
	for i, x := range v {
		out[i] = Num(x)
	}
	return out
}

func Ptr[T any](v T) *T { return &v }

// sameParams reports whether two findings print the same params.
func SameParams(a, b Params) bool {
	if a == nil || b == nil {
		return a == b
	}
	return ParamsKey(a) == ParamsKey(b)
}

// paramsKey is what p prints: two non-nil params are the same when their
// keys are. Nil params have a key no JSON document has.
func ParamsKey(p Params) string {
	if p == nil {
		return "\x00nil"
	}
	x, _ := json.Marshal(p.Map())
	return string(x)
}

// EvidenceMerger is evidence that keeps a record per block (RoPE, Shaw,
// relative sinusoids, DeBERTa): when two findings of one scheme and
// params are merged into one, the first's evidence takes the second's
// records. order sorts node names as the original model orders them.
type EvidenceMerger interface {
	MergeEvidence(from any, order func(names []string) []string)
}

// sortedUnique sorts and dedups.
func SortedUnique[T int | string](s []T) []T {
	s = slices.Clone(s)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return slices.Compact(s)
}
