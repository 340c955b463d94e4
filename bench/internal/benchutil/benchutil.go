// Package benchutil holds what the benchmark programs of bench/ share: the
// shape flags of their Llama-shaped models, the calling thread's CPU
// clock, and medians.
package benchutil

import (
	"flag"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/onnxpe/onnxpe/testmodels"
)

// LlamaShape registers the shape flags of a Llama-shaped model (-layers,
// -hidden, -heads, -kv-heads, -ffn, -vocab; defaults: the 0.32B model of
// issue 24) on flag.CommandLine; after flag.Parse, Config returns them
// with RoPE base 10000, opset 17 and seed 1.
type LlamaShape struct {
	layers, hidden, heads, kv, ffn, vocab *int
}

// LlamaShapeFlags registers the flags.
func LlamaShapeFlags() *LlamaShape {
	return &LlamaShape{
		layers: flag.Int("layers", 4, "decoder layers"),
		hidden: flag.Int("hidden", 2048, "hidden size"),
		heads:  flag.Int("heads", 16, "attention heads"),
		kv:     flag.Int("kv-heads", 8, "key/value heads"),
		ffn:    flag.Int("ffn", 5632, "MLP size"),
		vocab:  flag.Int("vocab", 32000, "vocabulary"),
	}
}

// Config is the model the flags describe.
func (s *LlamaShape) Config() testmodels.LlamaConfig {
	return testmodels.LlamaConfig{Layers: *s.layers, Hidden: *s.hidden, Heads: *s.heads, KVHeads: *s.kv, FFN: *s.ffn, Vocab: *s.vocab,
		RopeBase: 10000, Opset: 17, Seed: 1}
}

// ThreadCPU is the CPU time of the calling thread (lock it to its OS
// thread around what it times).
func ThreadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err) // Linux has the clock
	}
	return time.Duration(ts.Nano())
}

// Median is the median of ds (upper middle for an even count); it sorts
// ds.
func Median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}
