package extend_test

import (
	"fmt"
	"log"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/extend"
	"github.com/onnxpe/onnxpe/passes/rewrite"
)

// Give a model a longer context: a Llama trained on 32 positions extended
// to 128 with linear position interpolation. Its RoPE frequencies become
// those of the rule, and the audit of the result reads the rule back.
// onnxpe extend also checks the result against a reference built with
// the rule and runs it at 128 positions before writing it.
func ExampleExtendModel() {
	m, err := graph.Load("../../testmodels/models/rope_llama/model.onnx")
	if err != nil {
		log.Fatal(err)
	}
	x, err := extend.ExtendModel(m, rewrite.ExtendOptions{To: 128, Method: rewrite.MethodLinear, OriginalMax: 32})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d -> %d positions\n", *x.Report.OldMax, x.Report.NewMax)
	for _, it := range x.Report.Items {
		fmt.Printf("%s (%s) in layers %v: %s, factor %v, %d edits\n", it.Scheme, it.Form, it.Layers, it.Method, it.Params["factor"], len(it.Edits))
	}
	rep, _, err := audit.AuditModel(x.M, "extended", passes.Options{})
	if err != nil {
		log.Fatal(err)
	}
	p := rep.Findings[0].Params.Map()
	fmt.Printf("the extended model: %s, scaling %v, factor %v\n", rep.Findings[0].Scheme, p["scaling"], p["factor"])
	// x.M.Save("llama_128.onnx", graph.SaveOptions{}) would write it.

	// Output:
	// 32 -> 128 positions
	// rope (computed) in layers [0 1]: linear, factor 4, 1 edits
	// the extended model: rope, scaling linear, factor 4
}
