package testmodels

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/onnxpe/onnxpe/graph"
)

// AxialForm is how a 2-D RoPE vision transformer computes the angles of
// its patch grid in the graph.
type AxialForm int

const (
	// AxialDivMod is naver-ai/rope-vit's compute_axial_cis as its forward
	// calls it for the image's grid: t = 0..rows·cols-1, col = t % cols,
	// row = t / cols; angles [col·ω, row·ω] (the first half of the pairs
	// turned by the column), ω_i = θ^(-4i/head_dim); pairs (x[2i], x[2i+1])
	// multiplied as complex numbers by cos + i·sin.
	AxialDivMod AxialForm = iota
	// AxialMeshgrid is EVA-02's VisionRotaryEmbeddingFast computed for the
	// grid: the frequencies of Range(rows) and of Range(cols), each
	// repeated for both dimensions of a pair ("(n r)", r = 2), broadcast
	// over the grid (rows first) and concatenated, cos and sin viewed as
	// [rows·cols, head_dim]; t·cos + rotate_half(t)·sin with the
	// interleaved rotate_half (stack(-x2, x1)).
	AxialMeshgrid
)

func (f AxialForm) String() string { return [...]string{"divmod", "meshgrid"}[f] }

// AxialConfig shapes a ViT with axial 2-D RoPE built by AxialViT.
type AxialConfig struct {
	Form AxialForm
	// ImageH and ImageW are the image's size; 0 leaves both open
	// (symbolic height and width: the grid follows the image).
	ImageH, ImageW int
	Patch          int
	Hidden, Heads  int
	Layers, FFN    int
	Classes        int
	Theta          float64
	Seed           uint64
	// GridFromImage reads the grid's rows and columns from the image's
	// shape (height / patch, width / patch, as rope-vit's forward does
	// with x.shape) instead of the patch embedding's output shape.
	GridFromImage bool
}

// DefaultAxial is rope_axial_vit's shape: a 16x24 image in 4x4 patches
// (a 4 x 6 grid), hidden 32, 2 heads of 16, 2 layers, θ 100.
var DefaultAxial = AxialConfig{Form: AxialDivMod, ImageH: 16, ImageW: 24, Patch: 4, Hidden: 32, Heads: 2, Layers: 2, FFN: 64, Classes: 10, Theta: 100, Seed: 21}

