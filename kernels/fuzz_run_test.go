package kernels

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
)

// FuzzRun runs small random graphs through Session.Run: one to three
// nodes of registered ops, built on the nodes of every conformance model
// and corpus model in the repository (their attributes and input types),
// with random shapes (0 and broadcasts included), random values (huge
// integers included), mutated attributes and opsets, chained outputs,
// constants folded at compile time, and If/Loop/Scan nodes with generated
// bodies. Whatever the graph, nothing may panic (an error wrapping
// ErrInternal is a kernel panic), die, or allocate without bound
// (Options.MaxTensorBytes is 1 MiB: a run may not allocate more than
// fuzzAllocBound), and a run must give the same outputs, bit for bit,
// whether the buffers alloc hands out are fresh zeros, poisoned with
// garbage (Options.poison) or recycled from the pool: a kernel must write
// every element of its outputs.
//
// make test runs it for a fixed time (make fuzz); go test runs its seeds,
// among them the crashers it found (testdata/fuzz/FuzzRun).
func FuzzRun(f *testing.F) {
	for _, seed := range [][]byte{
		{}, {0}, {1, 2, 3, 4, 5, 6, 7, 8}, []byte("onnxpe fuzz run"),
		{0xff, 0xfe, 0xfd, 0xfc, 0, 0, 0, 0, 0x80, 0x40},
	} {
		f.Add(seed)
	}
	tpls, err := fuzzTemplates()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		src := &byteSource{data: data}
		fg := buildFuzzGraph(src, tpls)
		checkFuzzGraph(t, fg)
	})
}

// fuzzAllocBound bounds the bytes the three runs of one fuzz graph may
// allocate (with MaxTensorBytes at 1 MiB, and a few nodes).
const fuzzAllocBound = 512 << 20

// fuzzMaxTensorBytes is the MaxTensorBytes of the fuzzed sessions.
const fuzzMaxTensorBytes = 1 << 20

// byteSource turns the fuzzer's bytes into decisions; past the end it
// reads zeros.
type byteSource struct {
	data []byte
	i    int
}

func (b *byteSource) byte() byte {
	if b.i >= len(b.data) {
		b.i++
		return 0
	}
	v := b.data[b.i]
	b.i++
	return v
}

// intn returns a number in [0, n).
func (b *byteSource) intn(n int) int {
	if n <= 1 {
		return 0
	}
	v := int(b.byte())
	if n > 256 {
		v = v<<8 | int(b.byte())
	}
	return v % n
}

// chance is true with probability about num/den.
func (b *byteSource) chance(num, den int) bool { return b.intn(den) < num }

// fuzzTemplate is a node of a model in the repository: what FuzzRun
// builds its nodes from.
type fuzzTemplate struct {
	domain, op string
	opset      int64
	attrs      []*graph.Attr
	ins        []fuzzInput
	nout       int
	from       string // model path, for messages
}

// fuzzInput is one input of a template.
type fuzzInput struct {
	absent bool
	seq    bool           // a sequence value
	dt     graph.DataType // Undefined when unknown
	rank   int            // -1 when unknown
	sample *Tensor        // the value the model feeds it (test data or a constant), or nil
}

var fuzzTemplates = sync.OnceValues(loadFuzzTemplates)

// loadFuzzTemplates collects the distinct nodes of registered ops in the
// conformance models and the corpus (models and ONNX Runtime's saves).
// Nodes with graph attributes are left out: If, Loop and Scan nodes are
// generated with their bodies.
func loadFuzzTemplates() ([]*fuzzTemplate, error) {
	var paths []string
	for _, pat := range []string{"../testdata/conformance/*/*/model.onnx", "../testdata/conformance/*/*/*/model.onnx", "../testmodels/models/*/*.onnx"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			return nil, err
		}
		paths = append(paths, m...)
	}
	sort.Strings(paths)
	if len(paths) < 1000 {
		return nil, fmt.Errorf("found %d models for FuzzRun's templates", len(paths))
	}
	seen := map[string]bool{}
	out := extraTemplates()
	for _, p := range paths {
		m, err := graph.Load(p)
		if err != nil {
			continue // a model graph cannot load is not a template
		}
		var feeds map[string]*Tensor
		if strings.Contains(p, "conformance") {
			feeds, _ = ReadInputs(filepath.Dir(p), m) // tensors only; nil otherwise
		}
		for _, n := range m.Graph.Nodes() {
			tp := templateOf(m, n, feeds, p)
			if tp == nil {
				continue
			}
			key := tp.key()
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, tp)
		}
	}
	return out, nil
}

