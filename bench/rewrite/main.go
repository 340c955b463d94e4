//go:build ort

// Command rewrite times every corpus model with a RoPE, computed
// sinusoidal, ALiBi or T5 encoding against its `onnxpe rewrite` output, in
// ONNX Runtime (one thread, default optimisations) and in onnxpe's
// executor (one thread), on a prefill (batch 1, sequence 128, or the
// longest the model takes) and on one decoding step (one token after 127
// cached ones for models with a KV cache, one token otherwise), and prints
// a Markdown table of the medians and the speed-ups (original time over
// rewritten time, measured in the same run): the figures of BENCHMARKS.md.
// Run it with `make bench` (needs `make ort`).
//
// Both executors run on the calling thread (one intra-op thread, no
// inter-op pool), so each run is timed by that thread's CPU time, which a
// busy shared machine does not inflate the way it does the wall time; the
// wall-time speed-up is printed beside it.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"time"

	"github.com/onnxpe/onnxpe/bench/internal/benchutil"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/ortpeer"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/schemes"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/onnxpe/onnxpe/verify"
)

func main() {
	rounds := flag.Int("rounds", 20, "rounds of alternating timed blocks per configuration (the median of all runs is reported)")
	match := flag.String("match", "^(rope_|llama4|sinusoidal_(concat|interleaved_computed|interleaved_scatter)|alibi_|t5_)", "run the corpus models whose name matches this regular expression")
	flag.Parse()
	re, err := regexp.Compile(*match)
	if err != nil {
		fail(fmt.Errorf("-match: %w", err))
	}
	if err := ortpeer.Init(""); err != nil {
		fail(err)
	}
	dir, err := os.MkdirTemp("", "rewritebench")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	man, err := testmodels.Load()
	if err != nil {
		fail(err)
	}
	fmt.Println("| model | run | ORT original (ms) | ORT rewritten (ms) | ORT speed-up (wall) | onnxpe original (ms) | onnxpe rewritten (ms) | onnxpe speed-up (wall) | nodes original → rewritten |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, e := range man.Models {
		if !re.MatchString(e.Name) {
			continue
		}
		if err := bench(e, dir, *rounds); err != nil {
			fail(fmt.Errorf("%s: %w", e.Name, err))
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "rewrite bench:", err)
	os.Exit(1)
}

func bench(e testmodels.Entry, dir string, rounds int) error {
	m, err := graph.Load(e.ModelPath())
	if err != nil {
		return err
	}
	rw, _, err := audit.RewriteModel(m, passes.Options{}, schemes.Rewriters()...)
	if err != nil {
		return err
	}
	if !rw.Changed() {
		return fmt.Errorf("nothing to rewrite")
	}
	out := filepath.Join(dir, e.Name+".onnx")
	if err := rw.M.Save(out, graph.SaveOptions{}); err != nil {
		return err
	}
	b, err := graph.Load(out)
	if err != nil {
		return err
	}
	an, err := verify.Analyze(m, verify.Hints{}, 1)
	if err != nil {
		return err
	}
	cached := an.HasCache
	seq := min(128, an.MaxLength)
	runs := []struct {
		name string
		s    testmodels.Sizes
	}{{fmt.Sprintf("prefill %d", seq), testmodels.Sizes{Batch: 1, Seq: seq}}}
	if cached {
		runs = append(runs, struct {
			name string
			s    testmodels.Sizes
		}{fmt.Sprintf("decode (1 token, past %d)", seq-1), testmodels.Sizes{Batch: 1, Seq: 1, Past: seq - 1}})
	} else {
		runs = append(runs, struct {
			name string
			s    testmodels.Sizes
		}{"decode (1 token, no cache)", testmodels.Sizes{Batch: 1, Seq: 1}})
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for _, r := range runs {
		in, err := e.RandomInputs(rng, r.s)
		if err != nil {
			return err
		}
		ortA, ortB, err := timeORT(e.ModelPath(), m, out, b, in, rounds)
		if err != nil {
			return err
		}
		goA, goB, err := timeGo(m, b, in, rounds)
		if err != nil {
			return err
		}
		fmt.Printf("| %s | %s | %s | %s | %.2fx (%.2fx) | %s | %s | %.2fx (%.2fx) | %d → %d |\n", e.Name, r.name, ms(ortA.cpu), ms(ortB.cpu),
			ratio(ortA.cpu, ortB.cpu), ratio(ortA.wall, ortB.wall), ms(goA.cpu), ms(goB.cpu), ratio(goA.cpu, goB.cpu), ratio(goA.wall, goB.wall), count(m), count(b))
	}
	return nil
}

func count(m *graph.Model) int {
	n := 0
	m.Walk(func(*graph.Node) { n++ })
	return n
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d.Nanoseconds())/1e6) }

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// timing is the median CPU time of the runs on their thread and the
// median wall time.
type timing struct{ cpu, wall time.Duration }

