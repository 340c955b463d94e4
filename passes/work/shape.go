package work

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"slices"
	"strings"
)

// Dim is one dimension of an inferred shape: a size (>= 0) or a symbol
// (< 0), such as the batch or sequence length of a graph input. Two equal
// symbols are the same size; a fresh symbol stands for a size nothing else
// is known to equal.
type Dim int64

// Known reports whether d is a size.
func (d Dim) Known() bool { return d >= 0 }

// IsSym reports whether d is a symbol. Values between symBase and 0 are
// negative numbers (a -1 in a Reshape target), not symbols.
func (d Dim) IsSym() bool { return d <= symBase }

const symBase Dim = -1 << 40

// Shape is an inferred shape. Dims is nil and Ranked false when the rank
// is unknown.
type Shape struct {
	Dims   []Dim
	Ranked bool
}

func ranked(d ...Dim) Shape { return Shape{Dims: d, Ranked: true} }

// Rank is the number of dimensions, or -1.
func (s Shape) Rank() int {
	if !s.Ranked {
		return -1
	}
	return len(s.Dims)
}

// AllKnown reports whether every dimension is a size.
func (s Shape) AllKnown() bool {
	if !s.Ranked {
		return false
	}
	for _, d := range s.Dims {
		if !d.Known() {
			return false
		}
	}
	return true
}

// Last is the last dimension (or a fresh-unknown -1<<40 marker when the
// rank is unknown or zero).
func (s Shape) Last() Dim {
	if !s.Ranked || len(s.Dims) == 0 {
		return unknownDim
	}
	return s.Dims[len(s.Dims)-1]
}

const unknownDim Dim = -1 << 62

// symbol is one symbolic size.
type symbol struct {
	Name string // the dim_param it comes from ("" for fresh ones)
	axis int    // axis of the graph input it was first seen at (-1 for fresh)
	// derived: a fresh symbol computed from others (Work.exprs), which a
	// probe can bind.
	derived bool
}

// symbols hands out symbolic dimensions. Broadcasting shows that two
// symbols (or a symbol and a size) are the same: alias records it.
type symbols struct {
	list   []symbol
	byName map[string]Dim
	alias  map[Dim]Dim
}

// canon follows the aliases of d.
func (s *symbols) Canon(d Dim) Dim {
	for i := 0; i < 64 && d.IsSym(); i++ {
		a, ok := s.alias[d]
		if !ok {
			break
		}
		d = a
	}
	return d
}

// unify records that a and b are the same size. Sizes win over symbols,
// named symbols over fresh ones, derived over other fresh ones.
func (s *symbols) unify(a, b Dim) {
	a, b = s.Canon(a), s.Canon(b)
	if a == b || (!a.IsSym() && !b.IsSym()) || a == 0 || b == 0 {
		return
	}
	if s.alias == nil {
		s.alias = map[Dim]Dim{}
	}
	switch {
	case !b.IsSym():
		s.alias[a] = b
	case !a.IsSym():
		s.alias[b] = a
	case s.Info(b).Name != "" && s.Info(a).Name == "":
		s.alias[a] = b
	case s.Info(a).Name == "" && s.Info(b).Name == "" && s.Info(b).derived && !s.Info(a).derived:
		s.alias[a] = b
	default:
		s.alias[b] = a
	}
}

func (s *symbols) named(name string, axis int) Dim {
	if d, ok := s.byName[name]; ok {
		return d
	}
	if s.byName == nil {
		s.byName = map[string]Dim{}
	}
	s.list = append(s.list, symbol{Name: name, axis: axis})
	d := symBase - Dim(len(s.list)-1)
	s.byName[name] = d
	return d
}

func (s *symbols) fresh() Dim {
	s.list = append(s.list, symbol{axis: -1})
	return symBase - Dim(len(s.list)-1)
}

// derived is a fresh symbol computed from others.
func (s *symbols) derived() Dim {
	s.list = append(s.list, symbol{axis: -1, derived: true})
	return symBase - Dim(len(s.list)-1)
}

func (s *symbols) Info(d Dim) symbol {
	i := int(symBase - d)
	if d > symBase || i >= len(s.list) {
		return symbol{axis: -1}
	}
	return s.list[i]
}

func (w *Work) dimString(d Dim) string {
	if d.Known() {
		return fmt.Sprint(int64(d))
	}
	if d == unknownDim {
		return "?"
	}
	if n := w.Syms.Info(d).Name; n != "" {
		return n
	}
	return fmt.Sprintf("s%d", int64(symBase-d))
}

