// Command genlarge writes a Llama-shaped model whose weights (over 2 GiB)
// are stored as external data beside it, for the memory benchmark of
// `onnxpe inspect` (bench/inspect_rss.sh). It is a benchmark helper.
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
	flag.Parse()
	cfg := testmodels.LlamaConfig{Layers: *layers, Hidden: 2048, Heads: 16, KVHeads: 4, FFN: 5632, Vocab: 32000, RopeBase: 10000, Opset: 17, Seed: 1}
	m := testmodels.Llama(cfg)
	if err := m.Save(*out, graph.SaveOptions{External: graph.ExternalizeLarge}); err != nil {
		fmt.Fprintln(os.Stderr, "genlarge:", err)
		os.Exit(1)
	}
}
