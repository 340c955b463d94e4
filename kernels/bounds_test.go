package kernels

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
)

// Sizes a model computes are bounded: every tensor a kernel allocates
// passes one check (Call.reserve, Options.MaxTensorBytes), so an output
// whose size comes from the shapes of small inputs (a broadcast, a matrix
// product over an empty inner dimension, a gather) fails the node with an
// error wrapping ErrTooLarge before anything is allocated.

// TestBroadcastsAreBounded runs ops whose outputs are far larger than
// their inputs: each must fail with ErrTooLarge (the default limit, 16
// GiB) and allocate next to nothing. Before the bound check the first
// case ended the test binary with "fatal error: out of memory".
func TestBroadcastsAreBounded(t *testing.T) {
	const n = 1 << 17 // [n,1] op [1,n] is 2^34 elements: 64 GiB of float32
	col, row := New(graph.Float, n, 1), New(graph.Float, 1, n)
	bcol, brow := New(graph.Bool, 4*n, 1), New(graph.Bool, 1, 4*n) // 2^38 bools
	i64 := func(shape []int, v ...int64) *Tensor { return FromSlice(shape, v) }
	for _, tc := range []struct {
		name  string
		op    string
		opset int64
		attrs []*graph.Attr
		ins   []*Tensor
	}{
		{"Add", "Add", 14, nil, []*Tensor{col, row}},
		{"Pow", "Pow", 15, nil, []*Tensor{col, row}},
		{"Sum", "Sum", 13, nil, []*Tensor{col, row, col}},
		{"Max", "Max", 13, nil, []*Tensor{col, row}},
		{"Equal", "Equal", 13, nil, []*Tensor{New(graph.Float, 4*n, 1), New(graph.Float, 1, 4*n)}},
		{"And", "And", 7, nil, []*Tensor{bcol, brow}},
		{"Where", "Where", 16, nil, []*Tensor{New(graph.Bool, n, 1, 1), New(graph.Float, 1, n, 1), New(graph.Float, 1, 1, 4)}},
		{"MatMul empty inner", "MatMul", 13, nil, []*Tensor{New(graph.Float, n, 0), New(graph.Float, 0, n)}},
		{"MatMul batch broadcast", "MatMul", 13, nil, []*Tensor{New(graph.Float, n, 1, 1, 1), New(graph.Float, 1, n, 1, 1)}},
		{"Gemm empty inner", "Gemm", 13, nil, []*Tensor{New(graph.Float, n, 0), New(graph.Float, 0, n)}},
		{"Einsum outer product", "Einsum", 12, []*graph.Attr{graph.StringAttr("equation", "i,j->ij")}, []*Tensor{New(graph.Float, n), New(graph.Float, n)}},
		{"Gather", "Gather", 13, nil, []*Tensor{New(graph.Float, 1, n), New(graph.Int64, n)}},
		{"GatherND empty tuples", "GatherND", 13, nil, []*Tensor{New(graph.Float, n), New(graph.Int64, n, 0)}},
		{"Conv huge pads", "Conv", 11, []*graph.Attr{graph.IntsAttr("pads", 1<<20, 1<<20, 1<<20, 1<<20)}, []*Tensor{New(graph.Float, 1, 1, 1, 1), New(graph.Float, 1, 1, 1, 1)}},
		{"Tile", "Tile", 13, nil, []*Tensor{New(graph.Float, n), i64([]int{1}, n)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := runOp(t, "", tc.op, tc.opset, 1, tc.attrs, tc.ins...)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrInternal) {
				t.Fatalf("error %v, want one wrapping ErrTooLarge", err)
			}
			var ne *NodeError
			if !errors.As(err, &ne) || ne.Op != tc.op {
				t.Errorf("error %v does not name the node", err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
				t.Errorf("allocated %d MiB before failing", grew>>20)
			}
		})
	}
}

// TestMaxTensorBytesBoundsEveryKernel: a session's MaxTensorBytes bounds
// every tensor its kernels allocate, also inside subgraphs.
func TestMaxTensorBytesBoundsEveryKernel(t *testing.T) {
	opts := Options{MaxTensorBytes: 1024}
	x, y := New(graph.Float, 16, 1), New(graph.Float, 1, 32) // 2048 bytes out
	if _, err := runOpWith(t, opts, "", "Add", 14, 1, nil, x, y); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Add of 2048 bytes under a 1024-byte limit: %v", err)
	}
	if _, err := runOpWith(t, opts, "", "Add", 14, 1, nil, New(graph.Float, 16, 1), New(graph.Float, 1, 16)); err != nil {
		t.Errorf("Add of 1024 bytes under a 1024-byte limit: %v", err)
	}
	// A Loop whose scan output grows by 256 bytes an iteration fails when
	// the stacked output would pass the limit, not after 2^24 iterations.
	m := graph.NewModel(9, "loop", graph.Opset{Version: 17})
	g := m.Graph
	trip := g.AddInput("trip", graph.TensorType(graph.Int64, nil))
	body := g.NewSubgraph("body")
	body.AddInput("i", graph.TensorType(graph.Int64, nil))
	cond := body.AddInput("cond", graph.TensorType(graph.Bool, nil))
	shape, _ := graph.NewTensor("shape", graph.Int64, []int64{1}, []int64{64})
	chunk := body.Op("ConstantOfShape", []*graph.Value{body.AddInitializer(shape)}, 1)[0]
	body.AddOutput(body.Op("Identity", []*graph.Value{cond}, 1)[0])
	body.AddOutput(chunk)
	loop := g.NewNode("Loop", "", []*graph.Value{trip, nil}, 1, graph.GraphAttr("body", body))
	g.Append(loop)
	g.AddOutput(loop.Output(0))
	s, err := NewSession(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(map[string]*Tensor{"trip": Scalar(int64(4))}); err != nil {
		t.Fatalf("4 iterations of 256 bytes: %v", err)
	}
	if _, err := s.Run(map[string]*Tensor{"trip": Scalar(int64(1 << 20))}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("2^20 iterations of 256 bytes under a 1024-byte limit: %v", err)
	}
}

// TestKernelsAllocateThroughCall reads the package's source: outside
// tensor.go (the constructors for callers), kernel code allocates tensors
// only through Call.alloc, Call.zeros and Call.clone, whose sizes pass the
// bound check; it never calls New or Tensor.Clone, which do not know the
// session's limit. A kernel added with New fails here: use c.zeros (c may
// be nil outside a run).
func TestKernelsAllocateThroughCall(t *testing.T) {
	// Calls outside kernels proper: the pool and alloc themselves, and
	// Run's and Eval's copies of a constant output for the caller.
	allowed := map[string]bool{
		"memory.go:get":        true,
		"memory.go:allocDirty": true,
		"session.go:RunInto":   true,
		"session.go:Eval":      true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "tensor.go" {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				var what string
				switch f := call.Fun.(type) {
				case *ast.Ident:
					if f.Name == "New" {
						what = "New"
					}
				case *ast.SelectorExpr:
					if f.Sel.Name == "Clone" && len(call.Args) == 0 {
						if id, ok := f.X.(*ast.Ident); !ok || id.Name != "slices" && id.Name != "maps" {
							what = "Clone"
						}
					}
				}
				if what != "" && !allowed[name+":"+fn.Name.Name] {
					t.Errorf("%s: %s calls %s: allocate with c.alloc, c.zeros or c.clone (the bound check of MaxTensorBytes)", fset.Position(call.Pos()), fn.Name.Name, what)
				}
				return true
			})
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d files", checked)
	}
}
