package work

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
)

func ProducerString(v *graph.Value) string {
	if v == nil || v.Producer() == nil {
		return "a graph input"
	}
	return fmt.Sprintf("%s (%s)", NodeName(v.Producer()), v.Producer().OpType)
}

func NodeName(n *graph.Node) string {
	if n.Name != "" {
		return n.Name
	}
	if len(n.Outputs()) > 0 {
		return n.Output(0).Name
	}
	return ""
}
