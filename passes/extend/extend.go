package extend

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme/nope"
	"github.com/onnxpe/onnxpe/passes/schemes"
	"github.com/onnxpe/onnxpe/passes/work"
	"math"
	"slices"
	"strings"
)

// ExtendModel gives m a longer context: it audits m, checks the request
// against what the audit found, and rewrites the encodings of a copy so
// that it supports opts.To positions (RoPE frequencies and caches under a
// scaling rule, learned tables by hierarchical decomposition, sinusoidal
// tables and ALiBi constants continued with their own formula, masks and
// position buffers fixed at export widened). Requests the model does not
// allow return ErrExtend; the checks (equal where it must be, the
// reference, the runs at N) are the caller's (the command uses verify).
func ExtendModel(m *graph.Model, opts rewrite.ExtendOptions) (*rewrite.Extended, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	rep, ctx, err := audit.AuditModel(m, "", passes.Options{})
	if err != nil {
		return nil, err
	}
	return Extend(rep, ctx, opts)
}

// Extend is ExtendModel of a model audited already: rep and ctx are its
// audit's (audit.AuditModel), which is not run again.
func Extend(rep *passes.Report, ctx *passes.Context, opts rewrite.ExtendOptions) (*rewrite.Extended, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Run(rewrite.Edit); err != nil {
		return nil, err
	}
	r := rewrite.Of(ctx)
	x := &rewrite.Extended{M: r.M, Audit: rep, Opts: opts, Ctx: ctx, R: r, Report: &rewrite.ExtendReport{NewMax: opts.To}}
	if err := extend(x); err != nil {
		return nil, err
	}
	if err := r.Finish(); err != nil {
		return nil, err
	}
	return x, nil
}

// extend plans and applies the extension of every finding.
func extend(x *rewrite.Extended) error {
	rep, o := x.Report, x.Opts
	var fs []*passes.Finding
	for _, f := range x.Audit.Findings {
		if f.Subgraph != "" {
			return rewrite.ExtendErr("the %s encoding of layers %v is inside %s (a generation op's graph): extend the decoder model it runs", f.Scheme, f.Layers, f.Subgraph)
		}
		if f.Scheme != nope.Name {
			fs = append(fs, f)
		}
	}
	for _, f := range fs {
		if e := extenderOf(f.Scheme); e != nil && e.Check != nil {
			if err := e.Check(o); err != nil {
				return err
			}
		}
	}
	// A method of a scheme the model does not have.
	for _, sc := range schemes.All {
		e, scheme := sc.Extend, sc.Name
		if e == nil {
			continue
		}
		if slices.Contains(e.Methods, o.Method) && !slices.ContainsFunc(fs, func(f *passes.Finding) bool { return f.Scheme == scheme }) {
			return rewrite.ExtendErr("--method %s %s (schemes: %s)", o.Method, e.Absent, strings.Join(x.Audit.Schemes, ", "))
		}
	}
	slices.SortStableFunc(fs, func(a, b *passes.Finding) int {
		return slices.Index(schemes.Names(), a.Scheme) - slices.Index(schemes.Names(), b.Scheme)
	})
	// The largest length the model supports now: the smallest bound of
	// its encodings.
	bound := func(n int, from string) {
		if n > 0 && (rep.OldMax == nil || n < *rep.OldMax) {
			rep.OldMax, rep.OldMaxFrom = passes.Ptr(n), from
		}
	}
	var items []*rewrite.ExtendItem
	rules := false
	for _, f := range fs {
		plan := rewrite.PlanComputed
		if e := extenderOf(f.Scheme); e != nil {
			plan = e.Plan
		}
		it, err := plan(x, f)
		if err != nil {
			return err
		}
		if it == nil {
			continue
		}
		it.Finding = f
		items = append(items, it)
		rules = rules || it.Rule != nil
		if it.OldMax != nil {
			bound(*it.OldMax, it.OldMaxFrom)
		}
	}
	if o.OriginalMax > 0 && !rules {
		bound(o.OriginalMax, "--original-max-positions")
	}
	if rep.OldMax != nil && o.To <= *rep.OldMax {
		return rewrite.ExtendErr("--to %d is not longer than what the model supports already (%d positions: %s)", o.To, *rep.OldMax, rep.OldMaxFrom)
	}
	if rep.OldMax == nil {
		rep.OldMaxFrom = "no table or constant of the graph bounds the positions"
	}
	rep.Items = items
	for _, it := range items {
		if e := extenderOf(it.Scheme); e != nil && e.Apply != nil {
			if err := e.Apply(x, it); err != nil {
				return err
			}
		}
	}
	if rep.OldMax != nil {
		if err := widenBounded(x, *rep.OldMax); err != nil {
			return err
		}
	}
	x.ForgetShapes()
	return nil
}

