package kernels

import "fmt"

// broadcastShape is the multidirectional (numpy) broadcast of shapes.
func broadcastShape(shapes ...[]int) ([]int, error) {
	r := 0
	for _, s := range shapes {
		r = max(r, len(s))
	}
	out := make([]int, r)
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
				return nil, fmt.Errorf("shapes %v cannot be broadcast together", shapes)
			}
		}
	}
	return out, nil
}

// bcast iterates over a broadcast output: for each innermost run of n
// output elements it gives the output offset and, per operand, the offset
// and the step (0 or the operand's innermost stride).
type bcast struct {
	shape   []int   // collapsed output shape
	strides [][]int // per operand, per collapsed dim
	n       int     // output size
}

func newBcast(out []int, ins ...[]int) *bcast {
	k := len(ins)
	r := len(out)
	full := make([][]int, k)
	for j, s := range ins {
		st := stridesOf(s)
		full[j] = make([]int, r)
		off := r - len(s)
		for i := range s {
			if s[i] != 1 {
				full[j][off+i] = st[i]
			}
		}
	}
	b := &bcast{n: shapeSize(out), strides: make([][]int, k)}
	for i := 0; i < r; i++ {
		if out[i] == 1 {
			continue
		}
		if m := len(b.shape) - 1; m >= 0 {
			merge := true
			for j := range k {
				if b.strides[j][m] != full[j][i]*out[i] {
					merge = false
					break
				}
			}
			if merge {
				b.shape[m] *= out[i]
				for j := range k {
					b.strides[j][m] = full[j][i]
				}
				continue
			}
		}
		b.shape = append(b.shape, out[i])
		for j := range k {
			b.strides[j] = append(b.strides[j], full[j][i])
		}
	}
	return b
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
// the runs).
func (b *bcast) eachRange(r0, r1 int, f func(o int, offs, inc []int, n int)) {
	k := len(b.strides)
	offs := make([]int, k)
	inc := make([]int, k)
	r := len(b.shape)
	if b.n == 0 || r0 >= r1 {
		return
	}
	if r == 0 {
		f(0, offs, inc, 1)
		return
	}
	inner := b.shape[r-1]
	for j := range k {
		inc[j] = b.strides[j][r-1]
	}
	idx := make([]int, r)
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
