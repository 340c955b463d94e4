package passes

import (
	"github.com/onnxpe/onnxpe/graph"
)

// Reusable sub-patterns of positional encodings. Detection is decided by
// numbers (probes); these name the form a match was written in, for the
// evidence rewrites read (which nodes compute rotate_half, say) and for
// --trace.

// half is a half of x along its last axis: a Slice, or an output of Split.
func half(x string) Pattern {
	return Thru(OpOf([]string{"Slice", "Split"}, Capture(x)))
}

// RotateHalf is rotate_half(x) = cat(-x2, x1) (GPT-NeoX, Llama).
var RotateHalf = Check(
	Op("Concat", Thru(Op("Neg", half("x")).As("neg")), half("x")).As("concat"),
	func(env Env, vals map[string]*graph.Value, nodes map[string]*graph.Node) string {
		if a := nodes["concat"].AttrInt("axis", 0); a != -1 && int(a) != env.Rank(vals["x"])-1 {
			return "rotate_half concatenates along another axis than the last"
		}
		return ""
	})

// every is a strided selection of x's last axis: a Slice with step 2 or a
// Gather of even or odd indices.
func every(x string) Pattern {
	return Thru(OpOf([]string{"Slice", "Gather"}, Capture(x)))
}

// RotateEveryTwo is rotate_every_two(x) = stack(-x[..., 1::2], x[..., ::2])
// flattened (GPT-J), written with Unsqueeze/Concat (or a stack) and a
// Reshape.
var RotateEveryTwo = Op("Reshape",
	Op("Concat",
		Op("Unsqueeze", Thru(Op("Neg", every("x")))),
		Op("Unsqueeze", every("x"))).As("stack"))

// ComplexPairs is the product of interleaved pairs (x0, x1) by (cos, sin)
// written on real numbers (Llama 4): x0·cos - x1·sin.
var ComplexPairs = Op("Sub",
	Comm("Mul", Thru(OpOf([]string{"Gather", "Slice", "Split"}, Capture("x"))), Capture("cos")),
	Comm("Mul", Thru(OpOf([]string{"Gather", "Slice", "Split"}, Ref("x"))), Capture("sin")))

// Distance is a matrix of relative positions: one position vector minus
// another, broadcast (key - query or query - key).
var Distance = Op("Sub",
	Thru(OpOf([]string{"Unsqueeze", "Reshape"}, Capture("a"))),
	Thru(OpOf([]string{"Unsqueeze", "Reshape"}, Capture("b"))))

// rotationForm names the form of a side's rotation: the first sub-pattern
// one of its nodes computes ("rotate_half", "rotate_every_two",
// "complex_pairs"), with the nodes it matched; "" when none matches (the
// rotation was still measured).
func (w *Work) rotationForm(s *side) (string, []*graph.Node) {
	forms := []struct {
		name string
		p    Pattern
	}{{"rotate_half", RotateHalf}, {"rotate_every_two", RotateEveryTwo}, {"complex_pairs", ComplexPairs}}
	for _, f := range forms {
		for _, n := range s.Nodes {
			if len(n.Outputs()) == 0 {
				continue
			}
			if m, _ := MatchValue(w, f.p, n.Output(0)); m != nil {
				return f.name, m.Nodes
			}
		}
	}
	return "", nil
}

// distanceIn finds a relative-distance matrix among nodes (a T5 or Shaw
// index, an ALiBi bias).
func (w *Work) distanceIn(nodes []*graph.Node) *graph.Value {
	for _, n := range nodes {
		if n.OpType != "Sub" || len(n.Outputs()) == 0 {
			continue
		}
		if m, _ := MatchValue(w, Distance, n.Output(0)); m != nil && w.Shape(n.Output(0)).Rank() >= 2 {
			return n.Output(0)
		}
	}
	return nil
}
