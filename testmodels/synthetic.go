package testmodels

import (
	"math"
	"math/rand/v2"
	"path/filepath"

	"github.com/onnxpe/onnxpe/graph"
)

// Synthetic is a model built in Go for a form the PyTorch 1.13 exporter
// does not produce, with the audit it must give.
type Synthetic struct {
	Name  string
	Note  string
	Build func() *graph.Model
	Truth Truth
}

func ropeTruth(cfg LlamaConfig, fused bool) Truth {
	layers := make([]int, cfg.Layers)
	ls := make([]LayerScheme, cfg.Layers)
	for i := range layers {
		layers[i] = i
		ls[i] = LayerScheme{Index: i, Scheme: "rope"}
	}
	hd := cfg.Hidden / cfg.Heads
	var maxPos any
	if cfg.RoPE != RopeComputed {
		maxPos = float64(cfg.MaxPositions)
		if cfg.MaxPositions == 0 {
			maxPos = float64(128)
		}
	}
	return Truth{
		Schemes: []string{"rope"},
		Layers:  ls,
		Findings: []FindingTruth{{Scheme: "rope", Layers: layers, Fused: fused, Params: map[string]any{
			"layout": "half_split", "base": cfg.RopeBase, "head_dim": float64(hd), "rotary_dim": float64(hd),
			"num_heads": float64(cfg.Heads), "num_kv_heads": float64(cfg.KVHeads), "scaling": "none", "factor": 1.0,
			"max_positions": maxPos,
		}}},
	}
}

func llamaVariant(name, note string, edit func(*LlamaConfig)) Synthetic {
	cfg := DefaultLlama
	edit(&cfg)
	fused := cfg.RoPE == RopeFusedMS || cfg.RoPE == RopeFusedONNX
	return Synthetic{Name: name, Note: note, Build: func() *graph.Model { return Llama(cfg) }, Truth: ropeTruth(cfg, fused)}
}

// Synthetics lists the Go-built models.
func Synthetics() []Synthetic {
	sinTruth := func(layout, denom string, computed bool, maxPos any) Truth {
		return Truth{
			Schemes: []string{"sinusoidal"},
			Layers:  []LayerScheme{{Index: 0, Scheme: "sinusoidal"}},
			Findings: []FindingTruth{{Scheme: "sinusoidal", Layers: []int{0}, Params: map[string]any{
				"layout": layout, "base": 10000.0, "dim": float64(sinDim), "computed": computed,
				"max_positions": maxPos, "freq_denominator": denom,
			}}},
		}
	}
	return []Synthetic{
		llamaVariant("llama_opset18", "Llama, computed half-split RoPE, opset 18 (ReduceMean axes as an input)", func(c *LlamaConfig) { c.Opset = 18 }),
		llamaVariant("llama_cache_shared", "Llama, stored cos/sin tables gathered by position_ids and shared by both layers, opset 20", func(c *LlamaConfig) {
			c.Opset, c.RoPE = 20, RopeCacheTable
		}),
		llamaVariant("llama_local_function", "Llama whose rotate_half is a model-local function with an attribute reference (onnxscript-style export)", func(c *LlamaConfig) { c.RotateHalfFunction = true }),
		llamaVariant("llama_fused_ms", "Llama with com.microsoft RotaryEmbedding nodes", func(c *LlamaConfig) { c.RoPE = RopeFusedMS }),
		llamaVariant("llama_fused_onnx", "Llama with the standard RotaryEmbedding (opset 23)", func(c *LlamaConfig) { c.Opset, c.RoPE = 23, RopeFusedONNX }),
		{Name: "sinusoidal_if", Note: "[sin|cos] table: an If takes rows of a stored table when the sequence fits, else computes them", Build: SinusoidalIf,
			Truth: sinTruth("concat_sin_cos", "d/2", false, float64(sinTableRows))},
		{Name: "sinusoidal_loop", Note: "interleaved sin/cos table computed row by row in a Loop", Build: SinusoidalLoop,
			Truth: sinTruth("interleaved", "d/2", true, nil)},
	}
}

