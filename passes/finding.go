package passes

import (
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strconv"
)

// Schemes of the vocabulary (DESIGN.md).
// Sinusoidal names the scheme in reports.
const Sinusoidal = "sinusoidal"

// LearnedAbsolute names the scheme in reports.
const LearnedAbsolute = "learned_absolute"

// RoPEScheme names the scheme in reports.
const RoPEScheme = "rope"

// ALiBi names the scheme in reports.
const ALiBi = "alibi"

// T5RelativeBias names the scheme in reports.
const T5RelativeBias = "t5_relative_bias"

// RelativeClipped names the scheme in reports.
const RelativeClipped = "relative_clipped"

// NoPE names the scheme in reports.
const NoPE = "nope"

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
}

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
	}
	o := out{Scheme: f.Scheme, Layers: f.Layers, Nodes: f.Nodes, Fused: f.Fused, Notes: f.Notes, Subgraph: f.Subgraph}
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
type num float64

func (n num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return []byte(strconv.FormatInt(int64(f), 10)), nil
	}
	return []byte(strconv.FormatFloat(f, 'g', -1, 64)), nil
}

func optF(p *float64) any {
	if p == nil {
		return nil
	}
	return num(*p)
}

func optI(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func optB(p *bool) any {
	if p == nil {
		return nil
	}
	return *p
}

func optS(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func floats(v []float64) []num {
	out := make([]num, len(v))
	for i, x := range v {
		out[i] = num(x)
	}
	return out
}

func Ptr[T any](v T) *T { return &v }

// RoPEParams are the params of rope.
type RoPEParams struct {
	Layout     string // half_split | interleaved ("" prints null: the pairing is not in the graph)
	Base       *float64
	HeadDim    int
	RotaryDim  int
	NumHeads   *int
	NumKVHeads *int
	// Scaling is none | linear | ntk | llama3 | yarn | longrope | unknown
	// (nil when the frequencies are not in the graph).
	Scaling      *string
	Factor       *float64
	MaxPositions *int
	// Rule parameters (emitted for the rules that have them).
	OriginalMaxPositions *int
	Dynamic              *bool
	LowFreqFactor        *float64
	HighFreqFactor       *float64
	BetaFast, BetaSlow   *float64
	AttentionFactor      *float64
	CorrectionRange      []float64
	ShortFactor          []float64
	LongFactor           []float64
	// Frequencies is the measured profile, printed for scaling "unknown".
	Frequencies []float64
	// PositionSource is "past_length" when positions are counted from the
	// length of a KV cache given as input.
	PositionSource string
	// QKNorm is "l2_after_rope" when q and k are normalised (without a
	// weight) after the rotation.
	QKNorm string
	// MultimodalSections are the numbers of frequencies each position
	// stream turns (M-RoPE's [t, h, w]), nil for one stream.
	MultimodalSections []int
	// Axes is 2 for a rotation over a patch grid (Grid [rows, cols], nil
	// when the grid follows an image of open size), 0 otherwise.
	Axes int
	Grid []int
}

func (*RoPEParams) Scheme() string { return RoPEScheme }

func (p *RoPEParams) Map() map[string]any {
	var layout any
	if p.Layout != "" {
		layout = p.Layout
	}
	m := map[string]any{
		"layout": layout, "base": optF(p.Base), "head_dim": p.HeadDim, "rotary_dim": p.RotaryDim,
		"num_heads": optI(p.NumHeads), "num_kv_heads": optI(p.NumKVHeads), "scaling": optS(p.Scaling),
		"factor": optF(p.Factor), "max_positions": optI(p.MaxPositions),
	}
	s := ""
	if p.Scaling != nil {
		s = *p.Scaling
	}
	switch s {
	case "ntk":
		m["original_max_positions"] = optI(p.OriginalMaxPositions)
		m["dynamic"] = optB(p.Dynamic)
	case "llama3":
		m["original_max_positions"] = optI(p.OriginalMaxPositions)
		m["low_freq_factor"] = optF(p.LowFreqFactor)
		m["high_freq_factor"] = optF(p.HighFreqFactor)
	case "yarn":
		m["original_max_positions"] = optI(p.OriginalMaxPositions)
		m["beta_fast"] = optF(p.BetaFast)
		m["beta_slow"] = optF(p.BetaSlow)
		m["attention_factor"] = optF(p.AttentionFactor)
		if p.CorrectionRange != nil {
			m["correction_range"] = floats(p.CorrectionRange)
		}
	case "longrope":
		m["original_max_positions"] = optI(p.OriginalMaxPositions)
		m["attention_factor"] = optF(p.AttentionFactor)
		m["short_factor"] = floats(p.ShortFactor)
		m["long_factor"] = floats(p.LongFactor)
	case "unknown":
		m["frequencies"] = floats(p.Frequencies)
		if p.AttentionFactor != nil {
			m["attention_factor"] = optF(p.AttentionFactor)
		}
	}
	if p.PositionSource != "" {
		m["position_source"] = p.PositionSource
	}
	if p.QKNorm != "" {
		m["qk_norm"] = p.QKNorm
	}
	if p.MultimodalSections != nil {
		m["multimodal_sections"] = p.MultimodalSections
	}
	if p.Axes == 2 {
		m["axes"], m["grid"] = p.Axes, p.Grid
	}
	return m
}

// SinusoidalParams are the params of sinusoidal.
type SinusoidalParams struct {
	Layout          string // interleaved | concat_sin_cos
	Base            *float64
	Dim             int
	Computed        bool
	MaxPositions    *int
	FreqDenominator string // "d/2" | "d/2-1"
	PositionOffset  *int
	PaddingIdx      *int
}

func (*SinusoidalParams) Scheme() string { return Sinusoidal }

func (p *SinusoidalParams) Map() map[string]any {
	m := map[string]any{"layout": p.Layout, "base": optF(p.Base), "dim": p.Dim, "computed": p.Computed,
		"max_positions": optI(p.MaxPositions), "freq_denominator": p.FreqDenominator,
		"position_offset": optI(p.PositionOffset)}
	if p.PaddingIdx != nil {
		m["padding_idx"] = *p.PaddingIdx
	}
	return m
}

// LearnedParams are the params of learned_absolute.
type LearnedParams struct {
	MaxPositions   *int
	Dim            int
	PositionOffset *int
}

func (*LearnedParams) Scheme() string { return LearnedAbsolute }

func (p *LearnedParams) Map() map[string]any {
	return map[string]any{"max_positions": optI(p.MaxPositions), "dim": p.Dim, "position_offset": optI(p.PositionOffset)}
}

// ALiBiParams are the params of alibi.
type ALiBiParams struct {
	NumHeads  int
	Slopes    []float64
	Symmetric bool
	// Positions is attention_mask_cumsum (positions counted from the mask),
	// key_index (the key's index) or key_offset_from_end (key j gets
	// j - (L-1)).
	Positions    string
	MaxPositions *int
	// AlibiBiasMax is b when the slopes are 2^(-b·(h+1)/n) for n a power
	// of two.
	AlibiBiasMax *float64
}

func (*ALiBiParams) Scheme() string { return ALiBi }

func (p *ALiBiParams) Map() map[string]any {
	m := map[string]any{"num_heads": p.NumHeads, "slopes": floats(p.Slopes), "symmetric": p.Symmetric,
		"positions": p.Positions, "max_positions": optI(p.MaxPositions)}
	if p.AlibiBiasMax != nil {
		m["alibi_bias_max"] = num(*p.AlibiBiasMax)
	}
	return m
}

// T5Params are the params of t5_relative_bias.
type T5Params struct {
	NumBuckets         int
	MaxDistance        *int
	Bidirectional      bool
	NumHeads           int
	SharedAcrossLayers bool
	ScaledScores       bool
}

func (*T5Params) Scheme() string { return T5RelativeBias }

func (p *T5Params) Map() map[string]any {
	return map[string]any{"num_buckets": p.NumBuckets, "max_distance": optI(p.MaxDistance),
		"bidirectional": p.Bidirectional, "num_heads": p.NumHeads,
		"shared_across_layers": p.SharedAcrossLayers, "scaled_scores": p.ScaledScores}
}

// ShawParams are the params of relative_clipped.
type ShawParams struct {
	MaxRelativePosition int
	Dim                 int
	// Distance is key_minus_query or query_minus_key.
	Distance       string
	Clipped        bool
	RelativeValues bool
	PerLayerTables bool
}

func (*ShawParams) Scheme() string { return RelativeClipped }

func (p *ShawParams) Map() map[string]any {
	return map[string]any{"max_relative_position": p.MaxRelativePosition, "dim": p.Dim, "distance": p.Distance,
		"clipped": p.Clipped, "relative_values": p.RelativeValues, "per_layer_tables": p.PerLayerTables}
}

// NoPEParams are the params of nope.
type NoPEParams struct {
	// Temperature is the query temperature tuning of Llama 4, or nil.
	Temperature *Temperature
}

// Temperature is Llama 4's query scaling log(floor((pos+1)/FloorScale)+1)·AttnScale+1.
type Temperature struct {
	FloorScale float64
	AttnScale  float64
}

func (*NoPEParams) Scheme() string { return NoPE }

func (p *NoPEParams) Map() map[string]any {
	if p.Temperature == nil {
		return map[string]any{"temperature_tuning": nil}
	}
	return map[string]any{"temperature_tuning": map[string]any{"floor_scale": num(p.Temperature.FloorScale), "attn_scale": num(p.Temperature.AttnScale)}}
}

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