func (w *Work) ShapeString(s Shape) string {
	if !s.Ranked {
		return "[...]"
	}
	p := make([]string, len(s.Dims))
	for i, d := range s.Dims {
		p[i] = w.dimString(d)
	}
	return "[" + strings.Join(p, ",") + "]"
}

// declaredShape turns a declared type into a Shape, naming symbols after
// dim_params (the same dim_param is the same size: structure, not meaning).
func (w *Work) declaredShape(t *graph.Type) Shape {
	if t == nil || !t.IsTensor() {
		return Shape{}
	}
	dims, ok := t.Shape()
	if !ok {
		return Shape{}
	}
	out := make([]Dim, len(dims))
	for i, d := range dims {
		switch {
		case d.Known:
			out[i] = Dim(d.Value)
		case d.Param != "":
			out[i] = w.Syms.named(d.Param, i)
		default:
			out[i] = w.Syms.fresh()
		}
	}
	return ranked(out...)
}

// Shape is the inferred shape of v.
func (w *Work) Shape(v *graph.Value) Shape {
	s := w.rawShape(v)
	if len(w.Syms.alias) == 0 || !s.Ranked {
		return s
	}
	for i, d := range s.Dims {
		if d.IsSym() {
			if c := w.Syms.Canon(d); c != d {
				s.Dims = append([]Dim(nil), s.Dims...)
				for j := i; j < len(s.Dims); j++ {
					s.Dims[j] = w.Syms.Canon(s.Dims[j])
				}
				w.shapes.set(v, s)
				break
			}
		}
	}
	return s
}

func (w *Work) rawShape(v *graph.Value) Shape {
	if v == nil {
		return Shape{}
	}
	if s, ok := w.shapes.get(v); ok {
		return s
	}
	var s Shape
	switch {
	case v.Const != nil:
		d := v.Const.Dims()
		s = ranked(make([]Dim, len(d))...)
		for i, x := range d {
			s.Dims[i] = Dim(x)
		}
	case v.Type != nil:
		s = w.declaredShape(v.Type)
	}
	w.shapes.set(v, s)
	return s
}

// ElemType is the element type of v when known.
func (w *Work) ElemType(v *graph.Value) graph.DataType {
	if v == nil {
		return graph.Undefined
	}
	if v.Const != nil {
		return v.Const.DataType()
	}
	if t, ok := w.etypes.get(v); ok {
		return t
	}
	if v.Type != nil {
		return v.Type.ElemType()
	}
	return graph.Undefined
}

// broadcast unifies the shapes of elementwise operands.
func (w *Work) broadcast(ss ...Shape) Shape {
	// An operand of unknown rank is left out: in a network it is a mask or
	// a table that broadcasts against the activations.
	rk := ss // all ranked, as nearly always: no copy
	for i, s := range ss {
		if !s.Ranked {
			rk = slices.Clone(ss[:i])
			for _, s := range ss[i+1:] {
				if s.Ranked {
					rk = append(rk, s)
				}
			}
			break
		}
	}
	if len(rk) == 0 {
		return Shape{}
	}
	ss = rk
	r := 0
	for _, s := range ss {
		r = max(r, len(s.Dims))
	}
	out := make([]Dim, r)
	for i := range out {
		out[i] = 1
	}
	for _, s := range ss {
		off := r - len(s.Dims)
		for i, d := range s.Dims {
			o := out[off+i]
			switch {
			case d == 1:
			case o == 1:
				out[off+i] = d
			case o == d:
			case o.Known():
				w.Syms.unify(o, d)
			case d.Known():
				w.Syms.unify(o, d)
				out[off+i] = d
			default:
				w.Syms.unify(o, d)
				out[off+i] = w.Syms.Canon(d)
			}
		}
	}
	return ranked(out...)
}

// product multiplies dims: a known factor and the symbols left.
func product(ds []Dim) (int64, []Dim) {
	c := int64(1)
	var syms []Dim
	for _, d := range ds {
		if d.Known() {
			c *= int64(d)
		} else {
			syms = append(syms, d)
		}
	}
	return c, syms
}

func NormAxis(a int64, r int) int {
	if a < 0 {
		a += int64(r)
	}
	return int(a)
}

// shapeWindow is the axes [start, end) of a rank-r shape that Shape node n
// returns (its start and end attributes, clamped as opset 15 says).
func ShapeWindow(n *graph.Node, r int) (start, end int) {
	start, end = NormAxis(n.AttrInt("start", 0), r), r
	if a := n.Attr("end"); a != nil {
		end = NormAxis(a.Int(), r)
	}
	start, end = max(0, min(start, r)), max(0, min(end, r))
	return start, max(start, end)
}
