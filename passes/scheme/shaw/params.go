package shaw

import "github.com/onnxpe/onnxpe/passes"

// Name is the scheme's name in reports.
const Name = "relative_clipped"

// ShawParams are the params of relative_clipped.
type Params struct {
	// MaxRelativePosition is the distance the index is clamped to; nil
	// when it is not clamped (Hugging Face's relative_key: the table's
	// radius, in the evidence and a note, is how far the model reaches,
	// not a clipping).
	MaxRelativePosition *int
	Dim                 int
	// Distance is key_minus_query or query_minus_key.
	Distance       string
	Clipped        bool
	RelativeValues bool
	PerLayerTables bool
}

func (*Params) Scheme() string { return Name }

func (p *Params) Map() map[string]any {
	return map[string]any{"max_relative_position": passes.OptInt(p.MaxRelativePosition), "dim": p.Dim, "distance": p.Distance,
		"clipped": p.Clipped, "relative_values": p.RelativeValues, "per_layer_tables": p.PerLayerTables}
}
