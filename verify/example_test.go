package verify_test

import (
	"context"
	"fmt"
	"log"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/schemes"
	"github.com/onnxpe/onnxpe/verify"
)

// Rewrite a model and prove the rewrite equal to it before saving it, as
// onnxpe rewrite does: both models run on input sets synthesised to
// exercise positions (a single token, a padded batch, the longest
// sequence, the largest positions) and every output is compared.
func ExampleCompare() {
	m, err := graph.Load("../testmodels/models/rope_llama/model.onnx")
	if err != nil {
		log.Fatal(err)
	}
	rw, _, err := audit.RewriteModel(m, passes.Options{}, schemes.Rewriters()...)
	if err != nil {
		log.Fatal(err)
	}
	// The audit's findings tell verify which input holds positions and
	// how far they go.
	hints, err := verify.AuditHints(m)
	if err != nil {
		log.Fatal(err)
	}
	rep, err := verify.Compare(context.Background(), m, rw.M, verify.Options{Hints: hints, PathA: "rope_llama", PathB: "rewritten"})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range rep.Sets {
		o := s.Outputs[0]
		fmt.Printf("%s (%s): %s %v within rtol %g, atol %g: %v\n", s.Name, s.Spec.Purpose, o.Name, o.Shape, o.Tolerance.Rtol, o.Tolerance.Atol, s.Equal)
	}
	fmt.Println(rep.Summary)
	// Output:
	// token (a single token): logits [2 1 64] within rtol 1e-05, atol 2e-06: true
	// short (a short sequence, padded rows): logits [3 7 64] within rtol 1e-05, atol 2e-06: true
	// long (the longest sequence (default (no stored table bounds positions))): logits [2 128 64] within rtol 1e-05, atol 2e-06: true
	// far (positions up to 4095, the largest the model supports): logits [2 7 64] within rtol 1e-05, atol 2e-06: true
	// equal: models A and B agree on 4 input sets
}
