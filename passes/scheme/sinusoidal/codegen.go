package sinusoidal

import (
	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
)

// emitSinusoidal is the code of a sinusoidal encoding.
func EmitSinusoidal(g *emit.Gen, f *passes.Finding, suffix string) (*emit.Part, error) {
	p, ok := f.Params.(*Params)
	if !ok {
		return nil, emit.Skip("params of %s", f.Scheme)
	}
	return absolute.EmitAbsolute(g, f, suffix, absolute.Spec{Name: "Sinusoidal", Func: "SinusoidalTable", Kind: "sinusoidal position encoding",
		Dim: p.Dim, Offset: absolute.Deref(p.PositionOffset), MaxPositions: p.MaxPositions, Sinusoid: true})
}
