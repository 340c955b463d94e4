package gemm

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

var benchSizes = []struct {
	name    string
	m, n, k int
}{
	{"Small", 64, 64, 64},
	{"Medium", 128, 768, 768}, // GPT-2 small projection, seq 128
	{"Large", 1024, 768, 768},
}

// benchPaths runs f for each available path with 1 thread and with
// GOMAXPROCS threads, as sub-benchmarks named path/threads=N.
func benchPaths(b *testing.B, f func(b *testing.B, e Exec)) {
	for _, ar := range archs {
		for _, nt := range []int{1, runtime.GOMAXPROCS(0)} {
			b.Run(fmt.Sprintf("%s/threads=%d", ar.name, nt), func(b *testing.B) {
				prev := active
				active = ar
				defer func() { active = prev }()
				f(b, Exec{Threads: nt})
			})
			if runtime.GOMAXPROCS(0) == 1 {
				break
			}
		}
	}
}

func reportGFLOPS(b *testing.B, m, n, k int) {
	b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkSgemm(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, sz := range benchSizes {
		a, bm, c := randSlice(r, sz.m*sz.k), randSlice(r, sz.k*sz.n), randSlice(r, sz.m*sz.n)
		b.Run(sz.name, func(b *testing.B) {
			benchPaths(b, func(b *testing.B, e Exec) {
				b.ReportAllocs()
				for b.Loop() {
					e.Sgemm(false, false, sz.m, sz.n, sz.k, 1, a, sz.k, bm, sz.n, 0, c, sz.n)
				}
				reportGFLOPS(b, sz.m, sz.n, sz.k)
			})
		})
	}
}

// BenchmarkSgemmPacked is BenchmarkSgemm with B (the weights) packed once,
// transposed as in a Gemm with transB=1.
func BenchmarkSgemmPacked(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 3))
	for _, sz := range benchSizes {
		a, bm, c := randSlice(r, sz.m*sz.k), randSlice(r, sz.k*sz.n), randSlice(r, sz.m*sz.n)
		b.Run(sz.name, func(b *testing.B) {
			benchPaths(b, func(b *testing.B, e Exec) {
				pb := PackB(true, sz.k, sz.n, bm, sz.k)
				b.ReportAllocs()
				for b.Loop() {
					e.SgemmPacked(sz.m, sz.n, sz.k, 1, a, sz.k, pb, 0, c, sz.n)
				}
				reportGFLOPS(b, sz.m, sz.n, sz.k)
			})
		})
	}
}

func BenchmarkDgemm(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 4))
	for _, sz := range benchSizes {
		a, bm, c := make([]float64, sz.m*sz.k), make([]float64, sz.k*sz.n), make([]float64, sz.m*sz.n)
		for _, x := range [][]float64{a, bm} {
			for i := range x {
				x[i] = r.NormFloat64()
			}
		}
		for _, nt := range []int{1, runtime.GOMAXPROCS(0)} {
			b.Run(fmt.Sprintf("%s/threads=%d", sz.name, nt), func(b *testing.B) {
				e := Exec{Threads: nt}
				b.ReportAllocs()
				for b.Loop() {
					e.Dgemm(false, false, sz.m, sz.n, sz.k, 1, a, sz.k, bm, sz.n, 0, c, sz.n)
				}
				reportGFLOPS(b, sz.m, sz.n, sz.k)
			})
		}
	}
}
