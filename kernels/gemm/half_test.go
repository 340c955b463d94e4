package gemm

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"
)

// TestWidenHalf checks the float16 widening against the float16 package
// for every bit pattern, vectorised and scalar.
func TestWidenHalf(t *testing.T) {
	s := make([]uint16, 1<<16)
	for i := range s {
		s[i] = uint16(i)
	}
	d := make([]float32, len(s))
	widenHalf(d, s, Float16)
	for i, h := range s {
		want := float16.Frombits(h).Float32()
		if math.Float32bits(d[i]) != math.Float32bits(want) && !(want != want && d[i] != d[i]) {
			t.Fatalf("widen %#04x: %v (%#x), want %v", h, d[i], math.Float32bits(d[i]), want)
		}
		if g := f16to32(h); math.Float32bits(g) != math.Float32bits(want) && !(want != want && g != g) {
			t.Fatalf("f16to32 %#04x: %v, want %v", h, g, want)
		}
	}
}

// TestSgemmHalfB checks that a product with a 16-bit B equals Sgemm of the
// widened B bit for bit (the widening is exact; the packing and kernels
// are the same), for both layouts of B, both half types, on every path,
// at sizes that cover the in-place range, edge tiles and several k
// blocks.
func TestSgemmHalfB(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	for _, ar := range archs {
		prev := active
		active = ar
		for _, sz := range [][3]int{{1, 1, 1}, {1, 33, 17}, {3, 64, 300}, {8, 100, 40}, {13, 31, 513}, {40, 70, 30}} {
			m, n, k := sz[0], sz[1], sz[2]
			for _, h := range []Half{Float16, BFloat16} {
				for _, transB := range []bool{false, true} {
					a := make([]float32, m*k)
					for i := range a {
						a[i] = float32(rng.NormFloat64())
					}
					b16 := make([]uint16, k*n)
					b := make([]float32, k*n)
					for i := range b16 {
						x := float32(rng.NormFloat64())
						if h == Float16 {
							b16[i] = float16.Fromfloat32(x).Bits()
							b[i] = float16.Frombits(b16[i]).Float32()
						} else {
							b16[i] = uint16(math.Float32bits(x) >> 16)
							b[i] = math.Float32frombits(uint32(b16[i]) << 16)
						}
					}
					ldb := n
					if transB {
						ldb = k
					}
					for _, threads := range []int{1, 2} {
						want := make([]float32, m*n)
						got := make([]float32, m*n)
						for i := range got {
							got[i] = 1
							want[i] = 1
						}
						e := Exec{Threads: threads}
						e.Sgemm(false, transB, m, n, k, 0.5, a, k, b, ldb, 2, want, n)
						// Sgemm may multiply small products in place; the
						// half path always packs: compare with the packed one.
						pw := make([]float32, m*n)
						for i := range pw {
							pw[i] = 1
						}
						pb := PackB(transB, k, n, b, ldb)
						e.SgemmPacked(m, n, k, 0.5, a, k, pb, 2, pw, n)
						e.SgemmHalfB(h, transB, m, n, k, 0.5, a, k, b16, ldb, 2, got, n)
						for i := range got {
							if got[i] != pw[i] {
								t.Fatalf("%s %dx%dx%d %v transB %v threads %d: C[%d] = %v, packed Sgemm %v", ar.name, m, n, k, h, transB, threads, i, got[i], pw[i])
							}
							if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*(1+math.Abs(float64(want[i]))) {
								t.Fatalf("%s %dx%dx%d: C[%d] = %v, Sgemm %v", ar.name, m, n, k, i, got[i], want[i])
							}
						}
					}
				}
			}
		}
		active = prev
	}
}
