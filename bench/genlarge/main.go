// Command genlarge writes a Llama-shaped model whose weights (over 2 GiB)
// are stored as external data beside it, for the memory benchmarks of
// `onnxpe inspect` and `onnxpe audit` (bench/inspect_rss.sh,
// bench/audit_rss.sh); -zoo writes a smaller one (about 76 MB of float32
// weights) with its weights inline, the unit of the benchmark of auditing
// many models. It is a benchmark helper.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/testmodels"
)

func main() {
	out := flag.String("o", "large.onnx", "model file to write")
	layers := flag.Int("layers", 9, "decoder layers (9 gives about 2.1 GiB of float32 weights)")
	zoo := flag.Bool("zoo", false, "a model of 4 layers, hidden 512, vocabulary 8000 (about 76 MB), its weights inline")
	flag.Parse()
	cfg := testmodels.LlamaConfig{Layers: *layers, Hidden: 2048, Heads: 16, KVHeads: 4, FFN: 5632, Vocab: 32000, RopeBase: 10000, Opset: 17, Seed: 1}
	save := graph.SaveOptions{External: graph.ExternalizeLarge}
	if *zoo {
		cfg = testmodels.LlamaConfig{Layers: 4, Hidden: 512, Heads: 8, KVHeads: 2, FFN: 1408, Vocab: 8000, RopeBase: 10000, Opset: 17, Seed: 1}
		save = graph.SaveOptions{}
	}
	m := testmodels.Llama(cfg)
	if err := m.Save(*out, save); err != nil {
		fmt.Fprintln(os.Stderr, "genlarge:", err)
		os.Exit(1)
	}
}
