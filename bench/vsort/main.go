//go:build ort

// Command vsort times onnxpe's executor against ONNX Runtime on the same
// models and inputs, in one process, with one thread and with all cores,
// and prints a Markdown table of the medians and their ratios (the figures
// of BENCHMARKS.md). Run it with `make bench` (needs `make ort`).
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/onnxpe/onnxpe/bench/internal/benchutil"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/ortpeer"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

type job struct {
	name string
	path string
	m    *graph.Model
	in   map[string]*kernels.Tensor
}

func main() {
	runs := flag.Int("runs", 20, "timed runs per configuration (the median is reported)")
	only := flag.String("only", "", "run only the model of this name")
	match := flag.String("match", "", "run only the models whose name matches this regular expression")
	flag.Parse()
	re, err := regexp.Compile(*match)
	if err != nil {
		fail(fmt.Errorf("-match: %w", err))
	}
	if err := ortpeer.Init(""); err != nil {
		fail(err)
	}
	jobs, cleanup, err := loadJobs()
	if err != nil {
		fail(err)
	}
	defer cleanup()
	all := runtime.NumCPU()
	fmt.Printf("| model | onnxpe 1T (ms) | ORT 1T (ms) | ratio 1T | onnxpe %dT (ms) | ORT %dT (ms) | ratio %dT |\n", all, all, all)
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, j := range jobs {
		if *only != "" && j.name != *only || !re.MatchString(j.name) {
			continue
		}
		var cells []string
		for _, threads := range []int{1, all} {
			ours, peer, err := timePair(j, threads, *runs)
			if err != nil {
				fail(fmt.Errorf("%s: %w", j.name, err))
			}
			cells = append(cells, ms(ours), ms(peer), fmt.Sprintf("%.2f", float64(ours)/float64(peer)))
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s |\n", j.name, cells[0], cells[1], cells[2], cells[3], cells[4], cells[5])
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d.Microseconds())/1000) }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "vsort:", err)
	os.Exit(1)
}

// loadJobs gives the GPT-2 small block (batch 1, seq 128) and every corpus
// model on its stored test inputs.
func loadJobs() ([]job, func(), error) {
	dir, err := os.MkdirTemp("", "vsort")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	gpt := testmodels.GPT2Block(testmodels.GPT2Small)
	p := filepath.Join(dir, "gpt2_block.onnx")
	if err := gpt.Save(p, graph.SaveOptions{}); err != nil {
		return nil, cleanup, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 128*768)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	jobs := []job{{name: "gpt2_small_block (seq 128)", path: p, m: gpt, in: map[string]*kernels.Tensor{"x": kernels.FromSlice([]int{1, 128, 768}, x)}}}
	// One float32 MatMul 1024x768 by a constant 768x768 (the GEMM figure).
	mm := graph.NewModel(8, "vsort", graph.Opset{Domain: "", Version: 17})
	a := mm.Graph.AddInput("a", graph.TensorType(graph.Float, graph.Dims(1024, 768)))
	w := make([]float32, 768*768)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	wt, _ := graph.NewTensor("w", graph.Float, []int64{768, 768}, w)
	y := mm.Graph.Op("MatMul", []*graph.Value{a, mm.Graph.AddInitializer(wt)}, 1)[0]
	y.Type = graph.TensorType(graph.Float, graph.Dims(1024, 768))
	mm.Graph.AddOutput(y)
	pm := filepath.Join(dir, "matmul.onnx")
	if err := mm.Save(pm, graph.SaveOptions{}); err != nil {
		return nil, cleanup, err
	}
	av := make([]float32, 1024*768)
	for i := range av {
		av[i] = float32(rng.NormFloat64())
	}
	jobs = append(jobs, job{name: "matmul 1024x768x768", path: pm, m: mm, in: map[string]*kernels.Tensor{"a": kernels.FromSlice([]int{1024, 768}, av)}})
	// The deployed attention and quantized-matrix ops (issue 12): a
	// Llama-3-8B attention layer (32 query heads, 8 key/value heads, head
	// size 128) as GroupQueryAttention and as the opset-23 Attention, on a
	// 512-token prompt and on one decoding step after 2048 tokens; a 4-bit
	// MatMulNBits 4096x4096 (block 32) on 1 and 128 rows.
	for _, sh := range []struct {
		name string
		a    testmodels.AttnShape
	}{{"prefill 512", testmodels.Llama8B(1, 512, 0)}, {"decode, past 2048", testmodels.Llama8B(1, 1, 2048)}} {
		for _, gqa := range []bool{true, false} {
			name := "attention-23 " + sh.name
			dm := testmodels.AttentionLayer(sh.a)
			if gqa {
				name = "gqa " + sh.name
				dm = testmodels.GQALayer(sh.a, 4096)
			}
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".onnx")
			if err := dm.Save(p, graph.SaveOptions{}); err != nil {
				return nil, cleanup, err
			}
			jobs = append(jobs, job{name: name, path: p, m: dm, in: testmodels.AttnInputs(sh.a, gqa, 3)})
		}
	}
	w4 := testmodels.NewNBitsWeight(4096, 4096, 4, 32, 5)
	for _, rows := range []int{1, 128} {
		dm := testmodels.MatMulNBitsLayer(rows, w4)
		name := fmt.Sprintf("matmulnbits 4-bit 4096x4096, %d rows", rows)
		p := filepath.Join(dir, fmt.Sprintf("matmulnbits_%d.onnx", rows))
		if err := dm.Save(p, graph.SaveOptions{}); err != nil {
			return nil, cleanup, err
		}
		a := make([]float32, rows*4096)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		jobs = append(jobs, job{name: name, path: p, m: dm, in: map[string]*kernels.Tensor{"A": kernels.FromSlice([]int{rows, 4096}, a)}})
	}
	man, err := testmodels.Load()
	if err != nil {
		return nil, cleanup, err
	}
	for _, e := range man.Models {
		m, err := graph.Load(e.ModelPath())
		if err != nil {
			return nil, cleanup, err
		}
		in, err := kernels.ReadInputs(e.TestDataDir(), m)
		if err != nil {
			return nil, cleanup, err
		}
		jobs = append(jobs, job{name: e.Name, path: e.ModelPath(), m: m, in: in})
	}
	return jobs, cleanup, nil
}

