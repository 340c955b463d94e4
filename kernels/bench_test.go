package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
)

// transformerModel builds a pre-norm transformer (LayerNorm, Q/K/V
// projections, scaled-dot-product attention with Softmax, output
// projection, residuals, a Gelu MLP) over an input x (seq, d).
func transformerModel(d, heads, seq, layers int) (*graph.Model, string) {
	rng := rand.New(rand.NewPCG(42, uint64(d)))
	m := graph.NewModel(9, "kernels-bench", graph.Opset{Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, graph.Dims(int64(seq), int64(d))))
	weight := func(name string, dims ...int64) *graph.Value {
		n := 1
		for _, v := range dims {
			n *= int(v)
		}
		w := make([]float32, n)
		s := 1 / math.Sqrt(float64(dims[0]))
		for i := range w {
			w[i] = float32(rng.NormFloat64() * s)
		}
		return g.AddInitializer(mustTensor(graph.NewTensor(name, graph.Float, dims, w)))
	}
	ints := func(name string, v ...int64) *graph.Value {
		return g.AddInitializer(mustTensor(graph.NewTensor(name, graph.Int64, []int64{int64(len(v))}, v)))
	}
	scalar := func(name string, v float32) *graph.Value {
		return g.AddInitializer(mustTensor(graph.NewTensor(name, graph.Float, nil, []float32{v})))
	}
	op := func(t string, attrs []*graph.Attr, in ...*graph.Value) *graph.Value {
		return g.Op(t, in, 1, attrs...)[0]
	}
	hd := d / heads
	split := ints("split_shape", int64(seq), int64(heads), int64(hd))
	merge := ints("merge_shape", int64(seq), int64(d))
	perm := []*graph.Attr{graph.IntsAttr("perm", 1, 0, 2)}
	scale := scalar("scale", float32(1/math.Sqrt(float64(hd))))
	half, one, rt2 := scalar("half", 0.5), scalar("one", 1), scalar("rt2", float32(math.Sqrt2))
	for l := range layers {
		p := fmt.Sprintf("l%d_", l)
		ln := op("LayerNormalization", nil, x, weight(p+"ln1_g", int64(d)), weight(p+"ln1_b", int64(d)))
		heads := func(w string) *graph.Value {
			v := op("MatMul", nil, ln, weight(p+w, int64(d), int64(d)))
			return op("Transpose", perm, op("Reshape", nil, v, split))
		}
		q, k, v := heads("wq"), heads("wk"), heads("wv")
		kt := op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1)}, k)
		sc := op("Mul", nil, op("MatMul", nil, q, kt), scale)
		pr := op("Softmax", []*graph.Attr{graph.IntAttr("axis", -1)}, sc)
		att := op("Reshape", nil, op("Transpose", perm, op("MatMul", nil, pr, v)), merge)
		x = op("Add", nil, x, op("MatMul", nil, att, weight(p+"wo", int64(d), int64(d))))
		ln2 := op("LayerNormalization", nil, x, weight(p+"ln2_g", int64(d)), weight(p+"ln2_b", int64(d)))
		h := op("Add", nil, op("MatMul", nil, ln2, weight(p+"w1", int64(d), int64(4*d))), weight(p+"b1", int64(4*d)))
		// Gelu as exporters write it: 0.5*h*(1+erf(h/sqrt2))
		gl := op("Mul", nil, op("Mul", nil, h, half), op("Add", nil, op("Erf", nil, op("Div", nil, h, rt2)), one))
		x = op("Add", nil, x, op("MatMul", nil, gl, weight(p+"w2", int64(4*d), int64(d))))
	}
	g.AddOutput(x)
	return m, "x"
}

var sizes = []struct {
	name string
	n    int
}{{"Small", 64}, {"Medium", 256}, {"Large", 768}}

func BenchmarkMatMul(b *testing.B) {
	for _, s := range sizes {
		b.Run(s.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			m := s.n
			if s.name == "Large" {
				m = 1024
			}
			x, w := randF32(rng, m, s.n), randF32(rng, s.n, s.n)
			b.ReportAllocs()
			b.SetBytes(int64(4 * (m*s.n + s.n*s.n)))
			for b.Loop() {
				if _, err := matmulNumpy(nil, x, w, 1, false, false); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(2*float64(m*s.n*s.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func BenchmarkSoftmax(b *testing.B) {
	for _, s := range sizes {
		b.Run(s.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			// attention probabilities: (heads, seq, seq) with seq = n/2
			x := randF32(rng, 12, s.n/2, s.n/2)
			k := softmaxKernel(false)
			c := &Call{Opset: 13}
			b.ReportAllocs()
			b.SetBytes(int64(4 * x.Len()))
			for b.Loop() {
				if _, err := k(c, []*Tensor{x}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAddBroadcast(b *testing.B) {
	for _, s := range sizes {
		b.Run(s.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			x, bias := randF32(rng, 4*s.n, s.n), randF32(rng, s.n)
			b.ReportAllocs()
			b.SetBytes(int64(4 * x.Len()))
			for b.Loop() {
				if _, err := binary(nil, opAdd, x, bias); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSessionRun(b *testing.B) {
	for _, s := range []struct {
		name                string
		d, heads, seq, lays int
	}{{"Small", 64, 4, 16, 2}, {"Medium", 256, 8, 64, 2}, {"Large", 768, 12, 128, 1}} {
		b.Run(s.name, func(b *testing.B) {
			m, in := transformerModel(s.d, s.heads, s.seq, s.lays)
			sess, err := NewSession(m, Options{})
			if err != nil {
				b.Fatal(err)
			}
			x := randF32(rand.New(rand.NewPCG(1, 2)), s.seq, s.d)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sess.Run(map[string]*Tensor{in: x}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestTransformerModelRuns(t *testing.T) {
	m, in := transformerModel(32, 4, 8, 2)
	for _, acc := range []bool{false, true} {
		s, err := NewSession(m, Options{Accumulate64: acc})
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Run(map[string]*Tensor{in: randF32(rand.New(rand.NewPCG(1, 2)), 8, 32)})
		if err != nil {
			t.Fatal(err)
		}
		o := out[m.Graph.Outputs[0].Name]
		if !equalShape(o.Shape, []int{8, 32}) {
			t.Fatalf("shape %v", o.Shape)
		}
		for _, v := range o.Float64s() {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatal("non-finite output")
			}
		}
	}
}
