package rope

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/pattern"
	"github.com/onnxpe/onnxpe/passes/work"
)

// Reusable sub-patterns of positional encodings. Detection is decided by
// numbers (probes); these name the form a match was written in, for the
// evidence rewrites read (which nodes compute rotate_half, say) and for
// --trace.

// half is a half of x along its last axis: a Slice, or an output of Split.
func half(x string) pattern.Pattern {
	return pattern.Thru(pattern.OpOf([]string{"Slice", "Split"}, pattern.Capture(x)))
}

// RotateHalf is rotate_half(x) = cat(-x2, x1) (GPT-NeoX, Llama).
var RotateHalf = pattern.Check(
	pattern.Op("Concat", pattern.Thru(pattern.Op("Neg", half("x")).As("neg")), half("x")).As("concat"),
	func(env pattern.Env, vals map[string]*graph.Value, nodes map[string]*graph.Node) string {
		if a := nodes["concat"].AttrInt("axis", 0); a != -1 && int(a) != env.Rank(vals["x"])-1 {
			return "rotate_half concatenates along another axis than the last"
		}
		return ""
	})

// every is a strided selection of x's last axis: a Slice with step 2 or a
// Gather of even or odd indices.
func every(x string) pattern.Pattern {
	return pattern.Thru(pattern.OpOf([]string{"Slice", "Gather"}, pattern.Capture(x)))
}

// RotateEveryTwo is rotate_every_two(x) = stack(-x[..., 1::2], x[..., ::2])
// flattened (GPT-J), written with Unsqueeze/Concat (or a stack) and a
// Reshape.
var RotateEveryTwo = pattern.Op("Reshape",
	pattern.Op("Concat",
		pattern.Op("Unsqueeze", pattern.Thru(pattern.Op("Neg", every("x")))),
		pattern.Op("Unsqueeze", every("x"))).As("stack"))

// ComplexPairs is the product of interleaved pairs (x0, x1) by (cos, sin)
// written on real numbers (Llama 4): x0·cos - x1·sin.
var ComplexPairs = pattern.Op("Sub",
	pattern.Comm("Mul", pattern.Thru(pattern.OpOf([]string{"Gather", "Slice", "Split"}, pattern.Capture("x"))), pattern.Capture("cos")),
	pattern.Comm("Mul", pattern.Thru(pattern.OpOf([]string{"Gather", "Slice", "Split"}, pattern.Ref("x"))), pattern.Capture("sin")))

// rotationForm names the form of a side's rotation: the first sub-pattern
// one of its nodes computes ("rotate_half", "rotate_every_two",
// "complex_pairs"), with the nodes it matched; "" when none matches (the
// rotation was still measured).
func rotationForm(w *work.Work, s *attn.Side) (string, []*graph.Node) {
	forms := []struct {
		name string
		p    pattern.Pattern
	}{{"rotate_half", RotateHalf}, {"rotate_every_two", RotateEveryTwo}, {"complex_pairs", ComplexPairs}}
	for _, f := range forms {
		for _, n := range s.Nodes {
			if len(n.Outputs()) == 0 {
				continue
			}
			if m, _ := pattern.MatchValue(w, f.p, n.Output(0)); m != nil {
				return f.name, m.Nodes
			}
		}
	}
	return "", nil
}
