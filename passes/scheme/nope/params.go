package nope

import (
	"github.com/onnxpe/onnxpe/passes"
)

// Name is the scheme's name in reports.
const Name = "nope"

// NoPEParams are the params of nope.
type Params struct {
	// Temperature is the query temperature tuning of Llama 4, or nil.
	Temperature *Temperature
}

// Temperature is Llama 4's query scaling log(floor((pos+1)/FloorScale)+1)·AttnScale+1.
type Temperature struct {
	FloorScale float64
	AttnScale  float64
}

func (*Params) Scheme() string { return Name }

func (p *Params) Map() map[string]any {
	if p.Temperature == nil {
		return map[string]any{"temperature_tuning": nil}
	}
	return map[string]any{"temperature_tuning": map[string]any{"floor_scale": passes.Num(p.Temperature.FloorScale), "attn_scale": passes.Num(p.Temperature.AttnScale)}}
}
