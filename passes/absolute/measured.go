package absolute

import (
	"fmt"

	"github.com/onnxpe/onnxpe/passes"
)

// Measured is the evidence of an absolute finding: the value added to the
// embeddings read at consecutive positions for one sequence of tokens,
// and again for other tokens at the same positions. what names what the
// rows were read as ("a sinusoid", "a trained table").
func Measured(f *passes.Finding, what string) *passes.Measured {
	ev, _ := f.Evidence.(*TableEvidence)
	if ev == nil {
		return nil
	}
	if len(ev.Rows0) == 0 {
		return &passes.Measured{Test: passes.TestFusedContract,
			Summary: fmt.Sprintf("a fused op (%s) adds the rows of the table %s read at the position ids its contract takes; the values were not read", ev.Add, ev.Table)}
	}
	tokens := "the same for other tokens at those positions"
	residual := passes.Sig3(ev.TokenChange)
	if ev.TokenChange < 0 {
		tokens, residual = "(other tokens could not be probed)", nil
	}
	test := passes.TestPositionRows
	if f.Fused {
		test = passes.TestFusedContract
	}
	return &passes.Measured{Test: test,
		Summary: fmt.Sprintf("the value added at %s differs between positions (%d rows read: %s) and is %s", ev.Add, len(ev.Rows0), what, tokens),
		Change:  passes.Sig3(ev.Change), Residual: residual}
}
