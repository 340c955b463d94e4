package htmlreport

import (
	"github.com/onnxpe/onnxpe/passes/schemes"
)

// schemeColor is the colour of the scheme named s.
func schemeColor(s string) string {
	if sc := schemes.Lookup(s); sc != nil {
		return sc.Color
	}
	return "#666666"
}
