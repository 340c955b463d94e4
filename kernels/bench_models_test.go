package kernels_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// These benchmarks live in the external test package because they build
// their models with testmodels, which imports kernels.

// threadSettings are the two configurations compared with ONNX Runtime:
// one thread, and all cores.
var threadSettings = []struct {
	name    string
	threads int
}{{"threads1", 1}, {"threadsAll", 0}}

func benchRun(b *testing.B, m *graph.Model, in map[string]*kernels.Tensor, threads int) {
	benchRunOpts(b, m, in, kernels.Options{Threads: threads})
}

func benchRunOpts(b *testing.B, m *graph.Model, in map[string]*kernels.Tensor, o kernels.Options) {
	s, err := kernels.NewSession(m, o)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Run(in); err != nil { // warm the buffer pool
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Run(in); err != nil {
			b.Fatal(err)
		}
	}
	// The memory of a run (Session.LastRunStats): peak intermediate
	// storage held, and the live set the plan requires.
	st := s.LastRunStats()
	b.ReportMetric(float64(st.PeakLiveBytes)/1e6, "peak-MB")
	b.ReportMetric(float64(st.RequiredBytes)/1e6, "required-MB")
}

// BenchmarkGPT2Block runs one GPT-2-small block (d=768, 12 heads) on
// batch 1, sequence 128.
func BenchmarkGPT2Block(b *testing.B) {
	m := testmodels.GPT2Block(testmodels.GPT2Small)
	const seq, d = 128, 768
	x := make([]float32, seq*d)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	in := map[string]*kernels.Tensor{"x": kernels.FromSlice([]int{1, seq, d}, x)}
	for _, ts := range threadSettings {
		b.Run(ts.name, func(b *testing.B) { benchRun(b, m, in, ts.threads) })
	}
}

// BenchmarkTestModels runs every corpus model on its stored test inputs.
func BenchmarkTestModels(b *testing.B) {
	man, err := testmodels.Load()
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range man.Models {
		m, err := graph.Load(e.ModelPath())
		if err != nil {
			b.Fatal(err)
		}
		in, err := kernels.ReadInputs(e.TestDataDir(), m)
		if err != nil {
			b.Fatal(err)
		}
		for _, ts := range threadSettings {
			b.Run(fmt.Sprintf("%s/%s", e.Name, ts.name), func(b *testing.B) { benchRun(b, m, in, ts.threads) })
		}
	}
}

// BenchmarkDeployedOps runs the deployed attention and quantized-matrix
// ops at the shapes of their ONNX Runtime comparison (bench/vsort): a
// Llama-3-8B attention layer as GroupQueryAttention and as the opset-23
// Attention, on a 512-token prompt and one decoding step after 2048; a
// 4-bit MatMulNBits 4096x4096 on 1 and 128 rows.
func BenchmarkDeployedOps(b *testing.B) {
	type job struct {
		name string
		m    *graph.Model
		in   map[string]*kernels.Tensor
	}
	var jobs []job
	for _, sh := range []struct {
		name string
		a    testmodels.AttnShape
	}{{"prefill512", testmodels.Llama8B(1, 512, 0)}, {"decode2048", testmodels.Llama8B(1, 1, 2048)}} {
		jobs = append(jobs, job{"gqa_" + sh.name, testmodels.GQALayer(sh.a, 4096), testmodels.AttnInputs(sh.a, true, 3)},
			job{"attention23_" + sh.name, testmodels.AttentionLayer(sh.a), testmodels.AttnInputs(sh.a, false, 3)})
	}
	w := testmodels.NewNBitsWeight(4096, 4096, 4, 32, 5)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, rows := range []int{1, 128} {
		a := make([]float32, rows*4096)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		jobs = append(jobs, job{fmt.Sprintf("matmulnbits4_rows%d", rows), testmodels.MatMulNBitsLayer(rows, w),
			map[string]*kernels.Tensor{"A": kernels.FromSlice([]int{rows, 4096}, a)}})
	}
	for _, j := range jobs {
		for _, ts := range threadSettings {
			b.Run(j.name+"/"+ts.name, func(b *testing.B) { benchRun(b, j.m, j.in, ts.threads) })
		}
	}
}
