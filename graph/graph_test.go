package graph_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/x448/float16"
	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// smallModel builds y = Relu(x + c) with a 64-element constant c.
func smallModel(t testing.TB) (*graph.Model, *graph.Value) {
	t.Helper()
	m := graph.NewModel(8, "test", graph.Opset{Domain: "", Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, []graph.Dim{{Param: "n"}, {Value: 64, Known: true}}))
	vals := make([]float32, 64)
	for i := range vals {
		vals[i] = float32(i) - 10
	}
	ct, err := graph.NewTensor("c", graph.Float, []int64{64}, vals)
	if err != nil {
		t.Fatal(err)
	}
	c := g.AddInitializer(ct)
	sum := g.Op("Add", []*graph.Value{x, c}, 1)[0]
	y := g.Op("Relu", []*graph.Value{sum}, 1)[0]
	g.AddOutput(y)
	return m, c
}

func TestBuildSaveLoad(t *testing.T) {
	m, _ := smallModel(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "m.onnx")
	if err := m.Save(path, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	m2, err := graph.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := m2.Graph.Len(); got != 2 {
		t.Fatalf("nodes = %d, want 2", got)
	}
	add := m2.Graph.Nodes()[0]
	if add.OpType != "Add" || add.Input(1).Const == nil {
		t.Fatalf("first node %v does not read the initializer", add)
	}
	vals, err := add.Input(1).Const.Float64s()
	if err != nil || vals[0] != -10 || vals[63] != 53 {
		t.Fatalf("initializer values %v, %v", vals[:2], err)
	}
	if u := add.Output(0).Consumers(); len(u) != 1 || u[0].OpType != "Relu" {
		t.Fatalf("consumers of Add = %v", u)
	}
	if s := m2.Graph.Inputs[0].Type.String(); s != "float32[n,64]" {
		t.Fatalf("input type %s", s)
	}
	b1, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	b2, err := m2.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if len(b1) == 0 || string(b1) != string(b2) {
		t.Fatal("saving the reloaded model changed its bytes")
	}
}

func TestEditsKeepUseDef(t *testing.T) {
	m, _ := smallModel(t)
	g := m.Graph
	add, relu := g.Nodes()[0], g.Nodes()[1]
	// Replace Relu(Add) by Sigmoid(Add); the graph output keeps its name.
	outName := relu.Output(0).Name
	sig := g.NewNode("Sigmoid", "", []*graph.Value{add.Output(0)}, 1)
	g.InsertAfter(relu, sig)
	relu.Output(0).ReplaceAllUsesWith(sig.Output(0))
	if g.Outputs[0] != sig.Output(0) || sig.Output(0).Name != outName {
		t.Fatalf("graph output is %q, want the Sigmoid output named %q", g.Outputs[0].Name, outName)
	}
	if n := g.EliminateDeadCode(); n != 1 {
		t.Fatalf("DCE removed %d nodes, want 1 (the Relu)", n)
	}
	if len(add.Output(0).Uses()) != 1 {
		t.Fatalf("Add output has %d uses after removing Relu", len(add.Output(0).Uses()))
	}
	if err := g.Remove(add); err == nil {
		t.Fatal("removing a node whose output is read should fail")
	}
	// Disconnect and remove everything: the initializer goes too.
	g.Outputs = nil
	if n := g.EliminateDeadCode(); n != 2 || len(g.Initializers) != 0 {
		t.Fatalf("DCE removed %d nodes, %d initializers left", n, len(g.Initializers))
	}
}

func TestTopoSortKeepsSortedOrderAndSortsUnsorted(t *testing.T) {
	gp := &onnxpb.GraphProto{
		Name:   proto.String("g"),
		Input:  []*onnxpb.ValueInfoProto{{Name: proto.String("x")}},
		Output: []*onnxpb.ValueInfoProto{{Name: proto.String("z")}},
		Node: []*onnxpb.NodeProto{
			{OpType: proto.String("Neg"), Input: []string{"y"}, Output: []string{"z"}, Name: proto.String("second")},
			{OpType: proto.String("Neg"), Input: []string{"x"}, Output: []string{"y"}, Name: proto.String("first")},
		},
	}
	m := decode(t, gp)
	if err := m.Graph.TopoSort(); err != nil {
		t.Fatal(err)
	}
	if got := m.Graph.Nodes()[0].Name; got != "first" {
		t.Fatalf("first node after sort: %s", got)
	}
}

func decode(t *testing.T, gp *onnxpb.GraphProto) *graph.Model {
	t.Helper()
	m, err := decodeErr(gp, "")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func decodeErr(gp *onnxpb.GraphProto, dir string) (*graph.Model, error) {
	mp := &onnxpb.ModelProto{IrVersion: proto.Int64(8), Graph: gp,
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}}}
	b, err := proto.Marshal(mp)
	if err != nil {
		panic(err)
	}
	return graph.Decode(b, dir)
}

