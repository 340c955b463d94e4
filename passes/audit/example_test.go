package audit_test

import (
	"encoding/json"
	"fmt"
	"log"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/schemes"
)

// Audit a model: which positional encodings it uses, in which attention
// layers, with which parameters. The model here is a Llama exported by
// PyTorch, bundled with onnxpe; any ONNX file will do.
func ExampleAuditModel() {
	m, err := graph.Load("../../testmodels/models/rope_llama/model.onnx")
	if err != nil {
		log.Fatal(err)
	}
	rep, _, err := audit.AuditModel(m, "rope_llama", passes.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.Model, rep.Schemes, len(rep.Layers), "attention layers")
	for _, f := range rep.Findings {
		p := f.Params.Map() // the params of the report's JSON (passes/report.schema.json)
		fmt.Printf("%s in layers %v: base %v, %v, rotary_dim %v, scaling %v\n", f.Scheme, f.Layers, p["base"], p["layout"], p["rotary_dim"], p["scaling"])
	}
	// The report is what onnxpe audit --json prints.
	js, err := json.Marshal(rep.Findings[0].Params.Map())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(js))
	// Output:
	// rope_llama [rope] 2 attention layers
	// rope in layers [0 1]: base 10000, half_split, rotary_dim 16, scaling none
	// {"base":10000,"factor":1,"head_dim":16,"layout":"half_split","max_positions":null,"num_heads":4,"num_kv_heads":2,"rotary_dim":16,"scaling":"none"}
}

// Rewrite a model for deployment: its computed RoPE becomes fused
// RotaryEmbedding nodes reading precomputed cos/sin caches. The caller's
// model is not changed; verify.Compare proves the two equal (see its
// example) before the rewritten one is saved.
func ExampleRewriteModel() {
	m, err := graph.Load("../../testmodels/models/rope_llama/model.onnx")
	if err != nil {
		log.Fatal(err)
	}
	rw, _, err := audit.RewriteModel(m, passes.Options{}, schemes.Rewriters()...)
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range rw.Changes { // one per rewrite pass run
		if len(c.Removed)+len(c.Added) > 0 {
			fmt.Printf("%s: layers %v, %d nodes removed, %d added, %d bytes of constants\n", c.Scheme, c.Layers, len(c.Removed), len(c.Added), c.ConstBytes)
		}
	}
	fused := 0
	for _, n := range rw.M.Graph.Nodes() {
		if n.OpType == "RotaryEmbedding" {
			fused++
		}
	}
	fmt.Println(fused, "RotaryEmbedding nodes")
	// rw.M.Save("model_fused.onnx", graph.SaveOptions{}) would write it.

	// Output:
	// rope: layers [0 1], 134 nodes removed, 4 added, 262144 bytes of constants
	// 4 RotaryEmbedding nodes
}
