package kernels_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// memoryCase is a model and the inputs to run it on.
type memoryCase struct {
	name string
	m    *graph.Model
	in   map[string]*kernels.Tensor
}

func memoryCases(t *testing.T) []memoryCase {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	var cases []memoryCase
	for _, e := range man.Models {
		m, err := graph.Load(e.ModelPath())
		if err != nil {
			t.Fatal(err)
		}
		in, err := kernels.ReadInputs(e.TestDataDir(), m)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, memoryCase{e.Name, m, in})
	}
	llama := testmodels.Llama(testmodels.DefaultLlama)
	ids := make([]int64, 2*16)
	for i := range ids {
		ids[i] = int64(i*7) % int64(testmodels.DefaultLlama.Vocab)
	}
	in := map[string]*kernels.Tensor{}
	for _, v := range kernels.FeedInputs(llama) {
		if v.Type.ElemType() != graph.Int64 {
			t.Fatalf("synthetic Llama input %s: %v", v.Name, v.Type)
		}
		in[v.Name] = kernels.FromSlice([]int{2, 16}, ids)
	}
	cases = append(cases, memoryCase{"synthetic_llama", llama, in})
	gpt2 := testmodels.GPT2Block(testmodels.GPT2BlockConfig{Hidden: 64, Heads: 4, Layers: 2, Seed: 1})
	x := make([]float32, 2*16*64)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	cases = append(cases, memoryCase{"gpt2_blocks", gpt2, map[string]*kernels.Tensor{"x": kernels.FromSlice([]int{2, 16, 64}, x)}})
	return cases
}

