package kernels

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
)

func ifOp(c *Call, in []*Tensor) ([]*Tensor, error) {
	cond := in[0]
	if cond.Len() != 1 {
		return nil, fmt.Errorf("condition has %d elements", cond.Len())
	}
	branch := "else_branch"
	if cond.Float64s()[0] != 0 {
		branch = "then_branch"
	}
	outs, err := c.runSub(branch, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", branch, err)
	}
	if len(outs) != c.NumOutputs() {
		return nil, fmt.Errorf("%s has %d outputs, the node %d", branch, len(outs), c.NumOutputs())
	}
	return outs, nil
}

// stack joins equally shaped tensors along a new leading axis.
func stack(c *Call, ts []*Tensor) (*Tensor, error) {
	if len(ts) == 0 {
		return nil, fmt.Errorf("nothing to stack")
	}
	for _, t := range ts {
		if t.notTensor() {
			return nil, fmt.Errorf("a scan output is a sequence")
		}
	}
	out := c.alloc(ts[0].DType, slices.Concat([]int{len(ts)}, ts[0].Shape)...)
	n := ts[0].Len()
	for i, t := range ts {
		if !equalShape(t.Shape, ts[0].Shape) || t.DType != ts[0].DType {
			return nil, fmt.Errorf("scan outputs differ between iterations: %v and %v", ts[0], t)
		}
		copyAny(out, i*n, t, 0, n)
	}
	return out, nil
}

// emptyScan is the scan output of no iterations: a tensor with 0 on the
// scan axis (first) and the element type and sizes the body declares for
// v, its per-iteration value (unknown sizes are 0; float32 when the type
// is unknown).
func emptyScan(c *Call, v *graph.Value) *Tensor {
	dt := graph.Float
	shape := []int{0}
	if v != nil && v.Type != nil && v.Type.IsTensor() {
		if et := v.Type.ElemType(); Supported(et) {
			dt = et
		}
		if dims, ok := v.Type.Shape(); ok {
			for _, d := range dims {
				n := 0
				if d.Known && d.Value > 0 && d.Value <= math.MaxInt32 {
					n = int(d.Value)
				}
				shape = append(shape, n)
			}
		}
	}
	return c.zeros(dt, shape...)
}

// bodyOutput is output i of the graph attribute body, or nil.
func bodyOutput(c *Call, i int) *graph.Value {
	if a := c.Attr("body"); a != nil && a.Graph != nil && i < len(a.Graph.Outputs) {
		return a.Graph.Outputs[i]
	}
	return nil
}

func loopOp(c *Call, in []*Tensor) ([]*Tensor, error) {
	// As ONNX Runtime: iterate while i < M (no M: without bound) and
	// cond, so a negative M runs no iteration.
	maxTrip := int64(math.MaxInt64)
	if t := optIn(in, 0); t != nil {
		if t.notTensor() || t.Len() != 1 {
			return nil, fmt.Errorf("M must have one element, not %v", t)
		}
		maxTrip = t.Int64s()[0]
	}
	cond := true
	if t := optIn(in, 1); t != nil {
		if t.notTensor() || t.Len() != 1 {
			return nil, fmt.Errorf("cond must have one element, not %v", t)
		}
		cond = t.Float64s()[0] != 0
	}
	state := slices.Clone(in[2:])
	nState := len(state)
	nScan := c.NumOutputs() - nState
	if nScan < 0 {
		return nil, fmt.Errorf("%d loop-carried values but %d outputs", nState, c.NumOutputs())
	}
	scans := make([][]*Tensor, nScan)
	limit := c.maxLoopIterations()
	for i := int64(0); i < maxTrip && cond; i++ {
		if i >= limit {
			return nil, fmt.Errorf("loop runs more than %d iterations (Options.MaxLoopIterations)", limit)
		}
		args := append([]*Tensor{Scalar(i), Scalar(cond)}, state...)
		outs, err := c.runSub("body", args)
		if err != nil {
			return nil, fmt.Errorf("body, iteration %d: %w", i, err)
		}
		if len(outs) != 1+nState+nScan {
			return nil, fmt.Errorf("body has %d outputs, want %d", len(outs), 1+nState+nScan)
		}
		if outs[0].notTensor() || outs[0].Len() != 1 {
			return nil, fmt.Errorf("body, iteration %d: cond must have one element, not %v", i, outs[0])
		}
		cond = outs[0].Float64s()[0] != 0
		copy(state, outs[1:1+nState])
		for j := range nScan {
			scans[j] = append(scans[j], outs[1+nState+j])
			// The stacked output grows with the iterations: bound it
			// as it grows, not only when it is stacked.
			if t := outs[1+nState+j]; !t.notTensor() {
				c.reserve(t.DType, slices.Concat([]int{len(scans[j])}, t.Shape))
			}
		}
	}
	res := slices.Clone(state)
	for j := range nScan {
		if len(scans[j]) == 0 {
			res = append(res, emptyScan(c, bodyOutput(c, 1+nState+j)))
			continue
		}
		s, err := stack(c, scans[j])
		if err != nil {
			return nil, err
		}
		res = append(res, s)
	}
	return res, nil
}

