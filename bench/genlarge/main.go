// Command genlarge writes a Llama-shaped model whose weights (over 2 GiB)
// are stored as external data beside it, for the memory benchmarks of
// `onnxpe inspect` and `onnxpe audit` (bench/inspect_rss.sh,
// bench/audit_rss.sh); -zoo writes a smaller one (about 76 MB of float32
// weights) with its weights inline, the unit of the benchmark of auditing
// many models; -tensor-gib N writes a model of one external float32 tensor
// of N GiB (bench/convert_rss.sh). It is a benchmark helper.
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
	tensorGiB := flag.Int("tensor-gib", 0, "a model of one Add of an input and one external float32 tensor of this many GiB")
	flag.Parse()
	if *tensorGiB > 0 {
		if err := oneTensor(*out, *tensorGiB); err != nil {
			fmt.Fprintln(os.Stderr, "genlarge:", err)
			os.Exit(1)
		}
		return
	}
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

// oneTensor writes y = x + w, w a float32 tensor of gib GiB in OUT.data.
func oneTensor(out string, gib int) error {
	n := int64(gib) << 28
	w, err := graph.NewTensor("w", graph.Float, []int64{n}, make([]float32, n))
	if err != nil {
		return err
	}
	m := graph.NewModel(9, "genlarge", graph.Opset{Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, []graph.Dim{{Known: true, Value: n}}))
	g.AddOutput(g.Op("Add", []*graph.Value{x, g.AddInitializer(w)}, 1)[0])
	return m.Save(out, graph.SaveOptions{External: graph.ExternalizeLarge})
}