// TestPeakLiveMemory checks the memory goal: the peak of intermediate
// storage a run holds stays within 1.5x of the largest simultaneous live
// set its topological order requires, on the first run (fresh buffers) and
// on a second run (buffers from the pool, which may be larger than asked).
func TestPeakLiveMemory(t *testing.T) {
	for _, c := range memoryCases(t) {
		t.Run(c.name, func(t *testing.T) {
			s, err := kernels.NewSession(c.m, kernels.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for run := range 2 {
				if _, err := s.Run(c.in); err != nil {
					t.Fatal(err)
				}
				st := s.LastRunStats()
				ratio := float64(st.PeakLiveBytes) / float64(st.RequiredBytes)
				t.Logf("run %d: peak %d B, required %d B (%.3fx); constants %d B, inputs %d B, pool %d B, %d steps",
					run, st.PeakLiveBytes, st.RequiredBytes, ratio, st.ConstBytes, st.InputBytes, st.PoolBytes, st.Steps)
				if st.RequiredBytes <= 0 || st.Steps == 0 {
					t.Fatalf("run %d: no accounting: %+v", run, st)
				}
				if ratio > 1.5 {
					t.Errorf("run %d: peak %d B is %.2fx the required %d B", run, st.PeakLiveBytes, ratio, st.RequiredBytes)
				}
			}
		})
	}
}

// TestViewsCountedOnce runs x -> Relu -> Reshape -> Unsqueeze -> Neg: the
// views share Relu's storage, so at the Neg step Relu's buffer (held by
// the views) and Neg's output are live: 2 buffers, not 4.
func TestViewsCountedOnce(t *testing.T) {
	m := graph.NewModel(9, "views", graph.Opset{Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, graph.Dims(4, 8)))
	shape, _ := graph.NewTensor("shape", graph.Int64, []int64{2}, []int64{8, 4})
	axes, _ := graph.NewTensor("axes", graph.Int64, []int64{1}, []int64{0})
	r := g.Op("Relu", []*graph.Value{x}, 1)[0]
	v := g.Op("Reshape", []*graph.Value{r, g.AddInitializer(shape)}, 1)[0]
	u := g.Op("Unsqueeze", []*graph.Value{v, g.AddInitializer(axes)}, 1)[0]
	n := g.Op("Neg", []*graph.Value{u}, 1)[0]
	g.AddOutput(n)
	s, err := kernels.NewSession(m, kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*kernels.Tensor{"x": kernels.FromSlice([]int{4, 8}, make([]float32, 32))}
	if _, err := s.Run(in); err != nil {
		t.Fatal(err)
	}
	st := s.LastRunStats()
	const buf = 32 * 4
	if st.PeakLiveBytes != 2*buf || st.RequiredBytes != 2*buf || st.InputBytes != buf {
		t.Errorf("stats %+v, want peak and required %d, inputs %d", st, 2*buf, buf)
	}
}

// TestRunsAreRepeatable runs every memory case three times on one session
// (the later runs on recycled buffers) and checks the outputs are identical:
// a recycled buffer still in use would change them.
func TestRunsAreRepeatable(t *testing.T) {
	for _, c := range memoryCases(t) {
		t.Run(c.name, func(t *testing.T) {
			fresh, err := kernels.NewSession(c.m, kernels.Options{})
			if err != nil {
				t.Fatal(err)
			}
			want, err := fresh.Run(c.in)
			if err != nil {
				t.Fatal(err)
			}
			s, err := kernels.NewSession(c.m, kernels.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for run := range 3 {
				got, err := s.Run(c.in)
				if err != nil {
					t.Fatal(err)
				}
				for name, w := range want {
					if g := got[name]; g == nil || g.String() != w.String() {
						t.Fatalf("run %d: output %s is %v, a fresh session's %v", run, name, g, w)
					}
					if fmt.Sprint(got[name].Float64s()) != fmt.Sprint(w.Float64s()) {
						t.Fatalf("run %d: output %s differs from a fresh session's", run, name)
					}
				}
			}
			// Outputs of earlier runs are the caller's: a later run must
			// not write into them.
			first, _ := s.Run(c.in)
			snap := map[string]string{}
			for name, o := range first {
				snap[name] = o.String() + fmt.Sprint(o.Float64s())
			}
			if _, err := s.Run(c.in); err != nil {
				t.Fatal(err)
			}
			for name, o := range first {
				if o.String()+fmt.Sprint(o.Float64s()) != snap[name] {
					t.Fatalf("output %s of an earlier run changed", name)
				}
			}
		})
	}
}

// TestElementwiseWritesOverDyingInputs: in x -> Add -> Mul -> Sub each
// product is written over its input, which nothing reads afterwards (one
// buffer live, not two); a value read again later, or twice by one node,
// is never written over.
func TestElementwiseWritesOverDyingInputs(t *testing.T) {
	m := graph.NewModel(9, "inplace", graph.Opset{Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, graph.Dims(4, 8)))
	one, _ := graph.NewTensor("one", graph.Float, []int64{1}, []float32{1})
	two, _ := graph.NewTensor("two", graph.Float, []int64{8}, []float32{2, 2, 2, 2, 2, 2, 2, 2})
	a := g.Op("Add", []*graph.Value{x, g.AddInitializer(one)}, 1)[0]
	b := g.Op("Mul", []*graph.Value{g.AddInitializer(two), a}, 1)[0]
	c := g.Op("Sub", []*graph.Value{b, g.AddInitializer(one)}, 1)[0]
	g.AddOutput(c)
	s, err := kernels.NewSession(m, kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]float32, 32)
	for i := range xs {
		xs[i] = float32(i)
	}
	in := map[string]*kernels.Tensor{"x": kernels.FromSlice([]int{4, 8}, xs)}
	for run := range 2 {
		out, err := s.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range kernels.Data[float32](out[c.Name]) {
			if want := 2*(xs[i]+1) - 1; v != want {
				t.Fatalf("run %d: element %d is %v, want %v", run, i, v, want)
			}
		}
		if st := s.LastRunStats(); st.PeakLiveBytes != 32*4 {
			t.Errorf("run %d: peak %d B, want one buffer of %d", run, st.PeakLiveBytes, 32*4)
		}
	}

	// a is read by Mul and again by Add; d reads b twice.
	m = graph.NewModel(9, "kept", graph.Opset{Version: 17})
	g = m.Graph
	x = g.AddInput("x", graph.TensorType(graph.Float, graph.Dims(4, 8)))
	a = g.Op("Add", []*graph.Value{x, g.AddInitializer(one)}, 1)[0]
	b = g.Op("Mul", []*graph.Value{a, g.AddInitializer(two)}, 1)[0]
	c = g.Op("Add", []*graph.Value{a, b}, 1)[0]
	d := g.Op("Mul", []*graph.Value{c, c}, 1)[0]
	g.AddOutput(d)
	if s, err = kernels.NewSession(m, kernels.Options{}); err != nil {
		t.Fatal(err)
	}
	out, err := s.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range kernels.Data[float32](out[d.Name]) {
		if want := 3 * (xs[i] + 1) * 3 * (xs[i] + 1); v != want {
			t.Fatalf("element %d is %v, want %v", i, v, want)
		}
	}
}