const block = 10

// timeORT opens both models in ONNX Runtime (one thread, its default
// optimisations) and times them in alternating blocks, each run one
// DynamicAdvancedSession.Run on values built once (no tensor conversion
// in the timed calls).
func timeORT(pa string, a *graph.Model, pb string, b *graph.Model, in map[string]*kernels.Tensor, rounds int) (timing, timing, error) {
	sa, err := ortpeer.NewSession(pa, a, ortpeer.Options{Threads: 1, Level: "all"})
	if err != nil {
		return timing{}, timing{}, err
	}
	defer sa.Close()
	sb, err := ortpeer.NewSession(pb, b, ortpeer.Options{Threads: 1, Level: "all"})
	if err != nil {
		return timing{}, timing{}, err
	}
	defer sb.Close()
	like, err := likeOf(a, in)
	if err != nil {
		return timing{}, timing{}, err
	}
	va, err := sa.PrepareValues(in, like)
	if err != nil {
		return timing{}, timing{}, err
	}
	defer va.Close()
	vb, err := sb.PrepareValues(in, like)
	if err != nil {
		return timing{}, timing{}, err
	}
	defer vb.Close()
	return alternate(rounds,
		func() error { return sa.RunValues(va) },
		func() error { return sb.RunValues(vb) })
}

// timeGo times both models in onnxpe's executor, one thread.
func timeGo(a, b *graph.Model, in map[string]*kernels.Tensor, rounds int) (timing, timing, error) {
	sa, err := kernels.NewSession(a, kernels.Options{Threads: 1})
	if err != nil {
		return timing{}, timing{}, err
	}
	sb, err := kernels.NewSession(b, kernels.Options{Threads: 1})
	if err != nil {
		return timing{}, timing{}, err
	}
	return alternate(rounds,
		func() error { _, err := sa.Run(in); return err },
		func() error { _, err := sb.Run(in); return err })
}

// likeOf is onnxpe's result, which tells ONNX Runtime's binding the
// shapes and types of the outputs.
func likeOf(m *graph.Model, in map[string]*kernels.Tensor) (map[string]*kernels.Tensor, error) {
	s, err := kernels.NewSession(m, kernels.Options{Threads: 1})
	if err != nil {
		return nil, err
	}
	return s.Run(in)
}

// alternate runs f and g in alternating blocks (each warmed up), so that
// both see the same machine, on one locked OS thread, and returns their
// medians.
func alternate(rounds int, f, g func() error) (timing, timing, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ac, aw, bc, bw []time.Duration
	for r := 0; r < rounds; r++ {
		for _, side := range []struct {
			fn        func() error
			cpu, wall *[]time.Duration
		}{{f, &ac, &aw}, {g, &bc, &bw}} {
			for i := 0; i < 3; i++ {
				if err := side.fn(); err != nil {
					return timing{}, timing{}, err
				}
			}
			for i := 0; i < block; i++ {
				t0, c0 := time.Now(), benchutil.ThreadCPU()
				if err := side.fn(); err != nil {
					return timing{}, timing{}, err
				}
				*side.cpu = append(*side.cpu, benchutil.ThreadCPU()-c0)
				*side.wall = append(*side.wall, time.Since(t0))
			}
		}
	}
	return timing{benchutil.Median(ac), benchutil.Median(aw)}, timing{benchutil.Median(bc), benchutil.Median(bw)}, nil
}
