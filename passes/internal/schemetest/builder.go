package schemetest

import (
	"math"
	"math/rand/v2"

	"github.com/onnxpe/onnxpe/graph"
)

// Builder appends nodes and constants to a graph (the forms of Form and
// ExporterForm); Rng draws its weights.
type Builder struct {
	G   *graph.Graph
	Rng *rand.Rand
}

// Op appends an ONNX-domain node and returns its first output.
func (b *Builder) Op(op string, attrs []*graph.Attr, in ...*graph.Value) *graph.Value {
	return b.G.Op(op, in, 1, attrs...)[0]
}

// Ints is a constant int64 vector.
func (b *Builder) Ints(v ...int64) *graph.Value {
	t, _ := graph.NewTensor("i", graph.Int64, []int64{int64(len(v))}, v)
	return b.G.AddInitializer(t)
}

// Int0 is a constant int64 scalar.
func (b *Builder) Int0(v int64) *graph.Value {
	t, _ := graph.NewTensor("s", graph.Int64, nil, []int64{v})
	return b.G.AddInitializer(t)
}

// Floats is a constant float tensor of the given shape.
func (b *Builder) Floats(dims []int64, v []float32) *graph.Value {
	t, err := graph.NewTensor("f", graph.Float, dims, v)
	if err != nil {
		panic(err)
	}
	return b.G.AddInitializer(t)
}

// Weight is a random [r, c] float matrix (scaled by 1/sqrt(r)).
func (b *Builder) Weight(r, c int) *graph.Value {
	v := make([]float32, r*c)
	for i := range v {
		v[i] = float32(b.Rng.NormFloat64() / math.Sqrt(float64(r)))
	}
	return b.Floats([]int64{int64(r), int64(c)}, v)
}

// MustTensor is graph.NewTensor that panics on a wrong shape.
func MustTensor(dt graph.DataType, dims []int64, v any) *graph.Tensor {
	t, err := graph.NewTensor("t", dt, dims, v)
	if err != nil {
		panic(err)
	}
	return t
}