// AxialViT builds a vision transformer with axial 2-D RoPE whose cos and
// sin are computed in the graph from the patch grid: the grid's rows and
// columns are read from the shape of the patch embedding (Conv), so a
// fixed image gives a fixed grid and an open one the image's. A class
// token leads the patches and is not rotated (q[:, :, 1:], as rope-vit and
// EVA-02 do). Input pixel_values [batch, 3, H, W]; output logits [batch,
// classes] from the class token.
func AxialViT(cfg AxialConfig) *graph.Model {
	m := graph.NewModel(8, "onnxpe-testmodels", graph.Opset{Domain: "", Version: 17})
	b := &llamaBuilder{g: m.Graph, rng: rand.New(rand.NewPCG(cfg.Seed, 13))}
	g := b.g
	d, hd := int64(cfg.Hidden), int64(cfg.Hidden/cfg.Heads)
	dims := []graph.Dim{{Param: "batch"}, {Value: 3, Known: true}, {Param: "height"}, {Param: "width"}}
	if cfg.ImageH > 0 {
		dims[2], dims[3] = graph.Dim{Value: int64(cfg.ImageH), Known: true}, graph.Dim{Value: int64(cfg.ImageW), Known: true}
	}
	px := g.AddInput("pixel_values", graph.TensorType(graph.Float, dims))
	attr := func(name string, v ...int64) []*graph.Attr { return []*graph.Attr{graph.IntsAttr(name, v...)} }
	axis := func(a int64) []*graph.Attr { return []*graph.Attr{graph.IntAttr("axis", a)} }
	scalarI := func(name string, v int64) *graph.Value { return i64Scalar(g, name, v) }

	p := int64(cfg.Patch)
	patches := b.op("Conv", append(attr("kernel_shape", p, p), graph.IntsAttr("strides", p, p)),
		px, b.weight("patch_embed.weight", d, 3, p, p), b.weight("patch_embed.bias", d)) // [B, d, rows, cols]
	var rows, cols *graph.Value
	if cfg.GridFromImage {
		img := b.op("Shape", nil, px)
		rows = b.op("Div", nil, b.op("Gather", axis(0), img, scalarI("image_h_axis", 2)), scalarI("patch_h", p))
		cols = b.op("Div", nil, b.op("Gather", axis(0), img, scalarI("image_w_axis", 3)), scalarI("patch_w", p))
	} else {
		shape := b.op("Shape", nil, patches)
		rows = b.op("Gather", axis(0), shape, scalarI("grid_rows_axis", 2))
		cols = b.op("Gather", axis(0), shape, scalarI("grid_cols_axis", 3))
	}
	x := b.op("Transpose", attr("perm", 0, 2, 1), b.op("Reshape", nil, patches, b.i64("flatten_shape", 0, 0, -1))) // [B, T, d]
	cls := b.weight("cls_token", 1, 1, d)
	batch := b.op("Slice", nil, b.op("Shape", nil, x), b.i64("batch_start", 0), b.i64("batch_end", 1))
	x = b.op("Concat", axis(1), b.op("Expand", nil, cls, b.op("Concat", axis(0), batch, b.i64("cls_shape", 1, d))), x) // [B, 1+T, d]

	// Frequencies of one axis: θ^(-4i/head_dim), i < head_dim/4.
	nf := hd / 4
	freqs := make([]float32, nf)
	for i := range freqs {
		freqs[i] = float32(1 / math.Pow(cfg.Theta, float64(4*i)/float64(hd)))
	}
	toF := []*graph.Attr{graph.IntAttr("to", int64(graph.Float))}
	var cos, sin *graph.Value // [1, 1, T, hd/2] (divmod) or [1, 1, T, hd] (meshgrid)
	switch cfg.Form {
	case AxialDivMod:
		fx := f32(g, "rope.freqs_x", []int64{1, nf}, freqs...)
		fy := f32(g, "rope.freqs_y", []int64{1, nf}, freqs...)
		t := b.op("Range", nil, scalarI("zero", 0), b.op("Mul", nil, rows, cols), scalarI("one", 1))
		tx := b.op("Cast", toF, b.op("Mod", nil, t, cols))
		ty := b.op("Cast", toF, b.op("Div", nil, t, cols))
		ax := b.op("Mul", nil, b.op("Unsqueeze", nil, tx, b.i64("ax_1", 1)), fx) // [T, hd/4]
		ay := b.op("Mul", nil, b.op("Unsqueeze", nil, ty, b.i64("ay_1", 1)), fy)
		ang := b.op("Concat", axis(-1), ax, ay) // [T, hd/2]
		cos = b.op("Unsqueeze", nil, b.op("Cos", nil, ang), b.i64("cos_axes", 0, 1))
		sin = b.op("Unsqueeze", nil, b.op("Sin", nil, ang), b.i64("sin_axes", 0, 1))
	case AxialMeshgrid:
		f := f32(g, "rope.freqs", []int64{nf}, freqs...)
		axisFreqs := func(n *graph.Value, name string) *graph.Value {
			r := b.op("Cast", toF, b.op("Range", nil, scalarI(name+"_start", 0), n, scalarI(name+"_step", 1)))
			a := b.op("Mul", nil, b.op("Unsqueeze", nil, r, b.i64(name+"_u1", 1)), f) // [n, hd/4]
			a = b.op("Unsqueeze", nil, a, b.i64(name+"_u2", -1))                      // [n, hd/4, 1]
			return b.op("Reshape", nil, b.op("Concat", axis(-1), a, a), b.i64(name+"_pairs", 0, -1))
		}
		fr := b.op("Unsqueeze", nil, axisFreqs(rows, "rows"), b.i64("rows_u", 1)) // [rows, 1, hd/2]
		fc := b.op("Unsqueeze", nil, axisFreqs(cols, "cols"), b.i64("cols_u", 0)) // [1, cols, hd/2]
		unsq0 := func(v *graph.Value, name string) *graph.Value { return b.op("Unsqueeze", nil, v, b.i64(name, 0)) }
		grid := b.op("Concat", axis(0), unsq0(rows, "grid_r"), unsq0(cols, "grid_c"), b.i64("grid_half", hd/2))
		ang := b.op("Concat", axis(-1), b.op("Expand", nil, fr, grid), b.op("Expand", nil, fc, grid)) // [rows, cols, hd]
		flat := func(v *graph.Value, name string) *graph.Value {
			return b.op("Unsqueeze", nil, b.op("Reshape", nil, v, b.i64(name+"_flat", -1, hd)), b.i64(name+"_axes", 0, 1))
		}
		cos, sin = flat(b.op("Cos", nil, ang), "cos"), flat(b.op("Sin", nil, ang), "sin")
	}

	// pairs splits [B, H, T, hd] into its pairs' first and second parts.
	pairs := func(t *graph.Value, l int, nm string) (*graph.Value, *graph.Value) {
		r := b.op("Reshape", nil, t, b.i64(fmt.Sprintf("l%d_%s_pairs", l, nm), 0, 0, 0, -1, 2))
		return b.op("Gather", axis(-1), r, scalarI(fmt.Sprintf("l%d_%s_re", l, nm), 0)),
			b.op("Gather", axis(-1), r, scalarI(fmt.Sprintf("l%d_%s_im", l, nm), 1))
	}
	interleave := func(a, c *graph.Value, l int, nm string) *graph.Value {
		u := func(v *graph.Value, k string) *graph.Value {
			return b.op("Unsqueeze", nil, v, b.i64(fmt.Sprintf("l%d_%s_%s", l, nm, k), -1))
		}
		st := b.op("Concat", axis(-1), u(a, "u0"), u(c, "u1"))
		return b.op("Reshape", nil, st, b.i64(fmt.Sprintf("l%d_%s_flat", l, nm), 0, 0, 0, -1))
	}
	rotate := func(t *graph.Value, l int, nm string) *graph.Value {
		head := b.op("Slice", nil, t, b.i64(fmt.Sprintf("l%d_%s_h0", l, nm), 0), b.i64(fmt.Sprintf("l%d_%s_h1", l, nm), 1), b.i64(fmt.Sprintf("l%d_%s_hax", l, nm), 2))
		rest := b.op("Slice", nil, t, b.i64(fmt.Sprintf("l%d_%s_r0", l, nm), 1), b.i64(fmt.Sprintf("l%d_%s_r1", l, nm), math.MaxInt64), b.i64(fmt.Sprintf("l%d_%s_rax", l, nm), 2))
		var rot *graph.Value
		switch cfg.Form {
		case AxialDivMod: // (a + ib)(c + is)
			a, c := pairs(rest, l, nm)
			re := b.op("Sub", nil, b.op("Mul", nil, a, cos), b.op("Mul", nil, c, sin))
			im := b.op("Add", nil, b.op("Mul", nil, a, sin), b.op("Mul", nil, c, cos))
			rot = interleave(re, im, l, nm)
		case AxialMeshgrid: // t·cos + rotate_half(t)·sin
			x1, x2 := pairs(rest, l, nm)
			rh := interleave(b.op("Neg", nil, x2), x1, l, nm+"_rh")
			rot = b.op("Add", nil, b.op("Mul", nil, rest, cos), b.op("Mul", nil, rh, sin))
		}
		return b.op("Concat", axis(2), head, rot)
	}
	ln := func(x *graph.Value, name string) *graph.Value {
		w := f32(g, name+".weight", []int64{d}, ones32(int(d))...)
		return b.op("LayerNormalization", []*graph.Attr{graph.IntAttr("axis", -1), graph.FloatAttr("epsilon", 1e-6)}, x, w, b.weight(name+".bias", d))
	}
	lin := func(x *graph.Value, name string, in, out int64) *graph.Value {
		return b.op("Add", nil, b.op("MatMul", nil, x, b.weight(name+".weight", in, out)), b.weight(name+".bias", out))
	}
	heads := func(t *graph.Value, l int, nm string) *graph.Value {
		r := b.op("Reshape", nil, t, b.i64(fmt.Sprintf("l%d_%s_shape", l, nm), 0, 0, int64(cfg.Heads), hd))
		return b.op("Transpose", attr("perm", 0, 2, 1, 3), r)
	}
	// Nodes are named as PyTorch's exporter names them (/blocks.N/Op_k):
	// the audit's robustness test wraps each layer in a function.
	named := 0
	nameNodes := func(scope string) {
		for i, n := range g.Nodes()[named:] {
			n.Name = fmt.Sprintf("%s/%s_%d", scope, n.OpType, named+i)
		}
		named = len(g.Nodes())
	}
	nameNodes("")
	for l := 0; l < cfg.Layers; l++ {
		pre := fmt.Sprintf("blocks.%d", l)
		h := ln(x, pre+".norm1")
		q := rotate(heads(lin(h, pre+".attn.q", d, d), l, "q"), l, "q")
		k := rotate(heads(lin(h, pre+".attn.k", d, d), l, "k"), l, "k")
		v := heads(lin(h, pre+".attn.v", d, d), l, "v")
		s := b.op("Mul", nil, b.op("MatMul", nil, q, b.op("Transpose", attr("perm", 0, 1, 3, 2), k)), b.scalar(pre+".attn.scale", float32(1/math.Sqrt(float64(hd)))))
		a := b.op("MatMul", nil, b.op("Softmax", axis(-1), s), v)
		o := b.op("Reshape", nil, b.op("Transpose", attr("perm", 0, 2, 1, 3), a), b.i64(pre+".attn.merge", 0, 0, d))
		x = b.op("Add", nil, x, lin(o, pre+".attn.proj", d, d))
		h = lin(ln(x, pre+".norm2"), pre+".mlp.fc1", d, int64(cfg.FFN))
		gelu := b.op("Mul", nil, b.op("Mul", nil, h, b.scalar(pre+".mlp.half", 0.5)),
			b.op("Add", nil, b.op("Erf", nil, b.op("Div", nil, h, b.scalar(pre+".mlp.sqrt2", math.Sqrt2))), b.scalar(pre+".mlp.one", 1)))
		x = b.op("Add", nil, x, lin(gelu, pre+".mlp.fc2", int64(cfg.FFN), d))
		nameNodes("/" + pre)
	}
	clsOut := b.op("Gather", axis(1), ln(x, "norm"), scalarI("cls_index", 0)) // [B, d]
	logits := lin(clsOut, "head", d, int64(cfg.Classes))
	logits.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Value: int64(cfg.Classes), Known: true}})
	mustRename(g, logits, "logits")
	nameNodes("")
	g.AddOutput(logits)
	return m
}