// timePair times onnxpe and ONNX Runtime on the same job in alternating
// rounds, so that both see the same machine (the second vCPU here is shared
// with other work). In each round, each side runs a warm-up and a block of
// timed runs. ONNX Runtime's session is opened for its block and closed
// after it: its intra-op threads spin-wait between runs and would otherwise
// take the second core from onnxpe's block. ONNX Runtime runs on values
// built once (its inputs, and outputs it writes into): each timed run is
// one DynamicAdvancedSession.Run, with no conversion of tensors, while
// onnxpe's Session.Run takes its inputs and returns new output tensors as
// a caller uses it. It returns both medians.
func timePair(j job, threads, runs int) (ours, peer time.Duration, err error) {
	s, err := kernels.NewSession(j.m, kernels.Options{Threads: threads})
	if err != nil {
		return 0, 0, err
	}
	like, err := s.Run(j.in)
	if err != nil {
		return 0, 0, err
	}
	const block = 10
	var a, b []time.Duration
	var vals *ortpeer.Values
	defer func() {
		if vals != nil {
			vals.Close()
		}
	}()
	for len(a) < runs {
		d, err := timeBlock(block, func() error { _, err := s.Run(j.in); return err })
		if err != nil {
			return 0, 0, err
		}
		a = append(a, d...)
		p, err := ortpeer.NewSession(j.path, j.m, ortpeer.Options{Threads: threads, Level: "all"})
		if err != nil {
			return 0, 0, err
		}
		if vals == nil {
			if vals, err = p.PrepareValues(j.in, like); err != nil {
				p.Close()
				return 0, 0, err
			}
		}
		d, err = timeBlock(block, func() error { return p.RunValues(vals) })
		p.Close()
		if err != nil {
			return 0, 0, err
		}
		b = append(b, d...)
	}
	return benchutil.Median(a), benchutil.Median(b), nil
}

// timeBlock runs f three times to warm up, then n timed times.
func timeBlock(n int, f func() error) ([]time.Duration, error) {
	for i := 0; i < 3; i++ {
		if err := f(); err != nil {
			return nil, err
		}
	}
	ds := make([]time.Duration, n)
	for i := range ds {
		d, err := timed(f)
		if err != nil {
			return nil, err
		}
		ds[i] = d
	}
	return ds, nil
}

func timed(f func() error) (time.Duration, error) {
	t0 := time.Now()
	err := f()
	return time.Since(t0), err
}