// extenderOf is the extension of the scheme named name (nil: computed for
// any position).
func extenderOf(name string) *rewrite.Extender {
	if sc := schemes.Lookup(name); sc != nil {
		return sc.Extend
	}
	return nil
}

// boundedRead is a node reading a constant at positions: a Gather,
// GatherElements, GatherND or Slice of a constant (through layout ops)
// whose indices or bounds depend on the inputs' sizes, position ids or
// masks (not on token ids or content).
type boundedRead struct {
	node  *graph.Node
	base  *graph.Value
	t     *graph.Tensor
	axes  []int // the axes of size n
	index []*graph.Value
}

// widenBounded enlarges the other constants read at positions that have
// n entries along an axis (causal masks, 0, 1, 2, ... buffers, ALiBi
// bias constants): each is continued with the rule its values follow
// (0, 1, 2, ...; a function of i - j that is constant off the
// diagonal; linear), and constants equal to n in the computation of
// where it is read (MPT's max_seq_len - key_length) become N. A
// constant that follows none of these is refused.
func widenBounded(x *rewrite.Extended, n int) error {
	r := x.R
	ch := r.Begin("extend", "")
	defer r.End(ch)
	N := x.Opts.To
	reads := boundedReads(x, n)
	var bases []*graph.Value
	byBase := map[*graph.Value][]boundedRead{}
	for _, rd := range reads {
		if _, ok := byBase[rd.base]; !ok {
			bases = append(bases, rd.base)
		}
		byBase[rd.base] = append(byBase[rd.base], rd)
	}
	for _, base := range bases {
		rds := byBase[base]
		rd := rds[0]
		it := itemReading(x, rd.node)
		// Constants equal to n where the reads' bounds are computed: a
		// read that counts from n counts from N, and the constant is
		// continued so that its last n entries stay.
		anchored := 0
		for _, rd := range rds {
			cs := indexConsts(x, rd, n)
			if len(cs) > 0 {
				anchored++
			}
			for _, c := range cs {
				t := x.ConstTensor(c)
				ints, err := t.Int64s()
				if err != nil {
					continue
				}
				for i := range ints {
					ints[i] = int64(N)
				}
				nt, err := graph.NewTensor(c.Name, t.DataType(), t.Dims(), rewrite.IntSlice(t.DataType(), ints))
				if err != nil {
					return err
				}
				x.Widened = append(x.Widened, rewrite.Widened{Name: c.Name, T: nt})
				x.ReplaceConst(c, nt)
				x.Record(it, rewrite.ExtendEdit{Where: c.Name, What: fmt.Sprintf("bound %d of %s (%s): %d", n, work.NodeName(rd.node), rd.node.OpType, N)})
			}
		}
		if anchored != 0 && anchored != len(rds) {
			return rewrite.ExtendErr("the constant %q is read at positions by %d nodes, %d of which count from its end: onnxpe cannot enlarge it for all", base.Name, len(rds), anchored)
		}
		nt, what, err := continueConst(rd.t, rd.axes, n, N, anchored > 0)
		if err != nil {
			return rewrite.ExtendErr("the constant %q %v is read at positions by %s (%s) and has %d entries along an axis, but %v: onnxpe cannot enlarge it", base.Name, rd.t.Dims(), work.NodeName(rd.node), rd.node.OpType, n, err)
		}
		nt.SetName(base.Name)
		x.Widened = append(x.Widened, rewrite.Widened{Name: base.Name, T: nt})
		x.ReplaceConst(base, nt)
		x.Record(it, rewrite.ExtendEdit{Where: base.Name, What: fmt.Sprintf("%s %v %v to %v, read by %s", what, rd.t.DataType(), rd.t.Dims(), nt.Dims(), readers(rds))})
	}
	return nil
}

func readers(rds []boundedRead) string {
	var s []string
	for _, rd := range rds {
		s = append(s, fmt.Sprintf("%s (%s)", work.NodeName(rd.node), rd.node.OpType))
	}
	if len(s) > 3 {
		return fmt.Sprintf("%s and %d more", strings.Join(s[:2], ", "), len(s)-2)
	}
	return strings.Join(s, ", ")
}

// itemReading is the item whose finding names node n (the ALiBi bias
// slice), or nil.
func itemReading(x *rewrite.Extended, n *graph.Node) *rewrite.ExtendItem {
	name := work.NodeName(n)
	for _, it := range x.Report.Items {
		if it.Finding != nil && slices.Contains(it.Finding.Nodes, name) {
			return it
		}
	}
	return nil
}

