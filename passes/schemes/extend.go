package schemes

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme/alibi"
	"github.com/onnxpe/onnxpe/passes/scheme/floater"
	"github.com/onnxpe/onnxpe/passes/scheme/learned"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
	"github.com/onnxpe/onnxpe/passes/scheme/sinusoidal"
)

// extenders are the schemes' extensions; a scheme without one is
// computed for any position.
var Extenders = map[string]rewrite.Extender{
	passes.RoPEScheme:         {Methods: rewrite.RoPEMethods, Absent: "is a RoPE rule; the model has no RoPE", Check: rope.CheckRoPEMethod, Plan: rope.PlanRoPE, Apply: rope.ApplyRoPE},
	passes.LearnedAbsolute:    {Methods: []string{rewrite.MethodHierarchical}, Absent: "decomposes learned position tables; the model has none", Plan: learned.PlanLearned, Apply: absolute.ApplyTable},
	passes.Sinusoidal:         {Plan: sinusoidal.PlanSinusoidal, Apply: absolute.ApplyTable},
	passes.ALiBi:              {Plan: alibi.PlanALiBi},
	passes.Floater:            {Plan: floater.PlanFloater},
	passes.T5RelativeBias:     {Plan: rewrite.PlanRelative},
	passes.RelativeClipped:    {Plan: rewrite.PlanRelative},
	passes.RelativeSinusoidal: {Plan: rewrite.PlanRelative},
	passes.Disentangled:       {Plan: rewrite.PlanRelative},
}

// extendOrder is the order in which schemes are planned.
var ExtendOrder = []string{passes.RoPEScheme, passes.Sinusoidal, passes.LearnedAbsolute, passes.ALiBi, passes.T5RelativeBias, passes.RelativeClipped, passes.RelativeSinusoidal, passes.Disentangled, passes.ComplexOrder, passes.Floater}
