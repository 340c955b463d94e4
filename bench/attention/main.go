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
// prefills (batch 1, no cache: 128, 512 and 4096 tokens) and on 16
// decoding steps of one token after caches of 512 and 4096 (the cache one
// longer at each step), with 1 and 2 intra-op threads, and prints a
// Markdown table of the medians and the speed-ups (original time over the
// rewrite's, measured in the same run). Run it with `make bench` (needs
// `make ort`).
//
// The four models run in rotating order in each round (one warm-up run
// each first); prefills of -alone-from tokens or more (default 2048) run
// one model at a time instead, its session opened, warmed up, timed and
// closed before the next (the four sessions' arenas at 4096 tokens do not
// fit in 24 GB). A point's values are bound before its clock starts (a
// decode step's for each step). With one thread ONNX Runtime runs on
// the calling thread, so a run is timed by that thread's CPU time (a busy
// shared machine inflates it less than the wall time); with more threads
// by the wall time. The weights are written to side files as they are
// made, so the models take little of the Go heap; each point compares the
// rewrites' logits with the original's in ONNX Runtime.
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
	prefills := flag.String("prefill", "128,512,4096", "prefill lengths (batch 1, no cache), comma-separated")
	pasts := flag.String("decode", "512,4096", "cache lengths before the decoded tokens, comma-separated")
	aloneFrom := flag.Int("alone-from", 2048, "prefills of this many tokens or more time one model at a time (its session alone: the arenas of four do not fit in memory)")
	steps := flag.Int("steps", 16, "decode steps timed together after each cache length (one token each, the cache growing by one)")
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
	if *steps < 1 {
		fail(fmt.Errorf("-steps %d: at least one", *steps))
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
		for maxPos < n+*steps {
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
	// Its weights in a side file, as the original's: loaded, the four
	// models map their weights rather than hold them (the sessions'
	// arenas at a prefill of 4096 tokens take gigabytes).
	if err := testmodels.BuildDeploy(testmodels.FormGenAIGQA, dcfg).Save(genai, graph.SaveOptions{External: graph.ExternalizeLarge}); err != nil {
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
		name             string
		seq, past, steps int
	}
	var points []point
	for _, s := range pre {
		points = append(points, point{fmt.Sprintf("prefill %d", s), s, 0, 1})
	}
	for _, p := range dec {
		name := fmt.Sprintf("decode %d tokens after %d", *steps, p)
		if *steps == 1 {
			name = fmt.Sprintf("decode 1 token after %d", p)
		}
		points = append(points, point{name, 1, p, *steps})
	}
	for _, th := range threads {
		for _, p := range points {
			// Step k of a point: its tokens after past+k cached ones.
			step := func(k int) ([]map[string]*kernels.Tensor, []map[string]*kernels.Tensor) {
				in := testmodels.LlamaInputs(cfg, 1, p.seq, p.past+k, 7)
				ins := []map[string]*kernels.Tensor{in, in, in,
					testmodels.DeployInputs(testmodels.FormGenAIGQA, dcfg, testmodels.DeployStep{Batch: 1, Seq: p.seq, Past: p.past + k}, 7)}
				likes := make([]map[string]*kernels.Tensor, len(models))
				for i, m := range models {
					likes[i] = outputsLike(m, p.seq, p.past+k)
				}
				return ins, likes
			}
			alone := p.seq >= *aloneFrom
			ts, diffs, err := timeORT(paths, models, step, p.steps, 3, th, *rounds, alone)
			if err != nil {
				fail(fmt.Errorf("%s, %d threads: %w", p.name, th, err))
			}
			clock := "CPU"
			if th > 1 {
				clock = "wall"
			}
			name := p.name
			if alone {
				name += " (one model at a time)"
			}
			fmt.Printf("| %d (%s) | %s | %s | %s | %s | %s | %.2fx | %.2fx | %.2fx | %.2f | %.2g, %.2g |\n", th, clock, name, ms(ts[0]), ms(ts[1]), ms(ts[2]), ms(ts[3]),
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
// optimisation level all), runs each once on the inputs of step 0,
// compares the first output (the logits) of models 1..same-1 (given the
// first one's inputs) with the first one's, and times rounds runs of each:
// the medians, CPU time of the calling thread with one thread, wall time
// otherwise. The models run in rotating order in each round, all four
// sessions open; alone, one model at a time (its session opened, warmed
// up, timed and closed before the next: the sessions' arenas at a prefill
// of 4096 tokens, gigabytes each, do not fit this machine together). A run
// of several steps is the sum of its steps' runs, each on the inputs of
// its own step (a decode step after a cache one longer than the last);
// their values are bound before the step's clock starts and freed after
// it stops.
func timeORT(paths []string, models []*graph.Model, step func(k int) (ins, likes []map[string]*kernels.Tensor), steps, same, threads, rounds int, alone bool) ([]time.Duration, []float64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	sessions := make([]*ortpeer.Session, len(paths))
	open := func(i int) error {
		s, err := ortpeer.NewSession(paths[i], models[i], ortpeer.Options{Threads: threads, Level: "all"})
		sessions[i] = s
		return err
	}
	closeAll := func() {
		for i, s := range sessions {
			if s != nil {
				s.Close()
				sessions[i] = nil
			}
		}
	}
	defer closeAll()
	bind := func(k, i int) (*ortpeer.Values, error) {
		ins, likes := step(k)
		return sessions[i].PrepareValues(ins[i], likes[i])
	}
	// first: model i's values of step 0, bound for every round of a run
	// of one step.
	first := make([]*ortpeer.Values, len(paths))
	defer func() {
		for _, v := range first {
			if v != nil {
				v.Close()
			}
		}
	}()
	// warm runs model i once on step 0 and compares its logits.
	var want *kernels.Tensor
	diffs := make([]float64, len(paths))
	warm := func(i int) error {
		v, err := bind(0, i)
		if err != nil {
			return err
		}
		first[i] = v
		if err := sessions[i].RunValues(v); err != nil {
			return err
		}
		if i >= same {
			return nil
		}
		got, err := v.Output(0)
		if err != nil {
			return err
		}
		if i == 0 {
			want = got
			return nil
		}
		if got.Len() != want.Len() {
			return fmt.Errorf("logits of %d and %d elements", want.Len(), got.Len())
		}
		w, g := make([]float64, 1<<16), make([]float64, 1<<16)
		for off := 0; off < got.Len(); off += len(w) {
			n := min(len(w), got.Len()-off)
			want.Float64sAt(w[:n], off)
			got.Float64sAt(g[:n], off)
			for j := range n {
				diffs[i] = math.Max(diffs[i], math.Abs(w[j]-g[j]))
			}
		}
		return nil
	}
	// timed runs model i's steps once.
	timed := func(i int) (time.Duration, error) {
		var total time.Duration
		for st := 0; st < steps; st++ {
			v := first[i]
			if steps > 1 {
				var err error
				if v, err = bind(st, i); err != nil {
					return 0, err
				}
			}
			// The collector's cycle started by binding the values
			// finishes here: run concurrently it would take a core from
			// ONNX Runtime's pool inside the clock.
			runtime.GC()
			t0, c0 := time.Now(), benchutil.ThreadCPU()
			err := sessions[i].RunValues(v)
			d := time.Since(t0)
			if threads == 1 {
				d = benchutil.ThreadCPU() - c0
			}
			if steps > 1 {
				v.Close()
			}
			if err != nil {
				return 0, err
			}
			total += d
		}
		return total, nil
	}
	times := make([][]time.Duration, len(paths))
	if alone {
		for i := range paths {
			if err := open(i); err != nil {
				return nil, nil, err
			}
			if err := warm(i); err != nil {
				return nil, nil, err
			}
			for r := 0; r < rounds; r++ {
				d, err := timed(i)
				if err != nil {
					return nil, nil, err
				}
				times[i] = append(times[i], d)
			}
			first[i].Close()
			first[i] = nil
			closeAll()
		}
	} else {
		for i := range paths {
			if err := open(i); err != nil {
				return nil, nil, err
			}
		}
		for i := range paths {
			if err := warm(i); err != nil {
				return nil, nil, err
			}
		}
		for r := 0; r < rounds; r++ {
			for k := range paths {
				i := (k + r) % len(paths)
				d, err := timed(i)
				if err != nil {
					return nil, nil, err
				}
				times[i] = append(times[i], d)
			}
		}
	}
	med := make([]time.Duration, len(paths))
	for i, ts := range times {
		slices.Sort(ts)
		med[i] = ts[len(ts)/2]
	}
	return med, diffs, nil
}