func TestInvalidModels(t *testing.T) {
	vi := func(n string) *onnxpb.ValueInfoProto { return &onnxpb.ValueInfoProto{Name: proto.String(n)} }
	node := func(in, out string) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: proto.String("Neg"), Input: []string{in}, Output: []string{out}}
	}
	raw := func(dims []int64, n int) *onnxpb.TensorProto {
		return &onnxpb.TensorProto{Name: proto.String("w"), DataType: proto.Int32(1), Dims: dims, RawData: make([]byte, n)}
	}
	cases := []struct {
		name string
		gp   *onnxpb.GraphProto
		want string
	}{
		{"dangling", &onnxpb.GraphProto{Input: []*onnxpb.ValueInfoProto{vi("x")}, Node: []*onnxpb.NodeProto{node("nope", "y")}, Output: []*onnxpb.ValueInfoProto{vi("y")}}, `reads "nope"`},
		{"duplicate", &onnxpb.GraphProto{Input: []*onnxpb.ValueInfoProto{vi("x")}, Node: []*onnxpb.NodeProto{node("x", "y"), node("x", "y")}, Output: []*onnxpb.ValueInfoProto{vi("y")}}, `"y" is defined twice`},
		{"cycle", &onnxpb.GraphProto{Input: []*onnxpb.ValueInfoProto{vi("x")}, Node: []*onnxpb.NodeProto{node("b", "a"), node("a", "b")}, Output: []*onnxpb.ValueInfoProto{vi("a")}}, "cycle"},
		{"self loop", &onnxpb.GraphProto{Node: []*onnxpb.NodeProto{node("a", "a")}, Output: []*onnxpb.ValueInfoProto{vi("a")}}, "cycle"},
		{"missing output", &onnxpb.GraphProto{Input: []*onnxpb.ValueInfoProto{vi("x")}, Output: []*onnxpb.ValueInfoProto{vi("q")}}, `output "q"`},
		{"dims past bytes", &onnxpb.GraphProto{Initializer: []*onnxpb.TensorProto{raw([]int64{4, 4}, 60)}}, "need 64 bytes, raw_data has 60"},
		{"dims past memory", &onnxpb.GraphProto{Initializer: []*onnxpb.TensorProto{raw([]int64{1 << 30, 1 << 30, 1 << 30}, 4)}}, "more than 2^40"},
		{"negative dim", &onnxpb.GraphProto{Initializer: []*onnxpb.TensorProto{raw([]int64{-1}, 4)}}, "negative dimension"},
		{"typed count", &onnxpb.GraphProto{Initializer: []*onnxpb.TensorProto{{Name: proto.String("w"), DataType: proto.Int32(7), Dims: []int64{3}, Int64Data: []int64{1, 2}}}}, "need 3 values"},
		{"unknown dtype", &onnxpb.GraphProto{Initializer: []*onnxpb.TensorProto{{Name: proto.String("w"), DataType: proto.Int32(99), Dims: []int64{1}}}}, "unknown element type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeErr(c.gp, "")
			if err == nil {
				t.Fatal("loaded without error")
			}
			if !errors.Is(err, graph.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want ErrInvalid mentioning %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
		})
	}
}

