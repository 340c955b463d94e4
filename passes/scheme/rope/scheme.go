package rope

import (
	"embed"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme"
)

// templates are the code generator's (templates/go, templates/c).
//
//go:embed templates
var templates embed.FS

// Color is the scheme's in the HTML report's layer map and plots
// (Okabe and Ito's palette, told apart with colour blindness).
const Color = "#0072b2"

// Scheme is rope's entry in the list of schemes (passes/schemes).
var Scheme = &scheme.Scheme{
	Name: Name,
	Doc: `Rotary position embedding: q and k rotated pair by pair by angles position·frequency.

Rotary position embedding (RoPE): pairs of the query and key dimensions
(half-split or interleaved, all or a leading part of the head) are rotated
by angles position·frequency, the frequencies base^(-2k/d) or scaled by a
rule (linear, NTK, dynamic NTK, YaRN, Llama 3, LongRoPE); multimodal
(M-RoPE: a position stream per section) and 2-D (axial: rows and columns
of a patch grid) forms too. Computed in the graph, read from cos/sin
tables, or fused (RotaryEmbedding, GroupQueryAttention's do_rotary).`,
	Color:    Color,
	Rank:     0,
	Params:   &Params{},
	Measure:  measure,
	Relative: true,
	Detect:   Detect,
	Rewrites: []scheme.Rewrite{{Name: "rope", Pass: Rewrite, Help: `each rotation of q and k becomes one RotaryEmbedding node
(--rope-op com.microsoft, the default, runs in ONNX Runtime
at any opset; --rope-op onnx is the standard op of opset 23:
the model's default opset is upgraded to 23 and the ops whose
signature changed on the way are converted, or the rewrite
is refused naming the op). The cos/sin caches hold what the
model computes at positions 0..N-1 (N = --max-positions, else
the rows of the model's own table, else 4096), in its float
type, one pair per distinct set of frequencies. When the
cos/sin depend on more than the positions (dynamic NTK), the
rotation is fused and the cos/sin stay computed; the report
says so. Given explicitly, --rope-op also converts the
RotaryEmbedding nodes a model already has from the other
domain (input order, position-id form, attributes).`}, {Name: "mrope", Pass: RewriteMRoPE, Help: `multimodal RoPE's cos and sin become [N, dim] tables gathered
at the [streams, batch, seq] position ids; the sections stay`}, {Name: "axial", Pass: RewriteAxial, Help: `the cos and sin axial 2-D RoPE computes from a fixed patch
grid (rows t / cols, columns t % cols, or a meshgrid) become
constants over the grid's cells (the image's size fixes them;
--max-positions does not apply)`}},
	Extend:  &rewrite.Extender{Methods: rewrite.RoPEMethods, Absent: "is a RoPE rule; the model has no RoPE", Check: CheckRoPEMethod, Plan: PlanRoPE, Apply: ApplyRoPE},
	Codegen: &emit.Generator{Emit: EmitRoPE, Templates: templates},
	Plots:   Plots,
	Lower:   LowerRoPE,
}
