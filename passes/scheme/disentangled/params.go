package disentangled

import (
	"github.com/onnxpe/onnxpe/passes"
)

// Name is the scheme's name in reports.
const Name = "disentangled"

// DisentangledParams are the params of disentangled.
type Params struct {
	// PositionBuckets is the span of the bucketed relative positions (the
	// relative embedding has 2·PositionBuckets rows); nil when the relative
	// positions are not bucketed.
	PositionBuckets *int
	// MaxRelativePositions is the distance the logarithmic buckets reach
	// (or the clipping distance without buckets).
	MaxRelativePositions *int
	// AttTypes lists the position terms: c2p (content to position) and
	// p2c (position to content).
	AttTypes []string
	// ShareAttKey: the relative embedding is projected by the content
	// query and key projections.
	ShareAttKey bool
	// ScaleFactor is s of the scaling sqrt(d·s) (1 + the number of
	// position terms in DeBERTa); nil when the scores are not scaled so.
	ScaleFactor *float64
}

func (*Params) Scheme() string { return Name }

func (p *Params) Map() map[string]any {
	types := p.AttTypes
	if types == nil {
		types = []string{}
	}
	return map[string]any{"position_buckets": passes.OptInt(p.PositionBuckets), "max_relative_positions": passes.OptInt(p.MaxRelativePositions),
		"att_types": types, "share_att_key": p.ShareAttKey, "scale_factor": passes.OptFloat(p.ScaleFactor)}
}
