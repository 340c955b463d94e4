//go:build ort

// Command attention times ONNX Runtime on a Llama of realistic width with
// a KV cache (testmodels.Llama: hidden 2048, 16 heads, 8 KV heads, 4
// layers, MLP 5632, vocabulary 32000, float32, RoPE from position_ids) as
// built, rewritten with the default passes (RoPE fused into
// RotaryEmbedding; --max-positions as far as the points reach), and
// rewritten with --attention fused (each block one
// com.microsoft GroupQueryAttention), and the same shape built the way ONNX
// Runtime GenAI's model builder writes it (testmodels' FormGenAIGQA: its
// own weights, SkipSimplifiedLayerNormalization, GroupQueryAttention with
// do_rotary; the reference of what a hand-built deployment reaches), on
// prefills (batch 1, no cache) and
// on one decoding step after a cache, with 1 and 2 intra-op threads, and
// prints a Markdown table of the medians and the speed-ups (original time
// over the rewrite's, measured in the same run). Run it with `make bench`
// (needs `make ort`).
//
// The four models run in rotating order in each round (one warm-up run
// each first), on values built once. With one thread ONNX Runtime runs on
// the calling thread, so a run is timed by that thread's CPU time (a busy
// shared machine inflates it less than the wall time); with more threads
// by the wall time. The weights are written to side files as they are
// made, so the models take little of the Go heap (the GenAI-style one is
// built in memory and saved); each point compares the rewrites' logits
// with the original's in ONNX Runtime.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/onnxpe/onnxpe/bench/internal/benchutil"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/ortpeer"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/schemes"
	"github.com/onnxpe/onnxpe/testmodels"
)

