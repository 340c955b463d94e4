package rope

import (
	"fmt"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes/probe"
)

// rotationCase is one call of ApplyMRoPE or ApplyAxialRoPE in the generated
// tests: x of goldenInput values, [N][Heads][head dim], rotated at the
// positions of a case (M-RoPE) or over a grid of Rows x Cols (axial) must
// give Want, the model's own rotation of the same x.
type rotationCase struct {
	N, Heads   int
	Rows, Cols int
	Positions  *emit.Table
	Want       *emit.Table
}

// rotationArith is the element type the rotation of rot multiplies and
// adds in, or why the Apply functions of M-RoPE and axial 2-D RoPE are
// not written for it (they rotate float32 q in float32, as the cos and
// sin they read are float32).
func rotationArith(g *emit.Gen, rot *codeRotation) (string, string) {
	_, qType, err := probe.BoundShape(g.Ctx, rot.in, 4)
	if err != nil {
		return "", fmt.Sprintf("the type of q is not known (%v)", err)
	}
	if qType != graph.Float {
		return "", fmt.Sprintf("the model rotates %s q; the rotation is written for float32 q only", emit.TypeName(qType))
	}
	if a := arithType(g, rot, "float32"); a != "float32" {
		return "", fmt.Sprintf("the model's rotation multiplies and adds in %s; it is written in float32 only", a)
	}
	return "float32", ""
}

// goldenRotation runs the model's rotation of x = goldenInput at sequence
// length seq (with cuts given) and checks that the arithmetic the
// templates write gives it: cosSin(token, k) is the cos and sin the
// generated code applies to pair k of a token, rotated false for a token
// the code leaves as it is. Each product and sum is rounded to float32;
// dimensions outside the pairs are left as they are. It returns the
// case, with the model's rotated x as Want, or the first difference as
// the reason not to write the Apply function.
func goldenRotation(g *emit.Gen, rot *codeRotation, ev *Evidence, headDim, seq int, cuts map[string]*kernels.Tensor, name string,
	cosSin func(tok, k int) (c, s float64, rotated bool)) (*rotationCase, string, error) {
	res, err := rotated(g, rot, ev, headDim, seq, goldenInput, cuts)
	if err != nil {
		return nil, "", err
	}
	r32 := func(x float64) float64 { return emit.RoundTo(graph.Float, x) }
	for tok := 0; tok < res.n; tok++ {
		for h := 0; h < res.heads; h++ {
			row := make([]float64, headDim)
			for e := range row {
				row[e] = goldenInput((tok*res.heads+h)*headDim + e)
			}
			for k, pr := range ev.Pairs {
				c, s, ok := cosSin(tok, k)
				if !ok {
					continue
				}
				a, b := row[pr[0]], row[pr[1]]
				row[pr[0]] = r32(r32(a*c) - r32(b*s))
				row[pr[1]] = r32(r32(b*c) + r32(a*s))
			}
			for e, want := range row {
				if got := res.at(tok, h, e); !emit.Close32(want, got) {
					return nil, fmt.Sprintf("at token %d head %d dimension %d the model's rotation gives %.9g, x1·cos - x2·sin and x2·cos + x1·sin of the pairs in float32 give %.9g", tok, h, e, got, want), nil
				}
			}
		}
	}
	return &rotationCase{N: res.n, Heads: res.heads,
		Want: &emit.Table{Name: name, Type: "float32", Vals: res.out, Golden: true}}, "", nil
}

// applyDoc is the documentation line of an Apply function: the layout it
// rotates (the audit's pairs), or why it is not written.
func applyDoc(fn, layout string, rotaryDim, headDim int, arith, why string) string {
	if why != "" {
		return fmt.Sprintf("%s is not written: %s.", fn, why)
	}
	lay := "pairs as the audit found them"
	switch layout {
	case "half_split":
		lay = "half-split pairs (i, i + rotary dim / 2)"
	case "interleaved":
		lay = "interleaved pairs (2i, 2i + 1)"
	}
	return fmt.Sprintf("%s rotates q or k as the model does: %s, %d of the %d dimensions of a head (the others left as they are), x1·cos - x2·sin and x2·cos + x1·sin, each product and sum rounded to %s.",
		fn, lay, rotaryDim, headDim, arith)
}
