package probe

import (
	"github.com/onnxpe/onnxpe/graph"
)

// sinCosOf finds, in a cone, a Sin and a Cos reading the same value.
func SinCosOf(cone []*graph.Node) (angles *graph.Value, sin, cos *graph.Node) {
	for _, s := range cone {
		if s.OpType != "Sin" {
			continue
		}
		for _, k := range cone {
			if k.OpType == "Cos" && k.Input(0) == s.Input(0) {
				return s.Input(0), s, k
			}
		}
	}
	return nil, nil, nil
}
