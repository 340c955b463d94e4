package kernels

import "fmt"

// broadcastShape is the multidirectional (numpy) broadcast of shapes.
func broadcastShape(shapes ...[]int) ([]int, error) {
	r := 0
	for _, s := range shapes {
		r = max(r, len(s))
	}
	out := make([]int, r)
	if err := broadcastInto(out, shapes...); err != nil {
		return nil, err
	}
	return out, nil
}

// broadcastInto writes the broadcast of shapes into out, whose length is
// the largest rank.
func broadcastInto(out []int, shapes ...[]int) error {
	r := len(out)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		off := r - len(s)
		for i, d := range s {
			o := out[off+i]
			switch {
			case o == d || d == 1:
			case o == 1:
				out[off+i] = d
			default:
				return fmt.Errorf("shapes %v cannot be broadcast together", shapes)
			}
		}
	}
	return nil
}

// bcastInline are the rank and operand count a bcast holds without
// allocating.
const (
	bcastRank = 8
	bcastOps  = 4
)

// bcast iterates over a broadcast output: for each innermost run of n
// output elements it gives the output offset and, per operand, the offset
// and the step (0 or the operand's innermost stride).
type bcast struct {
	shape   []int   // collapsed output shape
	strides [][]int // per operand, per collapsed dim
	n       int     // output size

	shapeBuf  [bcastRank]int
	strideBuf [bcastOps][bcastRank]int
	hdrBuf    [bcastOps][]int
	// scratch of a serial walk over all runs
	offs, inc [bcastOps]int
	idx       [bcastRank]int
}

func newBcast(out []int, ins ...[]int) *bcast {
	b := new(bcast)
	b.init(out, ins...)
	return b
}

// init readies b for the output shape out and operand shapes ins.
func (b *bcast) init(out []int, ins ...[]int) {
	k := len(ins)
	r := len(out)
	inline := r <= bcastRank && k <= bcastOps
	b.n = shapeSize(out)
	if inline {
		b.shape = b.shapeBuf[:0]
		b.strides = b.hdrBuf[:k]
		for j := range k {
			b.strides[j] = b.strideBuf[j][:0]
		}
	} else {
		b.shape = nil
		b.strides = make([][]int, k)
	}
	// full stride of operand j at output dim i (0 where broadcast)
	full := func(j, i int) int {
		s := ins[j]
		off := r - len(s)
		if i < off || s[i-off] == 1 {
			return 0
		}
		st := 1
		for q := len(s) - 1; q > i-off; q-- {
			st *= s[q]
		}
		return st
	}
	for i := 0; i < r; i++ {
		if out[i] == 1 {
			continue
		}
		if m := len(b.shape) - 1; m >= 0 {
			merge := true
			for j := range k {
				if b.strides[j][m] != full(j, i)*out[i] {
					merge = false
					break
				}
			}
			if merge {
				b.shape[m] *= out[i]
				for j := range k {
					b.strides[j][m] = full(j, i)
				}
				continue
			}
		}
		b.shape = append(b.shape, out[i])
		for j := range k {
			b.strides[j] = append(b.strides[j], full(j, i))
		}
	}
}

// each calls f(o, offs, inc, n) for every innermost run.
func (b *bcast) each(f func(o int, offs, inc []int, n int)) { b.eachRange(0, b.runs(), f) }

// runs is the number of innermost runs.
func (b *bcast) runs() int {
	if b.n == 0 {
		return 0
	}
	if len(b.shape) == 0 {
		return 1
	}
	return b.n / b.shape[len(b.shape)-1]
}

// eachRange is each over the runs [r0, r1) (so that goroutines can share
// the runs; only a walk over all runs uses b's own scratch).
func (b *bcast) eachRange(r0, r1 int, f func(o int, offs, inc []int, n int)) {
	k := len(b.strides)
	r := len(b.shape)
	if b.n == 0 || r0 >= r1 {
		return
	}
	var offs, inc, idx []int
	if r0 == 0 && r1 == b.runs() && k <= bcastOps && r <= bcastRank {
		offs, inc, idx = b.offs[:k], b.inc[:k], b.idx[:r]
		clear(offs)
		clear(inc)
		clear(idx)
	} else {
		offs, inc, idx = make([]int, k), make([]int, k), make([]int, r)
	}
	if r == 0 {
		f(0, offs, inc, 1)
		return
	}
	inner := b.shape[r-1]
	for j := range k {
		inc[j] = b.strides[j][r-1]
	}
	// The index of run r0 over the outer dimensions.
	for d, q := r-2, r0; d >= 0; d-- {
		idx[d] = q % b.shape[d]
		q /= b.shape[d]
		for j := range k {
			offs[j] += idx[d] * b.strides[j][d]
		}
	}
	for o := r0 * inner; o < r1*inner; o += inner {
		f(o, offs, inc, inner)
		for d := r - 2; d >= 0; d-- {
			idx[d]++
			for j := range k {
				offs[j] += b.strides[j][d]
			}
			if idx[d] < b.shape[d] {
				break
			}
			for j := range k {
				offs[j] -= b.strides[j][d] * b.shape[d]
			}
			idx[d] = 0
		}
	}
}
