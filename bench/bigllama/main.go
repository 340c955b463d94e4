// Command bigllama writes a Llama-shaped model built by testmodels.Llama
// (random weights, RoPE computed in the graph, causal mask, grouped-query
// attention) with its weights in one side file beside it, each written as
// it is made (4096-byte aligned), so that models larger than memory can be
// built: the benchmark of bench/large.sh. It is a benchmark helper.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/onnxpe/onnxpe/bench/internal/benchutil"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

func main() {
	out := flag.String("o", "model.onnx", "model file to write (its weights go to <file>.data)")
	shape := benchutil.LlamaShapeFlags()
	dtype := flag.String("dtype", "float32", "element type of the weights: float32 or float16")
	tokens := flag.Int("inputs", 128, "also write inputs of this many tokens (batch 1) to the folder <file>.inputs (input_0.pb: input_ids, input_1.pb: position_ids)")
	flag.Parse()
	dt, ok := graph.ParseDataType(*dtype)
	if !ok || dt != graph.Float && dt != graph.Float16 {
		fail(fmt.Errorf("-dtype %q: float32 or float16", *dtype))
	}
	loc := filepath.Base(*out) + ".data"
	f, err := os.Create(filepath.Join(filepath.Dir(*out), loc))
	if err != nil {
		fail(err)
	}
	w := bufio.NewWriterSize(f, 8<<20)
	var off int64
	store := func(t *graph.Tensor) *graph.Tensor {
		raw, err := t.RawBytes()
		if err != nil {
			panic(err)
		}
		if pad := (4096 - off%4096) % 4096; pad > 0 {
			if _, err := w.Write(make([]byte, pad)); err != nil {
				panic(err)
			}
			off += pad
		}
		if _, err := w.Write(raw); err != nil {
			panic(err)
		}
		e, err := graph.NewExternalTensor(t.Name(), t.DataType(), t.Dims(), loc, off, int64(len(raw)))
		if err != nil {
			panic(err)
		}
		off += int64(len(raw))
		return e
	}
	cfg := shape.Config()
	cfg.DType, cfg.Store = dt, store
	m := testmodels.Llama(cfg)
	if err := w.Flush(); err != nil {
		fail(err)
	}
	if err := f.Close(); err != nil {
		fail(err)
	}
	if err := m.Save(*out, graph.SaveOptions{External: graph.KeepStorage}); err != nil {
		fail(err)
	}
	if *tokens > 0 {
		dir := *out + ".inputs"
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fail(err)
		}
		ids, pos := make([]int64, *tokens), make([]int64, *tokens)
		for i := range ids {
			ids[i], pos[i] = int64((i*7919+13)%cfg.Vocab), int64(i)
		}
		for i, t := range []*kernels.Tensor{kernels.FromSlice([]int{1, *tokens}, ids), kernels.FromSlice([]int{1, *tokens}, pos)} {
			name := []string{"input_ids", "position_ids"}[i]
			if err := kernels.WriteTensorFile(filepath.Join(dir, fmt.Sprintf("input_%d.pb", i)), name, t); err != nil {
				fail(err)
			}
		}
	}
	fmt.Printf("%s: %d bytes of weights in %s\n", *out, off, loc)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bigllama:", err)
	os.Exit(1)
}
