package verify

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
)

// Tolerance is how far an element b may be from the reference a:
// |a - b| <= Atol + Rtol*|a|. NaN equals only NaN, an infinity only the
// same infinity. Integer and bool elements must be equal whatever the
// tolerance.
type Tolerance struct {
	Rtol float64 `json:"rtol"`
	Atol float64 `json:"atol"`
}

func (t Tolerance) String() string { return fmt.Sprintf("rtol %.3g, atol %.3g", t.Rtol, t.Atol) }

// Allowed is the largest difference accepted from the reference value a.
func (t Tolerance) Allowed(a float64) float64 { return t.Atol + t.Rtol*math.Abs(a) }

// The default tolerance policy, per element type, set between what
// legitimately moves results and what a wrong positional encoding does
// (measured on the corpus with the default sweep; see README):
//
//	float32, float64  rtol 1e-5  atol 2e-6   (float32 ulp at 1: 1.2e-7)
//	float16           rtol 4e-3  atol 4e-3   (ulp at 1: 9.8e-4)
//	bfloat16          rtol 3e-2  atol 3e-2   (ulp at 1: 7.8e-3)
//
// ONNX Runtime's optimised saves of the float32 corpus models (fused
// LayerNormalization, GELU, MatMul+Add) differ from the originals by at
// most 1.1e-6 beyond rtol; one cos-cache entry perturbed by 1e-3 moves
// logits by at least 4.7e-6 beyond it. The float16 model's optimised
// saves differ by up to 1.2e-3 (one or two float16 ulps of the logits).
var (
	DefaultFloat32  = Tolerance{Rtol: 1e-5, Atol: 2e-6}
	DefaultFloat16  = Tolerance{Rtol: 4e-3, Atol: 4e-3}
	DefaultBFloat16 = Tolerance{Rtol: 3e-2, Atol: 3e-2}
)

// AcrossRuntimes is the tolerance between two runtimes' results of one
// model (the "A go / A ort" pairings): two results each within t of the
// exact value are within twice t of each other. The runtimes round
// independently (their own summation orders; ONNX Runtime's fused
// LayerNormalization and GELU): on learned_gpt2's 64-token set onnxpe's
// float32 logits are within 1.97e-6 beyond rtol of a float64 evaluation
// of the model, ONNX Runtime's within 2.34e-6, and they are 2.28e-6
// beyond rtol from each other, past t's atol (TestAcrossRuntimesToleranceORT,
// under the ort tag). Pairings of two models keep t: rewrites are judged
// within one runtime.
func (t Tolerance) AcrossRuntimes() Tolerance { return Tolerance{Rtol: 2 * t.Rtol, Atol: 2 * t.Atol} }

// Policy gives the tolerance for each element type. The zero Policy is
// the default policy. Rtol and Atol, when set, replace that part of the
// tolerance of every float type (the --rtol and --atol flags).
type Policy struct {
	// ByType overrides the default of single element types.
	ByType map[graph.DataType]Tolerance
	Rtol   *float64
	Atol   *float64
}

// For returns the tolerance of element type dt. Integer and bool types
// get zero tolerance.
func (p Policy) For(dt graph.DataType) Tolerance {
	if !dt.IsFloat() {
		return Tolerance{}
	}
	t, ok := p.ByType[dt]
	if !ok {
		t = DefaultTolerance(dt)
	}
	if p.Rtol != nil {
		t.Rtol = *p.Rtol
	}
	if p.Atol != nil {
		t.Atol = *p.Atol
	}
	return t
}

// DefaultTolerance is the default tolerance of a float element type.
func DefaultTolerance(dt graph.DataType) Tolerance {
	switch dt {
	case graph.Float16:
		return DefaultFloat16
	case graph.BFloat16:
		return DefaultBFloat16
	}
	return DefaultFloat32
}

// Describe lists the tolerances of the given element types, for reports.
func (p Policy) Describe(types []graph.DataType) string {
	seen := map[graph.DataType]bool{}
	var parts []string
	for _, dt := range types {
		if seen[dt] || !dt.IsFloat() {
			continue
		}
		seen[dt] = true
		parts = append(parts, fmt.Sprintf("%v: %v", dt, p.For(dt)))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "exact (integer outputs)"
	}
	return strings.Join(parts, "; ")
}

// ulpDistance counts the representable values of dt between a and b
// (0 when equal, the same for +0 and -0). Both must be finite.
func ulpDistance(dt graph.DataType, a, b float64) uint64 {
	switch dt {
	case graph.Float:
		return ordDist(ord32(math.Float32bits(float32(a))), ord32(math.Float32bits(float32(b))))
	case graph.Float16:
		return ordDist(ord16(uint16(float16.Fromfloat32(float32(a)))), ord16(uint16(float16.Fromfloat32(float32(b)))))
	case graph.BFloat16:
		return ordDist(ord16(uint16(graph.BF16FromFloat32(float32(a)))), ord16(uint16(graph.BF16FromFloat32(float32(b)))))
	case graph.Double:
		return ordDist(ord64(math.Float64bits(a)), ord64(math.Float64bits(b)))
	}
	return 0
}

// ord16/32/64 map a float's bits to an integer that orders like the
// float: negative floats below positive ones, -0 and +0 to the same point.
func ord16(u uint16) int64 {
	if u&0x8000 != 0 {
		return -int64(u & 0x7fff)
	}
	return int64(u)
}

func ord32(u uint32) int64 {
	if u&0x80000000 != 0 {
		return -int64(u & 0x7fffffff)
	}
	return int64(u)
}

func ord64(u uint64) int64 {
	if u&(1<<63) != 0 {
		return -int64(u &^ (1 << 63))
	}
	return int64(u)
}

func ordDist(a, b int64) uint64 {
	if a > b {
		return uint64(a) - uint64(b)
	}
	return uint64(b) - uint64(a)
}
