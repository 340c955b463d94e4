package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestConvGemm compares the im2col + gemm convolution with the direct
// one over 1-D to 3-D shapes, groups, strides, dilations and padding.
func TestConvGemm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cases := []struct {
		n, cin, cout, group   int
		in, ks, st, dil, pads []int // pads: begins then ends
	}{
		{1, 3, 8, 1, []int{16, 16}, []int{4, 4}, []int{4, 4}, []int{1, 1}, []int{0, 0, 0, 0}}, // patchify
		{2, 4, 6, 1, []int{7, 9}, []int{1, 1}, []int{1, 1}, []int{1, 1}, []int{0, 0, 0, 0}},   // 1x1
		{2, 4, 6, 2, []int{7, 9}, []int{3, 3}, []int{2, 1}, []int{1, 2}, []int{1, 2, 2, 0}},
		{1, 6, 6, 6, []int{10}, []int{3}, []int{1}, []int{1}, []int{1, 1}}, // depthwise 1-D
		{1, 4, 8, 2, []int{12}, []int{5}, []int{3}, []int{2}, []int{2, 3}},
		{1, 2, 3, 1, []int{4, 5, 6}, []int{2, 3, 2}, []int{1, 2, 1}, []int{1, 1, 2}, []int{1, 0, 1, 0, 1, 1}},
		{1, 2, 2, 1, []int{3, 3}, []int{5, 5}, []int{1, 1}, []int{1, 1}, []int{1, 1, 1, 1}}, // kernel past the input
	}
	for i, tc := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			sp := len(tc.in)
			out := make([]int, sp)
			for d := range sp {
				ek := (tc.ks[d]-1)*tc.dil[d] + 1
				out[d] = max((tc.in[d]+tc.pads[d]+tc.pads[d+sp]-ek)/tc.st[d]+1, 0)
			}
			x := make([]float32, tc.n*tc.cin*shapeSize(tc.in))
			w := make([]float32, tc.cout*tc.cin/tc.group*shapeSize(tc.ks))
			b := make([]float32, tc.cout)
			for _, s := range [][]float32{x, w, b} {
				for j := range s {
					s[j] = float32(rng.NormFloat64())
				}
			}
			osz := tc.n * tc.cout * shapeSize(out)
			want, got := make([]float32, osz), make([]float32, osz)
			convT(want, x, w, b, tc.n, tc.cin, tc.cout, tc.group, tc.in, tc.ks, out, tc.st, tc.dil, tc.pads[:sp], true)
			convGemm(nil, got, x, w, b, tc.n, tc.cin, tc.cout, tc.group, tc.in, tc.ks, out, tc.st, tc.dil, tc.pads[:sp])
			for j := range want {
				if d := math.Abs(float64(got[j] - want[j])); !(d <= 1e-5+1e-5*math.Abs(float64(want[j]))) {
					t.Fatalf("element %d: got %v, want %v", j, got[j], want[j])
				}
			}
		})
	}
}
