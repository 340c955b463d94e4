package codegen_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/onnxpe/onnxpe/codegen"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
)

// Generate a model's exact positional encoding as a Go package: the
// audit finds it, Generate turns the findings into source whose test
// holds golden vectors the executor computed on the model's own
// subgraph. The caller writes the files (onnxpe codegen writes them to a
// folder).
func ExampleGenerate() {
	m, err := graph.Load("../testmodels/models/rope_llama/model.onnx")
	if err != nil {
		log.Fatal(err)
	}
	rep, ctx, err := audit.AuditModel(m, "rope_llama", passes.Options{})
	if err != nil {
		log.Fatal(err)
	}
	res, err := codegen.Generate(rep, ctx, codegen.Options{Lang: "go", Package: "llamarope", MaxPositions: 64})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range res.Emitted {
		fmt.Printf("%s (%s) in layers %v: %v, %d golden values\n", e.Scheme, e.Form, e.Layers, e.Functions, e.Golden)
	}
	for _, f := range res.Files {
		fmt.Println(f.Name)
		// The package's exported functions.
		for _, l := range strings.Split(string(f.Data), "\n") {
			if strings.HasPrefix(l, "func R") || strings.HasPrefix(l, "func A") {
				fmt.Println("  " + strings.TrimSuffix(l, " {"))
			}
		}
	}
	// os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644) writes each.

	// Output:
	// rope (computed) in layers [0 1]: [RoPECosSin ApplyRoPE], 1104 golden values
	// llamarope.go
	//   func RoPECosSin(cos, sin []float32, positions []int64)
	//   func ApplyRoPE(x []float32, positions []int64, heads int)
	// llamarope_test.go
}
