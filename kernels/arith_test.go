package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestBinRunFloat32 checks binRun on float32 (AVX-512 where the CPU has
// it) against a plain loop, bit for bit, for every run length up to 70
// (whole vectors and masked tails), the three operand layouts, and inputs
// with zeros of both signs, infinities, NaNs and subnormals.
func TestBinRunFloat32(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-45, -3e-39, 3.4e38}
	val := func() float32 {
		if rng.IntN(8) == 0 {
			return specials[rng.IntN(len(specials))]
		}
		return float32(rng.NormFloat64() * 4)
	}
	ops := map[binOp]func(x, y float32) float32{
		opAdd: func(x, y float32) float32 { return x + y },
		opSub: func(x, y float32) float32 { return x - y },
		opMul: func(x, y float32) float32 { return x * y },
		opDiv: func(x, y float32) float32 { return x / y },
	}
	vec := 0
	for n := 1; n <= 70; n++ {
		a, b, d := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i] = val(), val()
		}
		for op, f := range ops {
			for _, inc := range [][2]int{{1, 1}, {1, 0}, {0, 1}} {
				ia, ib := inc[0], inc[1]
				binRun(op, d, a, b, ia, ib)
				for i := range d {
					w := f(a[ia*i], b[ib*i])
					if math.Float32bits(d[i]) != math.Float32bits(w) && !(w != w && d[i] != d[i]) {
						t.Fatalf("op %d n %d inc %v: element %d = %g, want %g", op, n, inc, i, d[i], w)
					}
				}
				if binVec32(op, d, a, b, ia, ib) {
					vec++
				}
			}
		}
		reluSlice(d, a)
		for i, v := range a {
			if w := reluT(v); math.Float32bits(d[i]) != math.Float32bits(w) && !(w != w && d[i] != d[i]) {
				t.Fatalf("relu n %d: element %d = %g, want %g", n, i, d[i], w)
			}
		}
	}
	requireVector(t, "binary ops", vec, 70*4*3)
}

// TestIsRowOf checks the bias-row test of binaryT's broadcast fast path.
func TestIsRowOf(t *testing.T) {
	for _, tc := range []struct {
		s, out []int
		want   bool
	}{
		{[]int{32}, []int{3, 12, 32}, true},
		{[]int{1, 12, 32}, []int{3, 12, 32}, true},
		{[]int{1, 1, 32}, []int{3, 12, 32}, true},
		{[]int{12, 1}, []int{3, 12, 32}, false},
		{[]int{3, 1, 32}, []int{3, 12, 32}, false},
		{[]int{1}, []int{3, 12, 32}, false},
		{[]int{}, []int{3}, false},
		{[]int{2, 3, 4}, []int{3, 4}, false},
	} {
		if got := isRowOf(tc.s, tc.out); got != tc.want {
			t.Errorf("isRowOf(%v, %v) = %v, want %v", tc.s, tc.out, got, tc.want)
		}
	}
}

// TestLayerNorm32 checks the float32 row kernel against the generic one
// (whose float64 sums run in element order): the sums in another order
// may move a result by at most 1 ulp, in every variant (scale and bias
// present or not, simplified or not) and row length.
func TestLayerNorm32(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	worst := 0
	for d := 1; d <= 70; d++ {
		const rows = 5
		x, s, b := make([]float32, rows*d), make([]float32, d), make([]float32, d)
		for i := range x {
			x[i] = float32(rng.NormFloat64()*3 + float64(i%3))
		}
		for i := range s {
			s[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		for _, simplified := range []bool{false, true} {
			for _, sb := range [][2][]float32{{s, b}, {s, nil}, {nil, b}, {nil, nil}} {
				y, w := make([]float32, rows*d), make([]float32, rows*d)
				m1, i1, m2, i2 := make([]float64, rows), make([]float64, rows), make([]float64, rows), make([]float64, rows)
				layerNorm32(y, x, sb[0], sb[1], 0, rows, d, 1e-5, simplified, m1, i1)
				layerNormT(w, x, sb[0], sb[1], 0, rows, d, 1e-5, simplified, m2, i2)
				for i := range y {
					if u := int(ulpDiff(y[i], float64(w[i]))); u > worst {
						worst = u
					}
					if ulpDiff(y[i], float64(w[i])) > 1 {
						t.Fatalf("d %d simplified %v: element %d = %g, generic %g", d, simplified, i, y[i], w[i])
					}
				}
				for r := range rows {
					if !(math.Abs(m1[r]-m2[r]) <= 1e-12*(1+math.Abs(m2[r]))) || !(math.Abs(i1[r]-i2[r]) <= 1e-12*i2[r]) {
						t.Fatalf("d %d row %d: stats %g %g, generic %g %g", d, r, m1[r], i1[r], m2[r], i2[r])
					}
				}
			}
		}
	}
	t.Logf("worst %d ulp", worst)
}