func main() {
	rounds := flag.Int("rounds", 5, "timed runs of each model per point (the median is reported)")
	prefills := flag.String("prefill", "128,512", "prefill lengths (batch 1, no cache), comma-separated")
	pasts := flag.String("decode", "512,4096", "cache lengths before one decoded token, comma-separated")
	threadList := flag.String("threads", "1,2", "ONNX Runtime intra-op thread counts, comma-separated")
	shape := benchutil.LlamaShapeFlags()
	flag.Parse()
	pre, err := ints(*prefills)
	if err != nil {
		fail(fmt.Errorf("-prefill: %w", err))
	}
	dec, err := ints(*pasts)
	if err != nil {
		fail(fmt.Errorf("-decode: %w", err))
	}
	threads, err := ints(*threadList)
	if err != nil {
		fail(fmt.Errorf("-threads: %w", err))
	}
	if err := ortpeer.Init(""); err != nil {
		fail(err)
	}
	dir, err := os.MkdirTemp("", "attentionbench")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)

	cfg := shape.Config()
	cfg.KVCache = true
	// The rewrites' cos/sin caches cover every position the points reach
	// (the default, 4096, stops a decode after 4096 cached tokens).
	maxPos := 4096
	for _, n := range slices.Concat(pre, dec) {
		for maxPos < n+1 {
			maxPos *= 2
		}
	}
	paths, err := build(cfg, dir, maxPos)
	if err != nil {
		fail(err)
	}
	dcfg := testmodels.DeployConfig{Layers: cfg.Layers, Hidden: cfg.Hidden, Heads: cfg.Heads, KVHeads: cfg.KVHeads, FFN: cfg.FFN,
		Vocab: cfg.Vocab, RopeBase: cfg.RopeBase, MaxPositions: maxPos, Seed: 21}
	genai := filepath.Join(dir, "genai.onnx")
	if err := testmodels.BuildDeploy(testmodels.FormGenAIGQA, dcfg).Save(genai, graph.SaveOptions{}); err != nil {
		fail(err)
	}
	runtime.GC()
	paths = append(paths, genai)
	models := make([]*graph.Model, len(paths))
	for i, p := range paths {
		if models[i], err = graph.Load(p); err != nil {
			fail(err)
		}
	}
	fmt.Printf("Llama: %d layers, hidden %d, %d heads, %d KV heads, MLP %d, vocabulary %d, float32; nodes %d (original), %d (rewrite), %d (fused: %d GroupQueryAttention), %d (GenAI-style)\n\n",
		cfg.Layers, cfg.Hidden, cfg.Heads, cfg.KVHeads, cfg.FFN, cfg.Vocab, count(models[0], ""), count(models[1], ""), count(models[2], ""), count(models[2], "GroupQueryAttention"), count(models[3], ""))
	fmt.Println("| threads | run | original (ms) | rewrite (ms) | fused (ms) | GenAI-style (ms) | rewrite speed-up | fused speed-up | GenAI-style speed-up | fused / GenAI-style time | max abs diff of logits (rewrite, fused) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	type point struct {
		name      string
		seq, past int
	}
	var points []point
	for _, s := range pre {
		points = append(points, point{fmt.Sprintf("prefill %d", s), s, 0})
	}
	for _, p := range dec {
		points = append(points, point{fmt.Sprintf("decode 1 token after %d", p), 1, p})
	}
	for _, th := range threads {
		for _, p := range points {
			in := testmodels.LlamaInputs(cfg, 1, p.seq, p.past, 7)
			ins := []map[string]*kernels.Tensor{in, in, in,
				testmodels.DeployInputs(testmodels.FormGenAIGQA, dcfg, testmodels.DeployStep{Batch: 1, Seq: p.seq, Past: p.past}, 7)}
			likes := make([]map[string]*kernels.Tensor, len(models))
			for i, m := range models {
				likes[i] = outputsLike(m, p.seq, p.past)
			}
			ts, diffs, err := timeORT(paths, models, ins, likes, 3, th, *rounds)
			if err != nil {
				fail(fmt.Errorf("%s, %d threads: %w", p.name, th, err))
			}
			clock := "CPU"
			if th > 1 {
				clock = "wall"
			}
			fmt.Printf("| %d (%s) | %s | %s | %s | %s | %s | %.2fx | %.2fx | %.2fx | %.2f | %.2g, %.2g |\n", th, clock, p.name, ms(ts[0]), ms(ts[1]), ms(ts[2]), ms(ts[3]),
				float64(ts[0])/float64(ts[1]), float64(ts[0])/float64(ts[2]), float64(ts[0])/float64(ts[3]), float64(ts[2])/float64(ts[3]), diffs[1], diffs[2])
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "attention bench:", err)
	os.Exit(1)
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// build writes the Llama (its weights to original.onnx.data as they are
// made) and its two rewrites, and returns the three paths: original,
// rewrite (default passes), fused (--attention fused). The rewrites are
// not verified here (the tests verify both forms on the same Llama at
// test width, and TestRewriteORT in ONNX Runtime); timeORT compares their
// logits with the original's.
func build(cfg testmodels.LlamaConfig, dir string, maxPos int) ([]string, error) {
	orig := filepath.Join(dir, "original.onnx")
	loc := filepath.Base(orig) + ".data"
	f, err := os.Create(filepath.Join(dir, loc))
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(f, 8<<20)
	var off int64
	var werr error
	cfg.Store = func(t *graph.Tensor) *graph.Tensor {
		raw, err := t.RawBytes()
		if err == nil {
			_, err = w.Write(raw)
		}
		e, err2 := graph.NewExternalTensor(t.Name(), t.DataType(), t.Dims(), loc, off, int64(len(raw)))
		if werr == nil {
			werr = cmpErr(err, err2)
		}
		off += int64(len(raw))
		return e
	}
	m := testmodels.Llama(cfg)
	if werr != nil {
		return nil, werr
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := m.Save(orig, graph.SaveOptions{External: graph.KeepStorage}); err != nil {
		return nil, err
	}
	if m, err = graph.Load(orig); err != nil {
		return nil, err
	}
	paths := []string{orig}
	for _, a := range []string{passes.AttentionKeep, passes.AttentionFused} {
		rw, _, err := audit.RewriteModel(m, passes.Options{Rewrite: passes.RewriteOptions{Attention: a, MaxPositions: maxPos}}, schemes.Rewriters()...)
		if err != nil {
			return nil, err
		}
		if !rw.Changed() {
			return nil, fmt.Errorf("--attention %s: nothing rewritten", a)
		}
		if a == passes.AttentionFused && count(rw.M, "GroupQueryAttention") != cfg.Layers {
			var notes []string
			for _, ch := range rw.Changes {
				notes = append(notes, ch.Notes...)
			}
			return nil, fmt.Errorf("--attention fused: %d GroupQueryAttention nodes for %d layers: %s", count(rw.M, "GroupQueryAttention"), cfg.Layers, strings.Join(notes, "; "))
		}
		p := filepath.Join(dir, a+".onnx")
		if err := rw.M.Save(p, graph.SaveOptions{}); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func cmpErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// count counts the nodes of type op ("" every node).
func count(m *graph.Model, op string) int {
	n := 0
	m.Walk(func(x *graph.Node) {
		if op == "" || x.OpType == op {
			n++
		}
	})
	return n
}

// outputsLike are tensors of the outputs' types and shapes for seq new
// tokens after past cached ones (batch 1), for ONNX Runtime's binding.
func outputsLike(m *graph.Model, seq, past int) map[string]*kernels.Tensor {
	size := map[string]int{"batch": 1, "seq": seq, "total": past + seq}
	out := map[string]*kernels.Tensor{}
	for _, o := range m.Graph.Outputs {
		var shape []int
		dims, _ := o.Type.Shape()
		for _, d := range dims {
			if d.Known {
				shape = append(shape, int(d.Value))
			} else {
				shape = append(shape, size[d.Param])
			}
		}
		out[o.Name] = kernels.New(o.Type.ElemType(), shape...)
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Nanoseconds())/1e6) }

// timeORT opens the models in ONNX Runtime (threads intra-op threads,
// optimisation level all), runs each once on its inputs, compares the
// first output (the logits) of models 1..same-1 (given the first one's
// inputs) with the first one's, and times rounds runs of each in rotating order:
// the medians, CPU time of the calling thread with one thread, wall time
// otherwise.
func timeORT(paths []string, models []*graph.Model, ins, likes []map[string]*kernels.Tensor, same, threads, rounds int) ([]time.Duration, []float64, error) {
	runs := make([]func() error, len(paths))
	vals := make([]*ortpeer.Values, len(paths))
	for i, p := range paths {
		s, err := ortpeer.NewSession(p, models[i], ortpeer.Options{Threads: threads, Level: "all"})
		if err != nil {
			return nil, nil, err
		}
		defer s.Close()
		v, err := s.PrepareValues(ins[i], likes[i])
		if err != nil {
			return nil, nil, err
		}
		defer v.Close()
		vals[i] = v
		runs[i] = func() error { return s.RunValues(v) }
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, r := range runs {
		if err := r(); err != nil {
			return nil, nil, err
		}
	}
	diffs := make([]float64, len(paths))
	want, err := vals[0].Output(0)
	if err != nil {
		return nil, nil, err
	}
	for i := 1; i < same; i++ {
		got, err := vals[i].Output(0)
		if err != nil {
			return nil, nil, err
		}
		w, g := want.Float64s(), got.Float64s()
		if len(w) != len(g) {
			return nil, nil, fmt.Errorf("logits of %d and %d elements", len(w), len(g))
		}
		for j := range w {
			diffs[i] = math.Max(diffs[i], math.Abs(w[j]-g[j]))
		}
	}
	times := make([][]time.Duration, len(paths))
	for r := 0; r < rounds; r++ {
		for k := range runs {
			i := (k + r) % len(runs)
			t0, c0 := time.Now(), benchutil.ThreadCPU()
			if err := runs[i](); err != nil {
				return nil, nil, err
			}
			d := time.Since(t0)
			if threads == 1 {
				d = benchutil.ThreadCPU() - c0
			}
			times[i] = append(times[i], d)
		}
	}
	med := make([]time.Duration, len(paths))
	for i, ts := range times {
		slices.Sort(ts)
		med[i] = ts[len(ts)/2]
	}
	return med, diffs, nil
}
