package learned

import (
	"math"
	"slices"
	"testing"
)

// TestHierarchical checks the decomposition against Su's formula written
// with 1-based positions: q_{(i-1)·n+j} = α·u_i + (1-α)·u_j,
// u_i = (p_i - α·p_1)/(1-α).
func TestHierarchical(t *testing.T) {
	const n, width, off, alpha = 3, 2, 1, 0.4
	src := []float64{
		-7, -7, // a padding row before position 0
		1, 2, // p_1
		3, 5, // p_2
		-4, 0.5, // p_3
	}
	N := n * n
	dst := make([]float64, (off+N)*width)
	copy(dst, src)
	hierarchical(dst, src, off, n, N, width, alpha)
	p := func(i, c int) float64 { return src[(off+i-1)*width+c] } // 1-based
	u := func(i, c int) float64 { return (p(i, c) - alpha*p(1, c)) / (1 - alpha) }
	for i := 1; i <= n; i++ {
		for j := 1; j <= n; j++ {
			pos := (i-1)*n + j // 1-based
			for c := 0; c < width; c++ {
				want := alpha*u(i, c) + (1-alpha)*u(j, c)
				got := dst[(off+pos-1)*width+c]
				if i == 1 {
					want = p(j, c) // the trained rows, exactly
				}
				if math.Abs(got-want) > 1e-12 {
					t.Fatalf("position %d (i %d, j %d) column %d: %g, want %g", pos, i, j, c, got, want)
				}
			}
		}
	}
	if !slices.Equal(dst[:len(src)], src) {
		t.Fatal("the trained rows changed")
	}
}