// extraTemplates are nodes of the fused and contrib ops that no model in
// the repository uses, written after ONNX Runtime's ContribOperators.md
// and this project's ALiBiBias.
func extraTemplates() []*fuzzTemplate {
	rng := rand.New(rand.NewPCG(13, 2))
	f32 := func(shape ...int) fuzzInput {
		t := New(graph.Float, shape...)
		for i := range Data[float32](t) {
			Data[float32](t)[i] = float32(rng.NormFloat64())
		}
		return fuzzInput{dt: graph.Float, rank: len(shape), sample: t}
	}
	ints := func(dt graph.DataType, shape []int, v ...int64) fuzzInput {
		t := castC(nil, FromSlice(shape, v), dt)
		return fuzzInput{dt: dt, rank: len(shape), sample: t}
	}
	q8 := func(dt graph.DataType, shape ...int) fuzzInput {
		t := New(graph.Int64, shape...)
		for i := range Data[int64](t) {
			Data[int64](t)[i] = int64(rng.IntN(256) - 128*btoi(dt == graph.Int8))
		}
		return fuzzInput{dt: dt, rank: len(shape), sample: castC(nil, t, dt)}
	}
	absent := fuzzInput{absent: true}
	i := func(name string, v int64) *graph.Attr { return graph.IntAttr(name, v) }
	ms := func(op string, nout int, attrs []*graph.Attr, ins ...fuzzInput) *fuzzTemplate {
		return &fuzzTemplate{domain: DomainMicrosoft, op: op, opset: 1, attrs: attrs, ins: ins, nout: nout, from: "extraTemplates"}
	}
	alibi := &fuzzTemplate{domain: DomainOnnxpe, op: "ALiBiBias", opset: 1, attrs: []*graph.Attr{i("symmetric", 0)},
		ins: []fuzzInput{f32(4), ints(graph.Int64, nil, 3), ints(graph.Int64, nil, 5)}, nout: 1, from: "extraTemplates"}
	return []*fuzzTemplate{
		alibi,
		ms("RelativePositionBias", 1, []*graph.Attr{i("max_distance", 128), i("is_bidirectional", 1)}, f32(32, 4), ints(graph.Int64, []int{1}, 3), ints(graph.Int64, []int{1}, 5)),
		ms("SimplifiedLayerNormalization", 1, []*graph.Attr{i("axis", -1), graph.FloatAttr("epsilon", 1e-6)}, f32(2, 3, 8), f32(8)),
		ms("SkipSimplifiedLayerNormalization", 1, []*graph.Attr{graph.FloatAttr("epsilon", 1e-6)}, f32(2, 3, 8), f32(2, 3, 8), f32(8), f32(8)),
		ms("BiasAdd", 1, nil, f32(2, 3, 8), f32(8), f32(2, 3, 8)),
		ms("GemmFastGelu", 1, nil, f32(2, 3, 8), f32(8, 6), f32(6)),
		ms("Attention", 1, []*graph.Attr{i("num_heads", 2)}, f32(2, 4, 16), f32(16, 48), f32(48), ints(graph.Int32, []int{2}, 4, 3)),
		ms("MultiHeadAttention", 1, []*graph.Attr{i("num_heads", 2)}, f32(2, 4, 16), f32(2, 5, 16), f32(2, 5, 16)),
		ms("GroupQueryAttention", 1, []*graph.Attr{i("num_heads", 4), i("kv_num_heads", 2)},
			f32(1, 3, 32), f32(1, 3, 16), f32(1, 3, 16), absent, absent, ints(graph.Int32, []int{1}, 2), ints(graph.Int32, nil, 3)),
		ms("EmbedLayerNormalization", 2, []*graph.Attr{graph.FloatAttr("epsilon", 1e-5)},
			ints(graph.Int32, []int{2, 3}, 1, 2, 3, 4, 5, 6), ints(graph.Int32, []int{2, 3}, 0, 0, 1, 1, 0, 1), f32(10, 8), f32(6, 8), f32(2, 8), f32(8), f32(8)),
		ms("MatMulNBits", 1, []*graph.Attr{i("K", 32), i("N", 4), i("bits", 4), i("block_size", 16)}, f32(3, 32), q8(graph.Uint8, 4, 2, 8), f32(8)),
		ms("DynamicQuantizeMatMul", 1, nil, f32(3, 8), q8(graph.Int8, 8, 4), f32(1)),
		ms("MatMulIntegerToFloat", 1, nil, q8(graph.Uint8, 3, 8), q8(graph.Int8, 8, 4), f32(1), f32(1)),
		ms("QAttention", 1, []*graph.Attr{i("num_heads", 2)}, q8(graph.Uint8, 2, 4, 16), q8(graph.Int8, 16, 48), f32(48), f32(1), f32(1)),
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func templateOf(m *graph.Model, n *graph.Node, feeds map[string]*Tensor, path string) *fuzzTemplate {
	d := normDomain(n.Domain)
	if strings.HasPrefix(d, "test.") || len(n.Subgraphs()) > 0 || m.Function(n.Domain, n.OpType, n.Overload) != nil {
		return nil
	}
	opset := m.OpsetVersion(d)
	if opset == 0 {
		opset = 1
	}
	if !Supports(d, n.OpType, opset) {
		return nil
	}
	tp := &fuzzTemplate{domain: d, op: n.OpType, opset: opset, nout: len(n.Outputs()), from: path}
	for _, a := range n.Attrs {
		if a.RefAttrName() != "" {
			return nil
		}
		tp.attrs = append(tp.attrs, a)
	}
	for _, v := range n.Inputs() {
		if v == nil {
			tp.ins = append(tp.ins, fuzzInput{absent: true})
			continue
		}
		in := fuzzInput{rank: -1, seq: v.Type != nil && v.Type.Kind() == "sequence", dt: v.Type.ElemType()}
		if dims, ok := v.Type.Shape(); ok {
			in.rank = len(dims)
		}
		if v.Const != nil {
			if t, err := FromGraph(v.Const); err == nil && t.Len() <= 1<<16 {
				in.sample, in.dt, in.rank = t, t.DType, len(t.Shape)
			}
		} else if t := feeds[v.Name]; t != nil && t.Len() <= 1<<16 {
			in.sample, in.dt, in.rank = t, t.DType, len(t.Shape)
		}
		if !in.seq && in.dt != graph.Undefined && !Supported(in.dt) {
			return nil
		}
		tp.ins = append(tp.ins, in)
	}
	return tp
}

// key identifies templates that build the same kind of node.
func (tp *fuzzTemplate) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s.%s/%d/%d:", tp.domain, tp.op, tp.opset, tp.nout)
	for _, a := range tp.attrs {
		fmt.Fprintf(&b, "%s=%v;", a.Name(), a.Value())
	}
	for _, in := range tp.ins {
		fmt.Fprintf(&b, "|%v,%v,%d,%v", in.absent, in.dt, in.rank, in.sample != nil)
		if in.sample != nil && in.sample.Len() <= 8 {
			fmt.Fprint(&b, in.sample.Float64s())
		}
	}
	return b.String()
}

// fuzzGraph is a built model, its feeds and its options.
type fuzzGraph struct {
	m     *graph.Model
	feeds map[string]*Tensor
	opts  Options
	desc  []string // the nodes, for messages
	// random: a node draws random numbers, so the runs may differ (in
	// values, and in shapes and errors downstream): they are only checked
	// for internal errors and memory.
	random bool
}

// fuzzRandomOps draw random numbers (Dropout only in training mode).
var fuzzRandomOps = map[string]bool{"Bernoulli": true, "RandomNormal": true, "RandomNormalLike": true,
	"RandomUniform": true, "RandomUniformLike": true, "Multinomial": true, "Dropout": true}

// buildFuzzGraph makes a graph of one to three nodes from src's decisions.
func buildFuzzGraph(src *byteSource, tpls []*fuzzTemplate) *fuzzGraph {
	fg := &fuzzGraph{feeds: map[string]*Tensor{}}
	fg.opts = Options{MaxTensorBytes: fuzzMaxTensorBytes, MaxLoopIterations: 64, Threads: 1 + src.intn(2)}
	nodes := 1 + src.intn(3)
	first := tpls[src.intn(len(tpls))]
	opset := first.opset
	if src.chance(1, 8) {
		opset = int64(7 + src.intn(17))
	}
	opsets := []graph.Opset{{Domain: "", Version: opset}}
	for _, d := range []string{DomainMicrosoft, DomainOnnxpe} {
		opsets = append(opsets, graph.Opset{Domain: d, Version: 1})
	}
	fg.m = graph.NewModel(9, "fuzz", opsets...)
	g := fg.m.Graph
	var prev []*graph.Value
	for k := range nodes {
		tp := first
		if k > 0 {
			tp = tpls[src.intn(len(tpls))]
		}
		var n *graph.Node
		switch src.intn(16) {
		case 0:
			n = fuzzControl(src, g, fg, prev)
		default:
			n = fuzzNode(src, g, fg, tp, prev)
		}
		g.Append(n)
		fg.desc = append(fg.desc, describeNode(n))
		fg.random = fg.random || fuzzRandomOps[n.OpType] && normDomain(n.Domain) == ""
		prev = nil
		for _, o := range n.Outputs() {
			if o.Name != "" {
				prev = append(prev, o)
				g.AddOutput(o)
			}
		}
	}
	return fg
}

func describeNode(n *graph.Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s(", opName(n))
	for i, v := range n.Inputs() {
		if i > 0 {
			b.WriteString(", ")
		}
		if v == nil {
			b.WriteString("-")
			continue
		}
		b.WriteString(v.Name)
	}
	b.WriteString(")")
	for _, a := range n.Attrs {
		fmt.Fprintf(&b, " %s=%v", a.Name(), a.Value())
	}
	return b.String()
}

// fuzzNode builds a node of template tp, its inputs random or mutated
// samples, maybe the previous node's output.
func fuzzNode(src *byteSource, g *graph.Graph, fg *fuzzGraph, tp *fuzzTemplate, prev []*graph.Value) *graph.Node {
	ins := slices.Clone(tp.ins)
	switch {
	case len(ins) > 0 && src.chance(1, 16):
		ins = ins[:len(ins)-1] // one input too few
	case src.chance(1, 16):
		ins = append(ins, fuzzInput{dt: graph.Float, rank: 2}) // one too many
	}
	var vs []*graph.Value
	for i, in := range ins {
		switch {
		case in.absent && !src.chance(1, 8):
			vs = append(vs, nil)
		case i == 0 && len(prev) > 0 && src.chance(1, 2):
			vs = append(vs, prev[src.intn(len(prev))])
		case in.seq:
			vs = append(vs, fuzzSequence(src, g, fg, in))
		default:
			vs = append(vs, fuzzValue(src, g, fg, fuzzTensor(src, in)))
		}
	}
	var attrs []*graph.Attr
	for _, a := range tp.attrs {
		if src.chance(1, 16) {
			continue // left out
		}
		if src.chance(1, 4) {
			a = mutateAttr(src, a)
		}
		attrs = append(attrs, a)
	}
	nout := tp.nout
	if src.chance(1, 16) {
		nout = 1 + src.intn(3)
	}
	return g.NewNode(tp.op, tp.domain, vs, nout, attrs...)
}

// fuzzValue makes t a graph input (fed) or, one time in four, an
// initializer (so that the node may be folded when the session is made).
func fuzzValue(src *byteSource, g *graph.Graph, fg *fuzzGraph, t *Tensor) *graph.Value {
	name := fmt.Sprintf("in%d", len(fg.feeds)+len(g.Initializers))
	if src.chance(1, 4) {
		if gt, err := t.ToGraph(name); err == nil {
			return g.AddInitializer(gt)
		}
	}
	v := g.AddInput(name, graph.TensorType(t.DType, nil))
	fg.feeds[v.Name] = t
	return v
}

// fuzzSequence builds a sequence of zero to three tensors with a
// SequenceConstruct (or SequenceEmpty) node.
func fuzzSequence(src *byteSource, g *graph.Graph, fg *fuzzGraph, in fuzzInput) *graph.Value {
	dt := in.dt
	if dt == graph.Undefined || !Supported(dt) {
		dt = graph.Float
	}
	k := src.intn(4)
	if k == 0 {
		return g.Op("SequenceEmpty", nil, 1, graph.IntAttr("dtype", int64(dt)))[0]
	}
	var vs []*graph.Value
	rank := src.intn(3)
	for range k {
		vs = append(vs, fuzzValue(src, g, fg, randomTensor(src, dt, rank)))
	}
	return g.Op("SequenceConstruct", vs, 1)[0]
}

// fuzzControl builds an If, Loop or Scan node with a generated body.
func fuzzControl(src *byteSource, g *graph.Graph, fg *fuzzGraph, prev []*graph.Value) *graph.Node {
	x := fuzzValue(src, g, fg, randomTensor(src, graph.Float, src.intn(3)))
	if len(prev) > 0 && src.chance(1, 2) {
		x = prev[0]
	}
	body := func(name string, ins []*graph.Value, nout int) *graph.Graph {
		sg := g.NewSubgraph(name)
		var vals []*graph.Value
		for i, v := range ins {
			_ = v
			vals = append(vals, sg.AddInput(fmt.Sprintf("%s_in%d", name, i), nil))
		}
		vals = append(vals, x) // an outer value
		for range nout {
			v := vals[src.intn(len(vals))]
			switch src.intn(4) {
			case 0:
				v = sg.Op("Identity", []*graph.Value{v}, 1)[0]
			case 1:
				v = sg.Op("Neg", []*graph.Value{v}, 1)[0]
			case 2:
				v = sg.Op("Shape", []*graph.Value{v}, 1)[0]
			default:
				v = sg.Op("Add", []*graph.Value{v, x}, 1)[0]
			}
			sg.AddOutput(v)
		}
		return sg
	}
	switch src.intn(3) {
	case 0:
		cond := fuzzValue(src, g, fg, randomTensor(src, graph.Bool, src.intn(2)))
		k := 1 + src.intn(2)
		return g.NewNode("If", "", []*graph.Value{cond}, k,
			graph.GraphAttr("then_branch", body("then", nil, k)), graph.GraphAttr("else_branch", body("else", nil, k+src.intn(2))))
	case 1:
		trip := fuzzValue(src, g, fg, randomTensor(src, graph.Int64, src.intn(2)))
		cond := fuzzValue(src, g, fg, randomTensor(src, graph.Bool, src.intn(2)))
		state := fuzzValue(src, g, fg, randomTensor(src, graph.Float, src.intn(3)))
		nScan := src.intn(2)
		sg := g.NewSubgraph("loop")
		sg.AddInput("i", nil)
		c := sg.AddInput("c", nil)
		s := sg.AddInput("s", nil)
		sg.AddOutput(sg.Op("Identity", []*graph.Value{c}, 1)[0])
		sg.AddOutput(sg.Op("Add", []*graph.Value{s, x}, 1)[0])
		for range nScan {
			sg.AddOutput(sg.Op("Neg", []*graph.Value{s}, 1)[0])
		}
		if src.chance(1, 8) {
			sg.AddOutput(sg.Op("Identity", []*graph.Value{s}, 1)[0]) // one output too many
		}
		return g.NewNode("Loop", "", []*graph.Value{trip, cond, state}, 1+nScan, graph.GraphAttr("body", sg))
	default:
		state := fuzzValue(src, g, fg, randomTensor(src, graph.Float, src.intn(3)))
		seq := fuzzValue(src, g, fg, randomTensor(src, graph.Float, 1+src.intn(3)))
		sg := g.NewSubgraph("scan")
		s := sg.AddInput("s", nil)
		e := sg.AddInput("e", nil)
		sg.AddOutput(sg.Op("Add", []*graph.Value{s, e}, 1)[0])
		sg.AddOutput(sg.Op("Neg", []*graph.Value{e}, 1)[0])
		attrs := []*graph.Attr{graph.GraphAttr("body", sg), graph.IntAttr("num_scan_inputs", 1)}
		if src.chance(1, 4) {
			attrs = append(attrs, graph.IntsAttr("scan_input_axes", int64(src.intn(5)-2)))
		}
		if src.chance(1, 4) {
			attrs = append(attrs, graph.IntsAttr("scan_output_axes", int64(src.intn(5)-2)))
		}
		if src.chance(1, 4) {
			attrs = append(attrs, graph.IntsAttr("scan_input_directions", int64(src.intn(2))))
		}
		return g.NewNode("Scan", "", []*graph.Value{state, seq}, 2, attrs...)
	}
}

// fuzzTensor makes a value for input in: its sample with a dimension
// made 0 or 1 (or unchanged), or a random tensor of its type and about
// its rank.
func fuzzTensor(src *byteSource, in fuzzInput) *Tensor {
	if in.sample != nil && src.chance(2, 3) {
		t := in.sample
		if r := len(t.Shape); r > 0 && t.DType != graph.String && src.chance(1, 2) {
			ax := src.intn(r)
			n := 0
			if src.chance(1, 3) {
				n = min(1, t.Shape[ax])
			}
			t = sliceAxis(nil, t, ax, 0, n)
		}
		return t
	}
	dt := in.dt
	if dt == graph.Undefined || !Supported(dt) || src.chance(1, 16) {
		dt = []graph.DataType{graph.Float, graph.Int64, graph.Bool, graph.Float16, graph.Double, graph.Int32, graph.Uint8,
			graph.Int8, graph.BFloat16, graph.Int16, graph.Uint16, graph.Uint32, graph.Uint64}[src.intn(13)]
	}
	rank := in.rank
	if rank < 0 || src.chance(1, 4) {
		rank = src.intn(5)
	}
	return randomTensor(src, dt, rank)
}

// randomTensor makes a tensor of dt and rank with small dimensions (0
// among them) and values that include the awkward ones.
func randomTensor(src *byteSource, dt graph.DataType, rank int) *Tensor {
	shape := make([]int, rank)
	n := 1
	for i := range shape {
		shape[i] = []int{0, 1, 1, 2, 2, 3, 4, 7}[src.intn(8)]
		if n*shape[i] > 4096 {
			shape[i] = 1
		}
		n *= shape[i]
	}
	t := New(dt, shape...)
	switch d := t.data.(type) {
	case []float32:
		for i := range d {
			d[i] = float32(fuzzFloat(src))
		}
	case []float64:
		for i := range d {
			d[i] = fuzzFloat(src)
		}
	case []float16.Float16:
		for i := range d {
			d[i] = float16.Fromfloat32(float32(fuzzFloat(src)))
		}
	case []graph.BF16:
		for i := range d {
			d[i] = graph.BF16FromFloat32(float32(fuzzFloat(src)))
		}
	case []int64:
		for i := range d {
			d[i] = fuzzInt(src)
		}
	case []int32:
		for i := range d {
			d[i] = int32(fuzzInt(src))
		}
	case []int8:
		for i := range d {
			d[i] = int8(fuzzInt(src))
		}
	case []uint8:
		for i := range d {
			d[i] = uint8(fuzzInt(src))
		}
	case []bool:
		for i := range d {
			d[i] = src.chance(1, 2)
		}
	case []int16:
		for i := range d {
			d[i] = int16(fuzzInt(src))
		}
	case []uint16:
		for i := range d {
			d[i] = uint16(fuzzInt(src))
		}
	case []uint32:
		for i := range d {
			d[i] = uint32(fuzzInt(src))
		}
	case []uint64:
		for i := range d {
			d[i] = uint64(fuzzInt(src))
		}
	}
	return t
}

func fuzzFloat(src *byteSource) float64 {
	switch v := src.byte(); {
	case v < 200:
		return float64(int(v)-100) / 16
	case v < 220:
		return float64(v - 200)
	default:
		return []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 1e30, -1e30, 1e-30, 65504, 3.4e38}[int(v-220)%10]
	}
}

// fuzzInt is small (-3..12) most of the time (shapes, axes, indices), and
// sometimes huge or extreme.
func fuzzInt(src *byteSource) int64 {
	if v := src.byte(); v < 240 {
		return int64(v%16) - 3
	}
	return []int64{1 << 20, 1 << 31, 1 << 40, -1 << 40, math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32, 255, 256, 1 << 62, -1}[src.intn(12)]
}

// mutateAttr returns a changed copy of a scalar or list attribute (tensor,
// graph and string lists are kept).
func mutateAttr(src *byteSource, a *graph.Attr) *graph.Attr {
	switch a.Type() {
	case graph.AttrInt:
		return graph.IntAttr(a.Name(), mutateInt(src, a.Int()))
	case graph.AttrInts:
		v := slices.Clone(a.Ints())
		switch {
		case len(v) > 0 && src.chance(1, 4):
			v = v[:len(v)-1]
		case src.chance(1, 4):
			v = append(v, mutateInt(src, 1))
		case len(v) > 0:
			i := src.intn(len(v))
			v[i] = mutateInt(src, v[i])
		}
		return graph.IntsAttr(a.Name(), v...)
	case graph.AttrFloat:
		return graph.FloatAttr(a.Name(), float32(fuzzFloat(src)))
	case graph.AttrFloats:
		v := slices.Clone(a.Floats())
		if len(v) > 0 {
			v[src.intn(len(v))] = float32(fuzzFloat(src))
		} else {
			v = append(v, float32(fuzzFloat(src)))
		}
		return graph.FloatsAttr(a.Name(), v...)
	case graph.AttrString:
		return graph.StringAttr(a.Name(), []string{"", "bogus", a.String() + "x", "->", "...", "ij,jk", "ab,cd->abcd"}[src.intn(7)])
	}
	return a
}

func mutateInt(src *byteSource, v int64) int64 {
	switch src.intn(6) {
	case 0:
		return v - 1
	case 1:
		return v + 1
	case 2:
		return -v
	default:
		return fuzzInt(src)
	}
}

// checkFuzzGraph runs fg three times (fresh buffers; poisoned buffers;
// poisoned and pooled buffers) and checks that no kernel panicked, that
// the runs agree, and that they allocated at most fuzzAllocBound.
func checkFuzzGraph(t *testing.T, fg *fuzzGraph) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s, err := NewSession(fg.m, fg.opts)
	if errors.Is(err, ErrInternal) {
		t.Fatalf("NewSession: %v\n%s", err, strings.Join(fg.desc, "\n"))
	}
	if err != nil {
		return
	}
	popts := fg.opts
	popts.poison = true
	ps, err := NewSession(fg.m, popts)
	if err != nil {
		t.Fatalf("NewSession failed only with poisoned buffers: %v\n%s", err, strings.Join(fg.desc, "\n"))
	}
	var outs [3]map[string]*Tensor
	var errs [3]error
	outs[0], errs[0] = s.Run(fg.feeds)
	outs[1], errs[1] = ps.Run(fg.feeds)
	outs[2], errs[2] = ps.Run(fg.feeds)
	runtime.ReadMemStats(&after)
	for i, err := range errs {
		if errors.Is(err, ErrInternal) {
			t.Fatalf("run %d: %v\n%s", i, err, strings.Join(fg.desc, "\n"))
		}
		if (err == nil) != (errs[0] == nil) && !fg.random {
			t.Fatalf("run %d: error %v, run 0: %v\n%s", i, err, errs[0], strings.Join(fg.desc, "\n"))
		}
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > fuzzAllocBound {
		t.Fatalf("three runs allocated %d MiB (MaxTensorBytes %d)\n%s", grew>>20, fg.opts.MaxTensorBytes, strings.Join(fg.desc, "\n"))
	}
	if errs[0] != nil || fg.random {
		return
	}
	for name, want := range outs[0] {
		if !want.notTensor() && want.Len() != lenAny(want.data) {
			t.Fatalf("output %s: shape %v with %d elements", name, want.Shape, lenAny(want.data))
		}
		for i := 1; i < 3; i++ {
			if got := outs[i][name]; !sameBits(got, want) {
				t.Fatalf("output %s: run %d (poisoned buffers) gives %v, a fresh run %v\n%s", name, i, dump(got), dump(want), strings.Join(fg.desc, "\n"))
			}
		}
	}
}

// sameBits reports whether a and b have the same type, shape and element
// bits (NaN payloads included), or are equal sequences.
func sameBits(a, b *Tensor) bool {
	if a == nil || b == nil || a.DType != b.DType || a.IsSequence() != b.IsSequence() || a.IsNone() != b.IsNone() {
		return a == b
	}
	if a.IsNone() {
		return true
	}
	if a.IsSequence() {
		if len(a.seq) != len(b.seq) {
			return false
		}
		for i := range a.seq {
			if !sameBits(a.seq[i], b.seq[i]) {
				return false
			}
		}
		return true
	}
	if !slices.Equal(a.Shape, b.Shape) {
		return false
	}
	switch x := a.data.(type) {
	case []float32:
		y := b.data.([]float32)
		return slices.EqualFunc(x, y, func(p, q float32) bool { return math.Float32bits(p) == math.Float32bits(q) })
	case []float64:
		y := b.data.([]float64)
		return slices.EqualFunc(x, y, func(p, q float64) bool { return math.Float64bits(p) == math.Float64bits(q) })
	}
	// Integers, bools and the 16-bit floats (compared as their bits).
	return reflect.DeepEqual(a.data, b.data)
}

func dump(t *Tensor) string {
	if t == nil || t.notTensor() || t.Len() > 16 {
		return t.String()
	}
	return fmt.Sprintf("%v%v", t, t.Float64s())
}

// TestFuzzRunTemplates reports which registered ops FuzzRun builds nodes
// of: the ops with no template in the repository's models are counted and
// printed (FuzzRun reaches If, Loop, Scan, SequenceConstruct and
// SequenceEmpty through its own generators).
func TestFuzzRunTemplates(t *testing.T) {
	tpls, err := fuzzTemplates()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]int{"If": 1, "Loop": 1, "Scan": 1, "SequenceConstruct": 1, "SequenceEmpty": 1}
	for _, tp := range tpls {
		name := tp.op
		if tp.domain != "" {
			name = tp.domain + "." + tp.op
		}
		have[name]++
	}
	var missing []string
	ops := 0
	for _, op := range Ops() {
		if strings.HasPrefix(op, "test.") {
			continue
		}
		ops++
		if have[op] == 0 {
			missing = append(missing, op)
		}
	}
	t.Logf("FuzzRun: %d templates; %d of %d registered ops have none: %s", len(tpls), len(missing), ops, strings.Join(missing, " "))
	// The written templates run as they are (so that the fuzzer starts
	// from nodes that work).
	for _, tp := range extraTemplates() {
		m := graph.NewModel(9, "t", graph.Opset{Version: 17}, graph.Opset{Domain: tp.domain, Version: 1})
		feeds := map[string]*Tensor{}
		var vs []*graph.Value
		for i, in := range tp.ins {
			if in.absent {
				vs = append(vs, nil)
				continue
			}
			v := m.Graph.AddInput(fmt.Sprintf("x%d", i), graph.TensorType(in.dt, nil))
			feeds[v.Name], vs = in.sample, append(vs, v)
		}
		n := m.Graph.NewNode(tp.op, tp.domain, vs, tp.nout, tp.attrs...)
		m.Graph.Append(n)
		for _, o := range n.Outputs() {
			m.Graph.AddOutput(o)
		}
		s, err := NewSession(m, Options{})
		if err == nil {
			_, err = s.Run(feeds)
		}
		if err != nil {
			t.Errorf("template %s.%s: %v", tp.domain, tp.op, err)
		}
	}
	if len(tpls) < 500 || len(missing) > ops/4 {
		t.Errorf("FuzzRun covers too little: %d templates, %d of %d ops without one", len(tpls), len(missing), ops)
	}
}
