package rope

import (
	"github.com/onnxpe/onnxpe/passes"
)

// Name is the scheme's name in reports.
const Name = "rope"

// RoPEParams are the params of rope.
type Params struct {
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

	// llama3 are the settings of the llama3 rule that reproduce the
	// frequencies (not printed: the graph fixes none of them apart), for
	// Rule.Equivalent.
	llama3 []llama3Setting
}

func (*Params) Scheme() string { return Name }

func (p *Params) Map() map[string]any {
	var layout any
	if p.Layout != "" {
		layout = p.Layout
	}
	m := map[string]any{
		"layout": layout, "base": passes.OptFloat(p.Base), "head_dim": p.HeadDim, "rotary_dim": p.RotaryDim,
		"num_heads": passes.OptInt(p.NumHeads), "num_kv_heads": passes.OptInt(p.NumKVHeads), "scaling": passes.OptString(p.Scaling),
		"factor": passes.OptFloat(p.Factor), "max_positions": passes.OptInt(p.MaxPositions),
	}
	s := ""
	if p.Scaling != nil {
		s = *p.Scaling
	}
	switch s {
	case "ntk":
		m["original_max_positions"] = passes.OptInt(p.OriginalMaxPositions)
		m["dynamic"] = passes.OptBool(p.Dynamic)
	case "llama3":
		m["original_max_positions"] = passes.OptInt(p.OriginalMaxPositions)
		m["low_freq_factor"] = passes.OptFloat(p.LowFreqFactor)
		m["high_freq_factor"] = passes.OptFloat(p.HighFreqFactor)
	case "yarn":
		m["original_max_positions"] = passes.OptInt(p.OriginalMaxPositions)
		m["beta_fast"] = passes.OptFloat(p.BetaFast)
		m["beta_slow"] = passes.OptFloat(p.BetaSlow)
		m["attention_factor"] = passes.OptFloat(p.AttentionFactor)
		if p.CorrectionRange != nil {
			m["correction_range"] = passes.Floats(p.CorrectionRange)
		}
	case "longrope":
		m["original_max_positions"] = passes.OptInt(p.OriginalMaxPositions)
		m["attention_factor"] = passes.OptFloat(p.AttentionFactor)
		m["short_factor"], m["long_factor"] = optFloats(p.ShortFactor), optFloats(p.LongFactor)
	case "unknown":
		m["frequencies"] = passes.Floats(p.Frequencies)
		if p.AttentionFactor != nil {
			m["attention_factor"] = passes.OptFloat(p.AttentionFactor)
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

// optFloats prints a list the graph does not fix (nil) as null.
func optFloats(v []float64) any {
	if v == nil {
		return nil
	}
	return passes.Floats(v)
}
