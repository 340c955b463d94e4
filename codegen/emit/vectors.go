package emit

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes/probe"
	"slices"
)

// runner runs the model's own subgraph computing some values (extracted by
// passes.Context.Extract) with the executor, possibly several times with
// other values given at its cuts.
type runner struct {
	x    *probe.Extracted
	sess *kernels.Session
}

// extract makes the runner of spec.
func (g *Gen) Extract(spec probe.ExtractSpec) (*runner, error) {
	x, err := probe.Extract(g.Ctx, spec)
	if err != nil {
		return nil, err
	}
	s, err := kernels.NewSession(x.Model, kernels.Options{Threads: 1})
	if err != nil {
		return nil, fmt.Errorf("the extracted subgraph: %w", err)
	}
	return &runner{x: x, sess: s}, nil
}

// run runs the subgraph, with given values at the cuts (by the names of
// ExtractSpec.Cuts), and returns its outputs in the order asked.
func (r *runner) Run(given map[string]*kernels.Tensor) ([]*kernels.Tensor, error) {
	in := map[string]*kernels.Tensor{}
	for k, v := range r.x.Inputs {
		in[k] = v
	}
	for name, t := range given {
		iname, ok := r.x.Given[name]
		if !ok {
			return nil, fmt.Errorf("%q is not cut in the extracted subgraph", name)
		}
		in[iname] = t
	}
	out, err := r.sess.Run(in)
	if err != nil {
		return nil, fmt.Errorf("running the extracted subgraph: %w", err)
	}
	var res []*kernels.Tensor
	for _, o := range r.x.Model.Graph.Outputs {
		t, ok := out[o.Name]
		if !ok {
			return nil, fmt.Errorf("the extracted subgraph did not compute %q", o.Name)
		}
		res = append(res, t)
	}
	return res, nil
}

// fixedLen is the number of positions of a model whose sizes do not follow
// the sequence length (static shapes): the size of value's axis
// fromEnd-th from the end; 0 when the sizes follow the sequence.
func (g *Gen) FixedLen(value string, fromEnd int) int {
	a, _, err1 := probe.BoundShape(g.Ctx, value, 5)
	b, _, err2 := probe.BoundShape(g.Ctx, value, 7)
	if err1 != nil || err2 != nil || !slices.Equal(a, b) || len(a) < fromEnd {
		return 0
	}
	return a[len(a)-fromEnd]
}

// samplePositions are the positions of 0..n-1 the golden vectors keep:
// the first 16, then steps growing by about half up to n-1, and n-1.
func SamplePositions(n int) []int {
	var out []int
	for p := 0; p < n && p < 16; p++ {
		out = append(out, p)
	}
	for p := 16; p < n; p += max(1, p/2) {
		out = append(out, p)
	}
	if n > 0 && out[len(out)-1] != n-1 {
		out = append(out, n-1)
	}
	return out
}

// thin keeps about k of the positions ps, always the first and the last.
func Thin(ps []int, k int) []int {
	if len(ps) <= k || k < 2 {
		return ps
	}
	var out []int
	for i := 0; i < k; i++ {
		out = append(out, ps[i*(len(ps)-1)/(k-1)])
	}
	return slices.Compact(out)
}

// tensorOf makes a tensor of element type dt from values (rounded to dt;
// int64 and int32 truncate).
func TensorOf(dt graph.DataType, shape []int, vals []float64) (*kernels.Tensor, error) {
	switch dt {
	case graph.Int64:
		v := make([]int64, len(vals))
		for i, x := range vals {
			v[i] = int64(x)
		}
		return kernels.FromSlice(shape, v), nil
	case graph.Int32:
		v := make([]int32, len(vals))
		for i, x := range vals {
			v[i] = int32(x)
		}
		return kernels.FromSlice(shape, v), nil
	}
	dims := make([]int64, len(shape))
	for i, d := range shape {
		dims[i] = int64(d)
	}
	gt, err := graph.TensorFromFloat64("golden", dt, dims, vals)
	if err != nil {
		return nil, err
	}
	return kernels.FromGraph(gt)
}

// floatType is the table element type for values of dt: float32 for
// float32 and wider, uint16 bit patterns for the half types.
func FloatType(dt graph.DataType) string {
	if dt == graph.Float16 || dt == graph.BFloat16 {
		return "uint16"
	}
	return "float32"
}

// longest runs fn at n positions, and at fewer (halving) when the model
// refuses n; it returns the n that ran.
func Longest(n, least int, fn func(n int) error) (int, error) {
	if n < 1 {
		return 0, fmt.Errorf("no positions to test")
	}
	least = min(least, n)
	var first error
	for ; n >= least; n /= 2 {
		err := fn(n)
		if err == nil {
			return n, nil
		}
		if first == nil {
			first = err
		}
	}
	return 0, first
}
