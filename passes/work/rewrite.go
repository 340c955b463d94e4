package work

import (
	"github.com/onnxpe/onnxpe/graph"
)

func NodeName(n *graph.Node) string {
	if n.Name != "" {
		return n.Name
	}
	if len(n.Outputs()) > 0 {
		return n.Output(0).Name
	}
	return ""
}
