//go:build ort

// Command ortrun loads a model in ONNX Runtime (CPU, default
// optimisations) and runs it once on a test-data folder, printing the load
// and compute times as JSON: the ONNX Runtime side of bench/large.sh
// (which takes its peak memory from /usr/bin/time). It is a benchmark
// helper: build it with -tags ort and set ONNXPE_ORT_LIB.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/ortpeer"
	"github.com/onnxpe/onnxpe/kernels"
)

func main() {
	inputs := flag.String("inputs", "", "test-data folder of the inputs (input_0.pb: input_ids [batch, seq], ...)")
	threads := flag.Int("threads", 0, "intra-op threads (0: ONNX Runtime's choice)")
	flag.Parse()
	if flag.NArg() != 1 || *inputs == "" {
		fail(fmt.Errorf("usage: ortrun --inputs DIR [--threads N] MODEL"))
	}
	path := flag.Arg(0)
	start := time.Now()
	if err := ortpeer.Init(""); err != nil {
		fail(err)
	}
	m, err := graph.Load(path)
	if err != nil {
		fail(err)
	}
	in, err := kernels.ReadInputs(*inputs, m)
	if err != nil {
		fail(err)
	}
	s, err := ortpeer.NewSession(path, m, ortpeer.Options{Threads: *threads, Level: "all"})
	if err != nil {
		fail(err)
	}
	loaded := time.Now()
	// Half outputs need their shape: the declared one, batch and
	// sequence from the first input.
	like := map[string]*kernels.Tensor{}
	if s.NeedsShapes() {
		var bs []int
		for _, v := range kernels.FeedInputs(m) {
			bs = in[v.Name].Shape
			break
		}
		for _, v := range m.Graph.Outputs {
			dims, _ := v.Type.Shape()
			shape := make([]int, len(dims))
			for i, d := range dims {
				switch {
				case d.Known:
					shape[i] = int(d.Value)
				case i < len(bs):
					shape[i] = bs[i]
				}
			}
			like[v.Name] = kernels.New(v.Type.ElemType(), shape...)
		}
	}
	if _, err := s.Run(in, like); err != nil {
		fail(err)
	}
	done := time.Now()
	json.NewEncoder(os.Stdout).Encode(map[string]float64{"load_seconds": loaded.Sub(start).Seconds(), "compute_seconds": done.Sub(loaded).Seconds()})
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ortrun:", err)
	os.Exit(1)
}