func TestNotONNX(t *testing.T) {
	for name, data := range map[string][]byte{
		"empty":    {},
		"text":     []byte("hello, this is not a model\n"),
		"garbage":  {0xff, 0xff, 0xff, 0xff, 0x0f},
		"no graph": mustMarshal(&onnxpb.ModelProto{IrVersion: proto.Int64(8)}),
	} {
		if _, err := graph.Decode(data, ""); !errors.Is(err, graph.ErrNotONNX) {
			t.Errorf("%s: error %v, want ErrNotONNX", name, err)
		}
	}
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// externalModel writes a model with one external tensor at location loc.
func externalModel(t *testing.T, dir, loc string) string {
	t.Helper()
	gp := &onnxpb.GraphProto{
		Initializer: []*onnxpb.TensorProto{{
			Name: proto.String("w"), DataType: proto.Int32(1), Dims: []int64{2},
			DataLocation: onnxpb.TensorProto_EXTERNAL.Enum(),
			ExternalData: []*onnxpb.StringStringEntryProto{{Key: proto.String("location"), Value: proto.String(loc)}},
		}},
		Output: []*onnxpb.ValueInfoProto{{Name: proto.String("w")}},
	}
	mp := &onnxpb.ModelProto{IrVersion: proto.Int64(8), Graph: gp}
	path := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(path, mustMarshal(mp), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestExternalDataLocationsAreContained(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "m")
	os.Mkdir(dir, 0o755)
	secret := filepath.Join(root, "secret.bin")
	os.WriteFile(secret, make([]byte, 8), 0o644)
	os.Symlink(secret, filepath.Join(dir, "link.bin"))
	os.WriteFile(filepath.Join(dir, "ok.bin"), []byte{0, 0, 128, 63, 0, 0, 0, 64}, 0o644)

	for _, loc := range []string{"../../etc/passwd", "/etc/passwd", "../secret.bin", "sub/../../secret.bin", "link.bin"} {
		_, err := graph.Load(externalModel(t, dir, loc))
		if !errors.Is(err, graph.ErrUnsafeLocation) {
			t.Errorf("location %q: error %v, want ErrUnsafeLocation", loc, err)
		}
	}
	if _, err := graph.Load(externalModel(t, dir, "missing.bin")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: error %v", err)
	}
	m, err := graph.Load(externalModel(t, dir, "ok.bin"))
	if err != nil {
		t.Fatal(err)
	}
	w := m.Graph.Initializers[0].Const
	if !w.IsExternal() {
		t.Fatal("tensor should be external")
	}
	v, err := w.Float64s()
	if err != nil || v[0] != 1 || v[1] != 2 {
		t.Fatalf("external values %v, %v", v, err)
	}
}

func TestExternalConversions(t *testing.T) {
	m, _ := smallModel(t)
	dir := t.TempDir()
	ext := filepath.Join(dir, "ext.onnx")
	if err := m.Save(ext, graph.SaveOptions{External: graph.ExternalizeLarge, Threshold: 16}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ext + ".data"); err != nil {
		t.Fatal(err)
	}
	me, err := graph.Load(ext)
	if err != nil {
		t.Fatal(err)
	}
	c := me.Graph.Initializers[0].Const
	if !c.IsExternal() || c.External().Offset%4096 != 0 {
		t.Fatalf("initializer external=%v", c.IsExternal())
	}
	// Saving the external model into another folder keeps it valid.
	other := filepath.Join(t.TempDir(), "copy.onnx")
	if err := me.Save(other, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	mc, err := graph.Load(other)
	if err != nil {
		t.Fatal(err)
	}
	inl := filepath.Join(dir, "inline.onnx")
	if err := mc.Save(inl, graph.SaveOptions{External: graph.InlineAll}); err != nil {
		t.Fatal(err)
	}
	mi, err := graph.Load(inl)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := mi.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if len(orig) == 0 || string(orig) != string(back) {
		t.Fatal("inline -> external -> copy -> inline did not give the original bytes")
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestSaveFailureLeavesNothing(t *testing.T) {
	m, _ := smallModel(t)
	dir := t.TempDir()
	if err := m.Save(filepath.Join(dir, "no", "such", "dir", "m.onnx"), graph.SaveOptions{}); err == nil {
		t.Fatal("saving into a missing folder should fail")
	}
	if err := m.Save(filepath.Join(dir, "m.onnx"), graph.SaveOptions{External: graph.ExternalizeLarge, Location: "../escape.data"}); err == nil {
		t.Fatal("a side file outside the folder should be refused")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("files left: %v", entries)
	}
}

// countdown is a context that is done after its Err has been asked n
// times: a save stopped at every point where it looks.
type countdown struct {
	context.Context
	n int
}

func (c *countdown) Err() error {
	if c.n <= 0 {
		return context.Canceled
	}
	c.n--
	return nil
}

// TestSaveStoppedLeavesNothing stops saves at every point where they look
// at their context: each stopped save returns the context's error and
// leaves the destination folder as it was (no model, no side file, no
// temporary file); the first that is not stopped writes everything.
func TestSaveStoppedLeavesNothing(t *testing.T) {
	m, _ := smallModel(t)
	src := t.TempDir()
	ext := filepath.Join(src, "ext.onnx")
	if err := m.Save(ext, graph.SaveOptions{External: graph.ExternalizeLarge, Threshold: 16}); err != nil {
		t.Fatal(err)
	}
	me, err := graph.Load(ext)
	if err != nil {
		t.Fatal(err)
	}
	if got := me.SideFiles(); len(got) != 1 || got[0] != ext+".data" {
		t.Fatalf("SideFiles %v, want [%s.data]", got, ext)
	}
	if got := m.SideFiles(); len(got) != 0 {
		t.Fatalf("SideFiles of an inline model: %v", got)
	}
	for _, c := range []struct {
		name  string
		m     *graph.Model
		opts  graph.SaveOptions
		files []string
	}{
		{"inline", m, graph.SaveOptions{}, []string{"out.onnx"}},
		{"externalize", m, graph.SaveOptions{External: graph.ExternalizeLarge, Threshold: 16}, []string{"out.onnx", "out.onnx.data"}},
		{"side file copied", me, graph.SaveOptions{}, []string{"ext.onnx.data", "out.onnx"}},
		{"inline all", me, graph.SaveOptions{External: graph.InlineAll}, []string{"out.onnx"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			stops := 0
			for n := 0; ; n++ {
				dir := t.TempDir()
				ctx := &countdown{context.Background(), n}
				c.opts.Context = ctx
				err := c.m.Save(filepath.Join(dir, "out.onnx"), c.opts)
				var names []string
				entries, _ := os.ReadDir(dir)
				for _, e := range entries {
					names = append(names, e.Name())
				}
				if err == nil {
					if !reflect.DeepEqual(names, c.files) {
						t.Fatalf("saved %v, want %v", names, c.files)
					}
					break
				}
				stops++
				if !errors.Is(err, context.Canceled) || len(names) != 0 {
					t.Fatalf("stopped at look %d: error %v, left %v", n, err, names)
				}
				if n > 1000 {
					t.Fatal("the save never finishes")
				}
			}
			if stops < 2 {
				t.Fatalf("the save looked at its context %d times, want at least 2 (before starting and before renaming)", stops)
			}
		})
	}
}

func TestTensorDecoding(t *testing.T) {
	h := []float16.Float16{float16.Fromfloat32(1.5), float16.Fromfloat32(-2)}
	ht, err := graph.NewTensor("h", graph.Float16, []int64{2}, h)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := ht.Float64s(); !cmp.Equal(v, []float64{1.5, -2}) {
		t.Errorf("float16: %v", v)
	}
	bt, _ := graph.NewTensor("b", graph.BFloat16, []int64{2}, []graph.BF16{graph.BF16FromFloat32(3), graph.BF16FromFloat32(-0.5)})
	if v, _ := bt.Float64s(); !cmp.Equal(v, []float64{3, -0.5}) {
		t.Errorf("bfloat16: %v", v)
	}
	// Typed fields: float16 bits in int32_data, int4 packed pairs.
	gp := &onnxpb.GraphProto{Initializer: []*onnxpb.TensorProto{
		{Name: proto.String("f16"), DataType: proto.Int32(10), Dims: []int64{2}, Int32Data: []int32{0x3e00, 0xc000}},
		{Name: proto.String("i4"), DataType: proto.Int32(22), Dims: []int64{3}, Int32Data: []int32{0xf7, 0x01}},
		{Name: proto.String("u64"), DataType: proto.Int32(13), Dims: []int64{1}, Uint64Data: []uint64{1 << 40}},
		{Name: proto.String("f8"), DataType: proto.Int32(17), Dims: []int64{2}, RawData: []byte{0x38, 0xc0}},
		// int2: four 2-bit elements a byte, the first in the low bits.
		{Name: proto.String("i2"), DataType: proto.Int32(26), Dims: []int64{5}, RawData: []byte{0b00_01_10_11, 0b01}},
		{Name: proto.String("u2"), DataType: proto.Int32(25), Dims: []int64{5}, Int32Data: []int32{0b00_01_10_11, 0b10}},
	}}
	m := decode(t, gp)
	want := [][]float64{{1.5, -2}, {7, -1, 1}, {1 << 40}, {1, -2}, {-1, -2, 1, 0, 1}, {3, 2, 1, 0, 2}}
	for i, v := range m.Graph.Initializers {
		got, err := v.Const.Float64s()
		if err != nil || !cmp.Equal(got, want[i]) {
			t.Errorf("%s: %v (%v), want %v", v.Name, got, err, want[i])
		}
	}
	if _, err := graph.NewTensor("x", graph.Float, []int64{3}, []float32{1, 2}); !errors.Is(err, graph.ErrTensorSize) {
		t.Errorf("wrong count: %v", err)
	}
	st, err := graph.NewTensor("s", graph.String, []int64{2}, []string{"a", "bc"})
	if d, _ := st.Data(); err != nil || !cmp.Equal(d, []string{"a", "bc"}) {
		t.Errorf("strings: %v (%v)", d, err)
	}
	// The sub-byte types are packed by NewTensor and unpacked by Data.
	for _, c := range []struct {
		dt   graph.DataType
		data any
		raw  []byte
	}{
		{graph.Int4, []int8{-8, 7, -1}, []byte{0x78, 0x0f}},
		{graph.Uint4, []uint8{1, 15, 2}, []byte{0xf1, 0x02}},
		{graph.Float4E2M1, []uint8{0x8, 0x7}, []byte{0x78}},
		{graph.Int2, []int8{-2, 1, -1, 0, 1}, []byte{0b00_11_01_10, 0b01}},
		{graph.Uint2, []uint8{3, 0, 2}, []byte{0b10_00_11}},
	} {
		n := reflect.ValueOf(c.data).Len()
		pt, err := graph.NewTensor("p", c.dt, []int64{int64(n)}, c.data)
		if err != nil {
			t.Fatalf("%v: %v", c.dt, err)
		}
		raw, _ := pt.RawBytes()
		back, err := pt.Data()
		if !cmp.Equal(raw, c.raw) || err != nil || !cmp.Equal(back, c.data) {
			t.Errorf("%v: packed %08b, want %08b; unpacked %v (%v)", c.dt, raw, c.raw, back, err)
		}
	}
}

func TestTensorFromFloat64RoundsOnce(t *testing.T) {
	// 1 + 2^-11 + 2^-30 lies just above the float16 tie between 1 and
	// 1+2^-10: rounding through float32 first would give 1 (a tie, to
	// even); one correct rounding gives 1+2^-10.
	x := 1 + 1.0/2048 + 1.0/(1<<30)
	tt, err := graph.TensorFromFloat64("t", graph.Float16, []int64{1}, []float64{x})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := tt.Float64s()
	if v[0] != 1+1.0/1024 {
		t.Fatalf("rounded to %v, want %v", v[0], 1+1.0/1024)
	}
}

func TestNewNameIsUnique(t *testing.T) {
	m, _ := smallModel(t)
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		n := m.NewName("c")
		if seen[n] || n == "c" {
			t.Fatalf("name %q handed out twice or clashes", n)
		}
		seen[n] = true
	}
}

func TestAllVisitsNodesInsertedAhead(t *testing.T) {
	m, _ := smallModel(t)
	g := m.Graph
	var seen []string
	for n := range g.All() {
		seen = append(seen, n.OpType)
		if n.OpType == "Add" {
			// Insert a node right after the current one, and one before it.
			id := g.NewNode("Identity", "", []*graph.Value{n.Output(0)}, 1)
			g.InsertAfter(n, id)
			g.InsertBefore(n, g.NewNode("Constant", "", nil, 1))
		}
		if n.OpType == "Identity" {
			if err := g.Remove(n); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []string{"Add", "Identity", "Relu"}
	if !cmp.Equal(seen, want) {
		t.Fatalf("visited %v, want %v", seen, want)
	}
}

func TestDeadCodeInUnsortedGraph(t *testing.T) {
	vi := func(n string) *onnxpb.ValueInfoProto { return &onnxpb.ValueInfoProto{Name: proto.String(n)} }
	neg := func(in, out string) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: proto.String("Neg"), Input: []string{in}, Output: []string{out}}
	}
	// a -> b -> c is dead; stored as c, a, b so one backward sweep is not enough.
	m := decode(t, &onnxpb.GraphProto{
		Input:  []*onnxpb.ValueInfoProto{vi("x")},
		Output: []*onnxpb.ValueInfoProto{vi("y")},
		Node:   []*onnxpb.NodeProto{neg("b", "c"), neg("x", "a"), neg("a", "b"), neg("x", "y")},
	})
	if n := m.Graph.EliminateDeadCode(); n != 3 || m.Graph.Len() != 1 {
		t.Fatalf("removed %d, %d left", n, m.Graph.Len())
	}
}

func TestReplaceKeepingName(t *testing.T) {
	m := graph.NewModel(8, "test", graph.Opset{Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, graph.Dims(2)))
	a := g.Op("Neg", []*graph.Value{x}, 1)[0]
	y := g.Op("Abs", []*graph.Value{a}, 1)[0]
	g.AddOutput(y)
	b := g.Op("Relu", []*graph.Value{x}, 1)[0]
	name := a.Name
	a.ReplaceKeepingName(b)
	abs := y.Producer()
	if abs.Input(0) != b || b.Name != name || a.Name == name {
		t.Fatalf("Abs reads %q (b is %q, a is %q), want b under a's old name %q", abs.Input(0).Name, b.Name, a.Name, name)
	}
	if g.Lookup(name) != b {
		t.Errorf("Lookup(%q) is not the new value", name)
	}
	if a.NumUses() != 0 {
		t.Errorf("the old value is still read %d times", a.NumUses())
	}
}

// TestRoundTo: float64 values round to the nearest value of the element
// type, ties to even; float64 and other types keep them.
func TestRoundTo(t *testing.T) {
	for _, c := range []struct {
		dt      graph.DataType
		x, want float64
	}{
		{graph.Float, 1 + 0x1p-30, 1},
		{graph.Float, 1 + 0x1p-23, 1 + 0x1p-23},
		{graph.Float, 1 + 0x1p-24, 1},               // a tie: to the even 1
		{graph.Float, 1 + 3*0x1p-24, 1 + 2*0x1p-23}, // a tie: to the even 1+2^-22
		{graph.Float16, 1 + 0x1p-11, 1},             // a tie: to the even 1
		{graph.Float16, 1 + 3*0x1p-11, 1 + 0x1p-9},
		{graph.Float16, 70000, math.Inf(1)},
		{graph.BFloat16, 1 + 0x1p-8, 1},
		{graph.BFloat16, 1 + 3*0x1p-8, 1 + 0x1p-6},
		{graph.Double, 1 + 0x1p-40, 1 + 0x1p-40},
		{graph.Int32, 1.5, 1.5},
	} {
		if got := graph.RoundTo(c.dt, c.x); got != c.want {
			t.Errorf("RoundTo(%v, %v) = %v, want %v", c.dt, c.x, got, c.want)
		}
	}
}

func TestSetOrder(t *testing.T) {
	m := graph.NewModel(8, "test", graph.Opset{Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, graph.Dims(2)))
	a := g.Op("Neg", []*graph.Value{x}, 1)[0]
	b := g.Op("Relu", []*graph.Value{x}, 1)[0]
	y := g.Op("Add", []*graph.Value{a, b}, 1)[0]
	g.AddOutput(y)
	na, nb, ny := a.Producer(), b.Producer(), y.Producer()
	if err := g.SetOrder([]*graph.Node{nb, na, ny}); err != nil {
		t.Fatal(err)
	}
	if got := g.Nodes(); got[0] != nb || got[1] != na || got[2] != ny {
		t.Fatalf("order %v, want Relu, Neg, Add", got)
	}
	for _, bad := range [][]*graph.Node{{ny, na, nb}, {na, nb}, {na, na, ny}} {
		if err := g.SetOrder(bad); err == nil {
			t.Errorf("SetOrder(%v) accepted", bad)
		}
		if got := g.Nodes(); got[0] != nb || got[1] != na || got[2] != ny {
			t.Fatalf("a refused order changed the graph: %v", got)
		}
	}
}
