package schemes

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme/alibi"
	"github.com/onnxpe/onnxpe/passes/scheme/disentangled"
	"github.com/onnxpe/onnxpe/passes/scheme/floater"
	"github.com/onnxpe/onnxpe/passes/scheme/learned"
	"github.com/onnxpe/onnxpe/passes/scheme/relsin"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
	"github.com/onnxpe/onnxpe/passes/scheme/sinusoidal"
	"github.com/onnxpe/onnxpe/passes/scheme/t5"
)

// Rewriters are the rewrite passes by the name --passes uses, in the
// order they run by default.
var Rewriters = []*passes.Pass[*rewrite.Change]{rope.RewriteRoPE, sinusoidal.RewriteSinusoidal, learned.RewriteLearned, alibi.RewriteALiBi, t5.RewriteT5,
	relsin.RewriteRelSin, disentangled.RewriteDisentangled, rope.RewriteMRoPE, rope.RewriteAxial, floater.RewriteFloater}

// RewriterNames are the short names of the rewrite passes (--passes).
var RewriterNames = map[string]*passes.Pass[*rewrite.Change]{"rope": rope.RewriteRoPE, "sinusoidal": sinusoidal.RewriteSinusoidal, "learned": learned.RewriteLearned, "alibi": alibi.RewriteALiBi, "t5": t5.RewriteT5,
	"relative_sinusoidal": relsin.RewriteRelSin, "disentangled": disentangled.RewriteDisentangled, "mrope": rope.RewriteMRoPE,
	"axial": rope.RewriteAxial, "floater": floater.RewriteFloater}