func ones32(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

// AxialTruth is the audit an AxialViT model must give: one rope finding
// over every layer, interleaved pairs, each axis's frequencies θ^(-2i/d')
// for d' = head_dim/2 (reported as the base θ), axes 2, and the grid of a
// fixed image (null when the image is open).
func AxialTruth(cfg AxialConfig) Truth {
	layers := make([]int, cfg.Layers)
	ls := make([]LayerScheme, cfg.Layers)
	for i := range layers {
		layers[i] = i
		ls[i] = LayerScheme{Index: i, Scheme: "rope"}
	}
	hd := float64(cfg.Hidden / cfg.Heads)
	var grid any
	if cfg.ImageH > 0 {
		grid = []any{float64(cfg.ImageH / cfg.Patch), float64(cfg.ImageW / cfg.Patch)}
	}
	return Truth{
		Schemes: []string{"rope"},
		Layers:  ls,
		Findings: []FindingTruth{{Scheme: "rope", Layers: layers, Params: map[string]any{
			"layout": "interleaved", "base": cfg.Theta, "head_dim": hd, "rotary_dim": hd,
			"num_heads": float64(cfg.Heads), "num_kv_heads": float64(cfg.Heads), "scaling": "none", "factor": 1.0,
			"max_positions": nil, "axes": 2.0, "grid": grid,
		}}},
	}
}

// AxialSynthetics are the Go-built 2-D RoPE models whose cos and sin the
// graph computes from the patch grid (the corpus's rope_axial_vit stores
// them), of a fixed image and, as real ViTs are exported, of an image of
// open size (pixel_values [batch, 3, height, width]: the grid follows the
// image). They are kept apart from Synthetics; codegen's acceptance test
// generates both lists.
func AxialSynthetics() []Synthetic {
	mesh := DefaultAxial
	mesh.Form, mesh.Theta, mesh.Seed = AxialMeshgrid, 10000, 22
	open, meshOpen := DefaultAxial, mesh
	open.ImageH, open.ImageW, open.Seed, open.GridFromImage = 0, 0, 23, true
	meshOpen.ImageH, meshOpen.ImageW, meshOpen.Seed = 0, 0, 24
	var out []Synthetic
	for _, c := range []struct {
		name, note string
		cfg        AxialConfig
	}{
		{"rope_axial_divmod", "rope-vit's compute_axial_cis in the graph: col = t % cols, row = t / cols of the 4 x 6 grid the patch embedding's shape gives, complex-pair rotation, class token not rotated", DefaultAxial},
		{"rope_axial_meshgrid", "EVA-02's VisionRotaryEmbeddingFast in the graph: Range(rows) and Range(cols) frequencies repeated per pair and broadcast over the 4 x 6 grid (rows first), t·cos + rotate_half(t)·sin, θ 10000", mesh},
		{"rope_axial_divmod_open", "rope_axial_divmod over images of open size (pixel_values [batch, 3, height, width]): the grid's rows and columns are the image's height and width divided by the patch size at run time (rope-vit's forward: H // patch_size, W // patch_size from x.shape)", open},
		{"rope_axial_meshgrid_open", "rope_axial_meshgrid over images of open size (pixel_values [batch, 3, height, width]): the two Ranges run over the patch embedding's output sizes at run time", meshOpen},
	} {
		cfg := c.cfg
		out = append(out, Synthetic{Name: c.name, Note: c.note, Build: func() *graph.Model { return AxialViT(cfg) }, Truth: AxialTruth(cfg)})
	}
	return out
}