// boundedReads lists the reads at positions of constants having n
// entries along some axis.
func boundedReads(x *rewrite.Extended, n int) []boundedRead {
	var out []boundedRead
	for _, nd := range x.R.M.Graph.Nodes() {
		if !work.IsONNX(nd) {
			continue
		}
		switch nd.OpType {
		case "Gather", "GatherElements", "GatherND", "Slice":
		default:
			continue
		}
		v := work.Back(nd.Input(0), work.LayoutOps, 8, func(v *graph.Value) bool { return x.ConstTensor(v) != nil })
		if v == nil || x.ConstTensor(v) == nil {
			continue
		}
		t := x.ConstTensor(v)
		if t == nil {
			continue
		}
		var axes []int
		for i, d := range t.Dims() {
			if d == int64(n) {
				axes = append(axes, i)
			}
		}
		if len(axes) == 0 {
			continue
		}
		idx := slices.DeleteFunc(slices.Clone(nd.Inputs()[1:]), func(v *graph.Value) bool { return v == nil })
		if !positional(x, idx) {
			continue
		}
		out = append(out, boundedRead{node: nd, base: v, t: t, axes: axes, index: idx})
	}
	return out
}

// positional reports whether indices vs depend on the inputs (not only on
// constants) and not on the values of token ids or content: sizes,
// positions and masks only.
func positional(x *rewrite.Extended, vs []*graph.Value) bool {
	w := work.Of(x.Ctx)
	seen := map[*graph.Value]bool{}
	dynamic, tokens := false, false
	var walk func(v *graph.Value, depth int)
	walk = func(v *graph.Value, depth int) {
		if v == nil || seen[v] || depth > 64 {
			return
		}
		seen[v] = true
		if v.IsGraphInput() {
			dynamic = true
			if wv := w.M.Graph.Lookup(v.Name); wv != nil {
				switch w.Role(wv) {
				case work.RoleTokens, work.RoleTokenType, work.RoleContent:
					tokens = true
				}
			}
			return
		}
		p := v.Producer()
		if p == nil {
			return
		}
		if p.OpType == "Shape" || p.OpType == "Size" {
			dynamic = true // sizes only
			return
		}
		for _, in := range p.Inputs() {
			walk(in, depth+1)
		}
	}
	for _, v := range vs {
		walk(v, 0)
	}
	return dynamic && !tokens
}

// indexConsts lists the integer constants equal to n (scalars or one
// element) in the computation of a read's indices or bounds.
func indexConsts(x *rewrite.Extended, rd boundedRead, n int) []*graph.Value {
	var out []*graph.Value
	seen := map[*graph.Value]bool{}
	var walk func(v *graph.Value, depth int)
	walk = func(v *graph.Value, depth int) {
		if v == nil || seen[v] || depth > 24 || v == rd.base {
			return
		}
		seen[v] = true
		if t := x.ConstTensor(v); t != nil {
			if t.Len() == 1 && t.DataType().IsInt() {
				if ints, err := t.Int64s(); err == nil && ints[0] == int64(n) {
					out = append(out, v)
				}
			}
			return
		}
		p := v.Producer()
		if p == nil || p.OpType == "Shape" {
			return
		}
		for _, in := range p.Inputs() {
			walk(in, depth+1)
		}
	}
	for _, v := range rd.index {
		walk(v, 0)
	}
	return out
}