const (
	sinDim       = 16
	sinVocab     = 32
	sinTableRows = 64
)

// encoderHead adds token embeddings of ids to pe ([S,d] or [1,S,d]) and
// runs one single-head attention block and an output projection.
func encoderHead(g *graph.Graph, ids, pe *graph.Value, rng *rand.Rand) *graph.Value {
	b := &llamaBuilder{cfg: LlamaConfig{}, g: g, rng: rng}
	emb := b.weight("embed", sinVocab, sinDim)
	x := b.op("Add", nil, b.op("Gather", nil, emb, ids), pe)
	q := b.op("MatMul", nil, x, b.weight("wq", sinDim, sinDim))
	k := b.op("MatMul", nil, x, b.weight("wk", sinDim, sinDim))
	v := b.op("MatMul", nil, x, b.weight("wv", sinDim, sinDim))
	s := b.op("Div", nil, b.op("MatMul", nil, q, b.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1)}, k)), b.scalar("scale", float32(math.Sqrt(sinDim))))
	a := b.op("MatMul", nil, b.op("Softmax", []*graph.Attr{graph.IntAttr("axis", -1)}, s), v)
	y := b.op("MatMul", nil, b.op("Add", nil, x, a), b.weight("out", sinDim, sinVocab))
	y.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: sinVocab, Known: true}})
	return y
}

func inputIDs(g *graph.Graph) *graph.Value {
	return g.AddInput("input_ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
}

// invFreq32 is 1/10000^(2i/d) for i < d/2 as float32.
func invFreq32(d int) []float32 {
	v := make([]float32, d/2)
	for i := range v {
		v[i] = float32(1 / math.Pow(10000, float64(2*i)/float64(d)))
	}
	return v
}

func f32(g *graph.Graph, name string, dims []int64, v ...float32) *graph.Value {
	t, err := graph.NewTensor(name, graph.Float, dims, v)
	if err != nil {
		panic(err)
	}
	return g.AddInitializer(t)
}

func i64(g *graph.Graph, name string, v ...int64) *graph.Value {
	t, err := graph.NewTensor(name, graph.Int64, []int64{int64(len(v))}, v)
	if err != nil {
		panic(err)
	}
	return g.AddInitializer(t)
}

func i64Scalar(g *graph.Graph, name string, v int64) *graph.Value {
	t, err := graph.NewTensor(name, graph.Int64, nil, []int64{v})
	if err != nil {
		panic(err)
	}
	return g.AddInitializer(t)
}

// SinusoidalIf builds a model whose [sin|cos] table rows come from a
// stored table when the sequence is at most 64 long, and are computed
// (Range, Mul, Sin, Cos, Concat) otherwise.
func SinusoidalIf() *graph.Model {
	m := graph.NewModel(8, "onnxpe-testmodels", graph.Opset{Domain: "", Version: 17})
	g := m.Graph
	ids := inputIDs(g)
	inv := invFreq32(sinDim)
	tab := make([]float32, sinTableRows*sinDim)
	for p := 0; p < sinTableRows; p++ {
		for i, f := range inv {
			a := float64(float32(p) * f)
			tab[p*sinDim+i] = float32(math.Sin(a))
			tab[p*sinDim+sinDim/2+i] = float32(math.Cos(a))
		}
	}
	table := f32(g, "pe_table", []int64{sinTableRows, sinDim}, tab...)
	shape := g.Op("Shape", []*graph.Value{ids}, 1)[0]
	seq := g.Op("Gather", []*graph.Value{shape, i64Scalar(g, "one", 1)}, 1, graph.IntAttr("axis", 0))[0]
	fits := g.Op("LessOrEqual", []*graph.Value{seq, i64Scalar(g, "rows", sinTableRows)}, 1)[0]

	then := g.NewSubgraph("stored_rows")
	seq1 := then.Op("Unsqueeze", []*graph.Value{seq, i64(g, "ax0", 0)}, 1)[0]
	rows := then.Op("Slice", []*graph.Value{table, i64(g, "zero1", 0), seq1, i64(g, "ax0b", 0)}, 1)[0]
	rows.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "seq"}, {Value: sinDim, Known: true}})
	then.AddOutput(rows)

	els := g.NewSubgraph("computed_rows")
	pos := els.Op("Cast", []*graph.Value{els.Op("Range", []*graph.Value{i64Scalar(g, "start", 0), seq, i64Scalar(g, "step", 1)}, 1)[0]}, 1, graph.IntAttr("to", int64(graph.Float)))[0]
	ang := els.Op("Mul", []*graph.Value{els.Op("Unsqueeze", []*graph.Value{pos, i64(g, "ax1", 1)}, 1)[0], f32(g, "inv_freq", []int64{1, sinDim / 2}, inv...)}, 1)[0]
	comp := els.Op("Concat", []*graph.Value{els.Op("Sin", []*graph.Value{ang}, 1)[0], els.Op("Cos", []*graph.Value{ang}, 1)[0]}, 1, graph.IntAttr("axis", -1))[0]
	comp.Type = rows.Type.Clone()
	els.AddOutput(comp)

	pe := g.Op("If", []*graph.Value{fits}, 1, graph.GraphAttr("then_branch", then), graph.GraphAttr("else_branch", els))[0]
	g.AddOutput(encoderHead(g, ids, pe, rand.New(rand.NewPCG(3, 4))))
	return m
}