func scanOp(c *Call, in []*Tensor) ([]*Tensor, error) {
	m := int(c.Int("num_scan_inputs", 0))
	if c.Opset < 9 {
		return nil, fmt.Errorf("Scan before opset 9: %w", ErrUnsupportedOp)
	}
	n := len(in) - m
	if m <= 0 || n < 0 {
		return nil, fmt.Errorf("num_scan_inputs %d for %d inputs", m, len(in))
	}
	state := slices.Clone(in[:n])
	inAxes, inDirs := c.Ints("scan_input_axes"), c.Ints("scan_input_directions")
	outAxes, outDirs := c.Ints("scan_output_axes"), c.Ints("scan_output_directions")
	k := c.NumOutputs() - n
	if k < 0 {
		return nil, fmt.Errorf("%d state values but %d outputs", n, c.NumOutputs())
	}
	for _, l := range []struct {
		name string
		v    []int64
		want int
	}{{"scan_input_axes", inAxes, m}, {"scan_input_directions", inDirs, m}, {"scan_output_axes", outAxes, k}, {"scan_output_directions", outDirs, k}} {
		if l.v != nil && len(l.v) != l.want {
			return nil, fmt.Errorf("%s has %d entries, want %d", l.name, len(l.v), l.want)
		}
	}
	seqs := make([]*Tensor, m)
	axes := make([]int, m)
	length := -1
	for j := range m {
		t := in[n+j]
		if t == nil || t.notTensor() {
			return nil, fmt.Errorf("scan input %d is not a tensor", j)
		}
		a := int64(0)
		if inAxes != nil {
			a = inAxes[j]
		}
		ax, err := normAxis(a, len(t.Shape))
		if err != nil {
			return nil, err
		}
		// move the scan axis first
		perm := []int{ax}
		for i := range t.Shape {
			if i != ax {
				perm = append(perm, i)
			}
		}
		seqs[j], axes[j] = transposeC(c, t, perm), ax
		if length >= 0 && seqs[j].Shape[0] != length {
			return nil, fmt.Errorf("scan inputs differ in length")
		}
		length = seqs[j].Shape[0]
	}
	scans := make([][]*Tensor, k)
	for it := range length {
		args := slices.Clone(state)
		for j, s := range seqs {
			pos := it
			if inDirs != nil && inDirs[j] == 1 {
				pos = length - 1 - it
			}
			sl := sliceAxis(nil, s, 0, pos, 1)
			args = append(args, view(sl, s.Shape[1:]))
		}
		outs, err := c.runSub("body", args)
		if err != nil {
			return nil, fmt.Errorf("body, iteration %d: %w", it, err)
		}
		if len(outs) != n+k {
			return nil, fmt.Errorf("body has %d outputs, want %d", len(outs), n+k)
		}
		copy(state, outs[:n])
		for j := range k {
			scans[j] = append(scans[j], outs[n+j])
			if t := outs[n+j]; !t.notTensor() {
				c.reserve(t.DType, slices.Concat([]int{len(scans[j])}, t.Shape))
			}
		}
	}
	res := state
	for j := range k {
		ts := scans[j]
		if outDirs != nil && outDirs[j] == 1 {
			slices.Reverse(ts)
		}
		var s *Tensor
		if len(ts) == 0 {
			// A zero-length scan: empty outputs, 0 on the scan axis.
			s = emptyScan(c, bodyOutput(c, n+j))
		} else {
			var err error
			if s, err = stack(c, ts); err != nil {
				return nil, err
			}
		}
		if outAxes != nil {
			ax, err := normAxis(outAxes[j], len(s.Shape))
			if err != nil {
				return nil, err
			}
			perm := []int{}
			for i := 1; i < len(s.Shape); i++ {
				perm = append(perm, i)
			}
			perm = slices.Insert(perm, ax, 0)
			s = transposeC(c, s, perm)
		}
		res = append(res, s)
	}
	return res, nil
}

func init() {
	Register("", "If", 1, 0, ifOp, Native)
	Register("", "Loop", 1, 0, loopOp, Native)
	Register("", "Scan", 9, 0, scanOp, Native)
}