// continueConst enlarges t from n to N entries along axes, by the rule
// its values follow: 0, 1, 2, ... (plus a constant) along one axis; a
// function of i - j over two axes that is constant for i > j and for
// i < j (causal masks); linear along one axis. endAnchored keeps the last
// n entries equal (the read counts from the end) instead of the first.
func continueConst(t *graph.Tensor, axes []int, n, N int, endAnchored bool) (*graph.Tensor, string, error) {
	vals, err := t.Float64s()
	if err != nil {
		return nil, "", err
	}
	dims := t.Dims()
	nd := slices.Clone(dims)
	for _, a := range axes {
		nd[a] = int64(N)
	}
	strides := func(d []int64) []int {
		s := make([]int, len(d))
		acc := 1
		for i := len(d) - 1; i >= 0; i-- {
			s[i] = acc
			acc *= int(d[i])
		}
		return s
	}
	so, sn := strides(dims), strides(nd)
	total := 1
	for _, d := range nd {
		total *= int(d)
	}
	out := make([]float64, total)
	// index decomposes a flat index of the new tensor.
	idx := func(flat int, st []int, d []int64) []int {
		ix := make([]int, len(d))
		for i := range d {
			ix[i] = flat / st[i] % int(d[i])
		}
		return ix
	}
	at := func(ix []int) float64 {
		f := 0
		for i, x := range ix {
			f += x * so[i]
		}
		return vals[f]
	}
	var what string
	switch {
	case len(axes) == 2 && isToeplitz(vals, dims, axes, at):
		a, b := axes[0], axes[1]
		what = "function of i - j (causal mask), continued"
		for f := range out {
			ix := idx(f, sn, nd)
			d := ix[a] - ix[b]
			o := slices.Clone(ix)
			switch {
			case d > 0:
				o[a], o[b] = 1, 0
			case d < 0:
				o[a], o[b] = 0, 1
			default:
				o[a], o[b] = 0, 0
			}
			out[f] = at(o)
		}
	default:
		ax := -1
		for _, a := range axes {
			if ok, _ := isLinear(vals, dims, a, at); ok {
				ax = a
				break
			}
		}
		if ax < 0 {
			return nil, "", fmt.Errorf("its values are neither 0, 1, 2, ... nor linear along that axis, nor a function of i - j")
		}
		_, arange := isLinear(vals, dims, ax, at)
		what = "linear along an axis, continued"
		if arange {
			what = "0, 1, 2, ... continued"
		}
		nd = slices.Clone(dims)
		nd[ax] = int64(N)
		sn = strides(nd)
		total = 1
		for _, d := range nd {
			total *= int(d)
		}
		out = make([]float64, total)
		shift := 0
		if endAnchored {
			shift = N - n
		}
		for f := range out {
			ix := idx(f, sn, nd)
			k := ix[ax] - shift
			o0 := slices.Clone(ix)
			o0[ax] = 0
			o1 := slices.Clone(ix)
			o1[ax] = 1
			v0, v1 := at(o0), at(o1)
			out[f] = v0 + (v1-v0)*float64(k)
		}
		// Keep the stored entries exactly.
		for f := range out {
			ix := idx(f, sn, nd)
			k := ix[ax] - shift
			if k >= 0 && k < n {
				o := slices.Clone(ix)
				o[ax] = k
				out[f] = at(o)
			}
		}
	}
	var nt *graph.Tensor
	dt := t.DataType()
	switch {
	case dt.IsFloat():
		nt, err = graph.TensorFromFloat64(t.Name(), dt, nd, out)
	case dt == graph.Bool:
		b := make([]bool, len(out))
		for i, v := range out {
			b[i] = v != 0
		}
		nt, err = graph.NewTensor(t.Name(), dt, nd, b)
	case dt.IsInt():
		ints := make([]int64, len(out))
		for i, v := range out {
			ints[i] = int64(math.Round(v))
		}
		nt, err = graph.NewTensor(t.Name(), dt, nd, rewrite.IntSlice(dt, ints))
	default:
		return nil, "", fmt.Errorf("element type %v", dt)
	}
	return nt, what, err
}

// isToeplitz reports whether t's values over axes a, b depend only on
// i - j (the same for every other index), constant for i > j and for
// i < j.
func isToeplitz(vals []float64, dims []int64, axes []int, at func([]int) float64) bool {
	a, b := axes[0], axes[1]
	n := int(dims[a])
	ok := true
	forEach(dims, func(ix []int) {
		if !ok {
			return
		}
		d := ix[a] - ix[b]
		o := slices.Clone(ix)
		switch {
		case d > 0:
			o[a], o[b] = 1, 0
		case d < 0:
			o[a], o[b] = 0, 1
		default:
			o[a], o[b] = 0, 0
		}
		if n < 2 || at(o) != at(ix) {
			ok = false
		}
	})
	return ok
}

// isLinear reports whether t's values are linear along axis a (exactly
// for integers, within float rounding otherwise), and whether they are
// 0, 1, 2, ... plus a constant.
func isLinear(vals []float64, dims []int64, a int, at func([]int) float64) (bool, bool) {
	if dims[a] < 2 {
		return false, false
	}
	ok, arange := true, true
	forEach(dims, func(ix []int) {
		if !ok {
			return
		}
		o0 := slices.Clone(ix)
		o0[a] = 0
		o1 := slices.Clone(ix)
		o1[a] = 1
		v0, v1 := at(o0), at(o1)
		want := v0 + (v1-v0)*float64(ix[a])
		if math.Abs(at(ix)-want) > 1e-6*max(1, math.Abs(want)) {
			ok = false
		}
		if v1-v0 != 1 {
			arange = false
		}
	})
	return ok, ok && arange
}

// forEach calls f with every index of dims.
func forEach(dims []int64, f func([]int)) {
	ix := make([]int, len(dims))
	total := 1
	for _, d := range dims {
		total *= int(d)
	}
	for k := 0; k < total; k++ {
		rem := k
		for i := len(dims) - 1; i >= 0; i-- {
			ix[i] = rem % int(dims[i])
			rem /= int(dims[i])
		}
		f(ix)
	}
}