// SinusoidalLoop builds a model whose interleaved sin/cos table is
// computed one row per Loop iteration (scan output), as a scripted export
// of a Python loop over positions gives.
func SinusoidalLoop() *graph.Model {
	m := graph.NewModel(8, "onnxpe-testmodels", graph.Opset{Domain: "", Version: 17})
	g := m.Graph
	ids := inputIDs(g)
	shape := g.Op("Shape", []*graph.Value{ids}, 1)[0]
	seq := g.Op("Gather", []*graph.Value{shape, i64Scalar(g, "one", 1)}, 1, graph.IntAttr("axis", 0))[0]
	inv := invFreq32(sinDim)
	// Interleave by computing [d/2, 2] = stack(sin, cos) and flattening.
	body := g.NewSubgraph("row")
	iter := body.AddInput("i", graph.TensorType(graph.Int64, []graph.Dim{}))
	cond := body.AddInput("cond_in", graph.TensorType(graph.Bool, []graph.Dim{}))
	p := body.Op("Cast", []*graph.Value{iter}, 1, graph.IntAttr("to", int64(graph.Float)))[0]
	ang := body.Op("Mul", []*graph.Value{p, f32(g, "inv_freq", []int64{sinDim / 2, 1}, inv...)}, 1)[0] // [d/2,1]
	pair := body.Op("Concat", []*graph.Value{body.Op("Sin", []*graph.Value{ang}, 1)[0], body.Op("Cos", []*graph.Value{ang}, 1)[0]}, 1, graph.IntAttr("axis", 1))[0]
	row := body.Op("Reshape", []*graph.Value{pair, i64(g, "row_shape", sinDim)}, 1)[0]
	condOut := body.Op("Identity", []*graph.Value{cond}, 1)[0]
	condOut.Type = graph.TensorType(graph.Bool, []graph.Dim{})
	row.Type = graph.TensorType(graph.Float, graph.Dims(sinDim))
	body.AddOutput(condOut)
	body.AddOutput(row)
	tT, _ := graph.NewTensor("true", graph.Bool, nil, []bool{true})
	pe := g.Op("Loop", []*graph.Value{seq, g.AddInitializer(tT)}, 1, graph.GraphAttr("body", body))[0]
	g.AddOutput(encoderHead(g, ids, pe, rand.New(rand.NewPCG(5, 6))))
	return m
}

// ExternalDataModel writes the default Llama into dir as model.onnx with
// every tensor of 1 KiB or more in the side file model.onnx.data (the form
// of models over 2 GiB), and returns the model's path.
func ExternalDataModel(dir string) (string, error) {
	m := Llama(DefaultLlama)
	p := filepath.Join(dir, "model.onnx")
	if err := m.Save(p, graph.SaveOptions{External: graph.ExternalizeLarge}); err != nil {
		return "", err
	}
	return p, nil
}
