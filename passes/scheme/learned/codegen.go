package learned

import (
	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
)

// emitLearned is the code of a learned position table.
func EmitLearned(g *emit.Gen, f *passes.Finding, suffix string) (*emit.Part, error) {
	p, ok := f.Params.(*Params)
	if !ok {
		return nil, emit.Skip("params of %s", f.Scheme)
	}
	return absolute.EmitAbsolute(g, f, suffix, absolute.Spec{Name: "PositionEmbedding", Func: "PositionEmbedding", Kind: "learned position embedding",
		Dim: p.Dim, Offset: absolute.Deref(p.PositionOffset), MaxPositions: p.MaxPositions})
}
