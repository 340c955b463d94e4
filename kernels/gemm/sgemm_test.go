package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// allPaths names every implementation; the ones this CPU or build lacks
// are skipped visibly.
var allPaths = []string{"avx512", "avx2", "go"}

// forEachPath runs f with each path forced, in three modes: the path's
// own blocking and thresholds; tiny blocks with the in-place small path off
// (so that small shapes cross k, m and n block boundaries of the packed path
// and the parallel split is exercised); and the in-place path for every
// shape (smallWork unbounded).
func forEachPath(t *testing.T, f func(t *testing.T)) {
	for _, name := range allPaths {
		t.Run(name, func(t *testing.T) {
			var ar *arch
			for _, a := range archs {
				if a.name == name {
					ar = a
				}
			}
			if ar == nil {
				t.Skipf("path %s not available on this CPU/build (have %v)", name, Paths())
			}
			for _, mode := range []string{"blocks=native", "blocks=tiny", "small=all"} {
				t.Run(mode, func(t *testing.T) {
					use := ar
					prev, prevWork, prevSmall, prevDot, prevVecs := active, minParallelWork, smallWork, smallDotWork, smallDotVecs
					defer func() {
						active, minParallelWork, smallWork, smallDotWork, smallDotVecs = prev, prevWork, prevSmall, prevDot, prevVecs
					}()
					switch mode {
					case "blocks=tiny":
						c := *ar
						c.kc, c.mc, c.nc = 16, 2*ar.mr, 2*ar.nr
						use = &c
						minParallelWork = 1
						smallWork = -1
					case "small=all":
						smallWork, smallDotWork, smallDotVecs = math.MaxInt, math.MaxInt, 0
					}
					active = use
					f(t)
				})
			}
		})
	}
}

// ref computes alpha*op(A)*op(B) + beta*C in float64 and, per element, the
// magnitude |alpha|*sum|a||b| + |beta||c| that bounds the rounding error.
func ref(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) (want, mag []float64) {
	want = make([]float64, m*n)
	mag = make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s, sa float64
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
				sa += math.Abs(float64(av) * float64(bv))
			}
			w := float64(alpha) * s
			g := math.Abs(float64(alpha)) * sa
			if beta != 0 {
				cv := float64(c[i*ldc+j])
				w += float64(beta) * cv
				g += math.Abs(float64(beta) * cv)
			}
			want[i*n+j], mag[i*n+j] = w, g
		}
	}
	return want, mag
}

// tol32 is the allowed |got-want|: (k+2) float32 roundings of the
// magnitude, times 2 for the alpha/beta scaling, plus a tiny absolute term.
func tol32(k int, mag float64) float64 {
	return 2*float64(k+2)*0x1p-24*mag + 1e-30
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

func matLen(trans bool, rows, cols, ld int) int {
	if trans {
		rows, cols = cols, rows
	}
	return (rows-1)*ld + cols
}

type shape struct {
	transA, transB bool
	m, n, k        int
	pad            int // extra elements per row of A, B and C
	alpha, beta    float32
}

func (s shape) String() string {
	return fmt.Sprintf("tA=%t,tB=%t,%dx%dx%d,pad=%d,alpha=%g,beta=%g", s.transA, s.transB, s.m, s.n, s.k, s.pad, s.alpha, s.beta)
}

var alphaBetas = [][2]float32{{1, 0}, {1, 1}, {0.5, -2}, {-1.5, 0}, {2, 0.25}, {0, 3}, {0, 0}, {1, -1}}

func shapes() []shape {
	dims := []int{1, 3, 17, 33, 64, 65, 129}
	pads := []int{0, 3, 7}
	var ss []shape
	i := 0
	for _, m := range dims {
		for _, n := range dims {
			for _, k := range dims {
				for tr := 0; tr < 4; tr++ {
					ab := alphaBetas[i%len(alphaBetas)]
					ss = append(ss, shape{tr&1 != 0, tr&2 != 0, m, n, k, pads[i%len(pads)], ab[0], ab[1]})
					i++
				}
			}
		}
	}
	// Past one block of the native blocking in each dimension.
	ss = append(ss,
		shape{false, false, 300, 70, 600, 1, 1, 0},
		shape{true, true, 200, 90, 300, 0, 0.5, 1},
		shape{false, true, 13, 4200, 5, 2, 1, 0.5},
		shape{true, false, 0, 5, 5, 0, 1, 0},
		shape{false, false, 5, 0, 5, 0, 1, 0},
		shape{false, false, 5, 7, 0, 0, 1, 0},
		shape{false, false, 5, 7, 0, 0, 1, 2},
	)
	return ss
}

// checkC compares got (m x n, stride ldc) with want and checks that the
// padding between rows is untouched.
func checkC(t *testing.T, s shape, got []float32, ldc int, want, mag []float64, pad []float32) {
	t.Helper()
	bad := 0
	for i := 0; i < s.m; i++ {
		for j := 0; j < s.n; j++ {
			g, w := float64(got[i*ldc+j]), want[i*s.n+j]
			if d := math.Abs(g - w); !(d <= tol32(s.k, mag[i*s.n+j])) {
				if bad < 3 {
					t.Errorf("%v: C[%d,%d] = %g, want %g (|diff| %g > tol %g)", s, i, j, g, w, d, tol32(s.k, mag[i*s.n+j]))
				}
				bad++
			}
		}
		for j := s.n; j < ldc && i < s.m-1; j++ {
			if math.Float32bits(got[i*ldc+j]) != math.Float32bits(pad[i*ldc+j]) {
				t.Fatalf("%v: padding C[%d,%d] overwritten", s, i, j)
			}
		}
	}
	if bad > 3 {
		t.Errorf("%v: %d wrong elements in all", s, bad)
	}
}

func newC(r *rand.Rand, s shape, ldc int) []float32 {
	c := randSlice(r, max(matLen(false, s.m, s.n, ldc), 0))
	if s.beta == 0 {
		for i := range c {
			c[i] = float32(math.NaN())
		}
	}
	return c
}

// threadCounts are the numbers of threads the large tests run with: one
// and all cores, or (-short) all cores only.
func threadCounts() []int {
	if testing.Short() {
		return []int{runtime.GOMAXPROCS(0)}
	}
	return []int{1, runtime.GOMAXPROCS(0)}
}

func TestSgemm(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		for _, threads := range threadCounts() {
			e := Exec{Threads: threads}
			r := rand.New(rand.NewPCG(1, uint64(threads)))
			for _, s := range shapes() {
				lda := max(1, map[bool]int{false: s.k, true: s.m}[s.transA]+s.pad)
				ldb := max(1, map[bool]int{false: s.n, true: s.k}[s.transB]+s.pad)
				ldc := max(1, s.n+s.pad)
				a := randSlice(r, max(matLen(s.transA, s.m, s.k, lda), 0))
				b := randSlice(r, max(matLen(s.transB, s.k, s.n, ldb), 0))
				c := newC(r, s, ldc)
				orig := append([]float32(nil), c...)
				want, mag := ref(s.transA, s.transB, s.m, s.n, s.k, s.alpha, a, lda, b, ldb, s.beta, c, ldc)
				e.Sgemm(s.transA, s.transB, s.m, s.n, s.k, s.alpha, a, lda, b, ldb, s.beta, c, ldc)
				checkC(t, s, c, ldc, want, mag, orig)
			}
		}
	})
}

func TestSgemmPacked(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		for _, threads := range threadCounts() {
			e := Exec{Threads: threads}
			r := rand.New(rand.NewPCG(2, uint64(threads)))
			for _, s := range shapes() {
				s.transA = false
				lda, ldb, ldc := max(1, s.k+s.pad), max(1, map[bool]int{false: s.n, true: s.k}[s.transB]+s.pad), max(1, s.n+s.pad)
				a := randSlice(r, max(matLen(false, s.m, s.k, lda), 0))
				b := randSlice(r, max(matLen(s.transB, s.k, s.n, ldb), 0))
				pb := PackB(s.transB, s.k, s.n, b, ldb)
				for rep := 0; rep < 2; rep++ { // the packing is reusable
					c := newC(r, s, ldc)
					orig := append([]float32(nil), c...)
					want, mag := ref(false, s.transB, s.m, s.n, s.k, s.alpha, a, lda, b, ldb, s.beta, c, ldc)
					e.SgemmPacked(s.m, s.n, s.k, s.alpha, a, lda, pb, s.beta, c, ldc)
					checkC(t, s, c, ldc, want, mag, orig)
				}
			}
		}
	})
}

func TestSgemmStrided(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 0))
		for _, tc := range []struct {
			batch, m, n, k int
			broadcastB     bool
		}{
			{1, 5, 6, 7, false}, {3, 17, 33, 65, false}, {4, 64, 64, 64, true},
			{12, 128, 64, 128, false}, {5, 1, 129, 33, true}, {2, 300, 100, 300, false},
		} {
			for _, tr := range []int{0, 3} {
				s := shape{tr&1 != 0, tr&2 != 0, tc.m, tc.n, tc.k, 1, 1.5, 0.5}
				lda := map[bool]int{false: s.k, true: s.m}[s.transA] + 1
				ldb := map[bool]int{false: s.n, true: s.k}[s.transB] + 1
				ldc := s.n + 1
				sa := matLen(s.transA, s.m, s.k, lda) + 2
				sb := matLen(s.transB, s.k, s.n, ldb) + 2
				sc := matLen(false, s.m, s.n, ldc) + 2
				if tc.broadcastB {
					sb = 0
				}
				a := randSlice(r, tc.batch*sa)
				b := randSlice(r, max(tc.batch*sb, matLen(s.transB, s.k, s.n, ldb)))
				c := randSlice(r, tc.batch*sc)
				orig := append([]float32(nil), c...)
				SgemmStrided(tc.batch, s.transA, s.transB, s.m, s.n, s.k, s.alpha, a, lda, sa, b, ldb, sb, s.beta, c, ldc, sc)
				for i := 0; i < tc.batch; i++ {
					want, mag := ref(s.transA, s.transB, s.m, s.n, s.k, s.alpha, a[i*sa:], lda, b[i*sb:], ldb, s.beta, orig[i*sc:], ldc)
					checkC(t, s, c[i*sc:], ldc, want, mag, orig[i*sc:])
				}
			}
		}
	})
}

// TestKernelsAllRows drives every micro-kernel of every available path
// directly, for each row count and a range of k (unrolled loop and tail).
func TestKernelsAllRows(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 0))
	for _, ar := range archs {
		for rows := 1; rows <= ar.mr; rows++ {
			for _, k := range []int{1, 2, 3, 4, 5, 8, 31} {
				for _, ab := range alphaBetas {
					a, b := randSlice(r, k*rows), randSlice(r, k*ar.nr)
					ldc := ar.nr + 5
					s := shape{false, false, rows, ar.nr, k, 5, ab[0], ab[1]}
					c := newC(r, s, ldc)
					orig := append([]float32(nil), c...)
					// The packed panel a is k x rows; ref wants rows x k.
					at := make([]float32, rows*k)
					for p := 0; p < k; p++ {
						for i := 0; i < rows; i++ {
							at[i*k+p] = a[p*rows+i]
						}
					}
					want, mag := ref(false, false, rows, ar.nr, k, ab[0], at, k, b, ar.nr, ab[1], c, ldc)
					ar.kernels[rows](k, &a[0], &b[0], &c[0], ldc, ab[0], ab[1])
					checkC(t, s, c, ldc, want, mag, orig)
				}
			}
		}
	}
}

func TestPanics(t *testing.T) {
	a, b, c := make([]float32, 12), make([]float32, 12), make([]float32, 9)
	for name, f := range map[string]func(){
		"negative m":   func() { Sgemm(false, false, -1, 3, 4, 1, a, 4, b, 3, 0, c, 3) },
		"short A":      func() { Sgemm(false, false, 3, 3, 5, 1, a, 5, b, 3, 0, c, 3) },
		"small lda":    func() { Sgemm(false, false, 3, 3, 4, 1, a, 3, b, 3, 0, c, 3) },
		"short C":      func() { Sgemm(false, false, 3, 3, 4, 1, a, 4, b, 3, 0, c[:8], 3) },
		"transB short": func() { Sgemm(false, true, 3, 4, 4, 1, a, 4, b, 4, 0, c, 4) },
		"packed shape": func() { SgemmPacked(3, 3, 3, 1, a, 4, PackB(false, 4, 3, b, 3), 0, c, 3) },
		"C overlap":    func() { SgemmStrided(2, false, false, 1, 3, 4, 1, a, 4, 4, b, 3, 0, 0, c, 3, 2) },
		"Dgemm short": func() {
			Dgemm(false, false, 3, 3, 5, 1, make([]float64, 12), 5, make([]float64, 15), 3, 0, make([]float64, 9), 3)
		},
	} {
		func() {
			defer func() {
				r := recover()
				if s, ok := r.(string); !ok || !strings.HasPrefix(s, "gemm: ") {
					t.Errorf("%s: recovered %v, want a gemm: panic", name, r)
				}
			}()
			f()
		}()
	}
}

// TestPureGoEnv runs this test binary again with ONNXPE_PUREGO=1 and checks
// that the pure Go path is chosen.
func TestPureGoEnv(t *testing.T) {
	if os.Getenv("ONNXPE_PUREGO") == "1" {
		if Path() != "go" {
			t.Fatalf("ONNXPE_PUREGO=1: Path() = %q, want go", Path())
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPureGoEnv$", "-test.v")
	cmd.Env = append(os.Environ(), "ONNXPE_PUREGO=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestPureGoEnv") {
		t.Fatalf("child with ONNXPE_PUREGO=1: %v\n%s", err, out)
	}
	t.Logf("default path %s, available %v", Path(), Paths())
}

func TestGrid(t *testing.T) {
	for _, tc := range []struct{ nt, mp, np, aCost, bCost, gm, gn int }{
		{2, 100, 24, 24, 24, 2, 1}, {2, 1, 24, 24, 24, 1, 2}, {4, 3, 24, 24, 24, 1, 4},
		{4, 100, 100, 0, 0, 4, 1}, {1, 5, 5, 24, 24, 1, 1}, {2, 11, 24, 24, 24, 1, 2},
		{2, 11, 24, 24, 0, 1, 2}, {2, 10, 24, 24, 0, 2, 1},
	} {
		if gm, gn := grid(tc.nt, tc.mp, tc.np, 12, 32, tc.aCost, tc.bCost); gm != tc.gm || gn != tc.gn {
			t.Errorf("grid(%d, %d, %d, costs %d %d) = %d, %d; want %d, %d", tc.nt, tc.mp, tc.np, tc.aCost, tc.bCost, gm, gn, tc.gm, tc.gn)
		}
	}
}

// TestWorkerPanicReachesCaller: a panic in a worker goroutine is raised on
// the calling goroutine (where a caller can recover it) after every
// worker has ended, instead of ending the process.
func TestWorkerPanicReachesCaller(t *testing.T) {
	for _, bad := range []int{0, 3} {
		var done atomic.Int32
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("worker %d: recovered %v, want boom", bad, r)
				}
			}()
			parallel(4, func(i int) {
				defer done.Add(1)
				if i == bad {
					panic("boom")
				}
			})
		}()
		if n := done.Load(); n != 4 {
			t.Errorf("worker %d: %d of 4 workers ended before the panic reached the caller", bad, n)
		}
	}
}

// TestSmall drives the in-place small path of every available path, for
// row and column counts around the vector lengths and tile heights, every
// layout and the alpha/beta cases, with C surrounded by sentinels. The
// packed micro-kernels are replaced by ones that panic, so a product under
// the threshold that packs fails the test.
func TestSmall(t *testing.T) {
	dims := []int{1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33}
	ks := []int{1, 3, 8, 16, 17, 33}
	forEachPath(t, func(t *testing.T) {
		ar := *active
		ar.kernels = make([]kernelFunc, len(active.kernels))
		for i := range ar.kernels {
			ar.kernels[i] = func(int, *float32, *float32, *float32, int, float32, float32) { panic("packed kernel called") }
		}
		active = &ar
		prevSmall, prevDot, prevVecs := smallWork, smallDotWork, smallDotVecs
		defer func() { smallWork, smallDotWork, smallDotVecs = prevSmall, prevDot, prevVecs }()
		smallWork, smallDotWork, smallDotVecs = 33*33*33, 33*33*33, 0
		r := rand.New(rand.NewPCG(5, 0))
		i := 0
		for _, m := range dims {
			for _, n := range dims {
				for _, k := range ks {
					for tr := 0; tr < 4; tr++ {
						ab := alphaBetas[i%len(alphaBetas)]
						s := shape{tr&1 != 0, tr&2 != 0, m, n, k, []int{0, 1, 5}[i%3], ab[0], ab[1]}
						i++
						if tr == 3 && ar.small != nil {
							continue // packed on the native paths (see smallDotWork)
						}
						lda := map[bool]int{false: s.k, true: s.m}[s.transA] + s.pad
						ldb := map[bool]int{false: s.n, true: s.k}[s.transB] + s.pad
						ldc := s.n + s.pad
						a := randSlice(r, matLen(s.transA, s.m, s.k, lda))
						b := randSlice(r, matLen(s.transB, s.k, s.n, ldb))
						const guard = 40
						buf := newC(r, shape{m: 1, n: 2*guard + matLen(false, s.m, s.n, ldc), beta: s.beta}, 0)
						for j := range guard {
							buf[j], buf[len(buf)-1-j] = 7, 7
						}
						c := buf[guard : len(buf)-guard]
						orig := append([]float32(nil), c...)
						want, mag := ref(s.transA, s.transB, s.m, s.n, s.k, s.alpha, a, lda, b, ldb, s.beta, c, ldc)
						Sgemm(s.transA, s.transB, s.m, s.n, s.k, s.alpha, a, lda, b, ldb, s.beta, c, ldc)
						checkC(t, s, c, ldc, want, mag, orig)
						for j := range guard {
							if buf[j] != 7 || buf[len(buf)-1-j] != 7 {
								t.Fatalf("%v: write outside C", s)
							}
						}
					}
				}
			}
		}
		// Above the threshold the (panicking) packed kernels run: the
		// test above could not have passed by packing.
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("product above smallWork did not use the packed kernels")
				}
			}()
			prevRows := smallRows
			defer func() { smallRows = prevRows }()
			smallWork, smallRows = 0, 0
			a := make([]float32, 9)
			Sgemm(false, false, 3, 3, 3, 1, a, 3, a, 3, 0, make([]float32, 9), 3)
		}()
	})
}

// TestSmallCoversShapes checks which shapes of TestSgemm (and so of
// TestSgemmPacked and TestSgemmStrided, whose small shapes are among them)
// take the in-place path in blocks=native mode, per path: on the pure Go
// path every layout under smallWork, on the native paths op(A)*B under
// smallWork and A*B^T under the dot-product limits. Mode small=all puts
// every shape of those tests through the in-place path.
func TestSmallCoversShapes(t *testing.T) {
	for _, ar := range archs {
		seen := map[[2]bool]int{}
		for _, s := range shapes() {
			if s.m*s.n*s.k == 0 {
				continue
			}
			p := problem{ar: ar, m: s.m, n: s.n, k: s.k, transA: s.transA, transB: s.transB}
			work := s.m * s.n * s.k
			few := ar.small != nil && s.m <= smallRows
			want := work <= smallWork || few
			if ar.small != nil && s.transB {
				want = want && !s.transA && (work <= smallDotWork || few) && s.k >= smallDotVecs*ar.small.lanes
			}
			if got := p.inPlace(); got != want {
				t.Errorf("%s %v: in place %t, want %t", ar.name, s, got, want)
			}
			if want {
				seen[[2]bool{s.transA, s.transB}]++
			}
		}
		wantLayouts := 4
		if ar.small != nil {
			wantLayouts = 3
		}
		if len(seen) != wantLayouts {
			t.Errorf("%s: layouts in place under the thresholds: %v, want %d", ar.name, seen, wantLayouts)
		}
		if p := (problem{ar: ar, m: 1, n: 1, k: 1, pb: &PackedB{}}); p.inPlace() {
			t.Errorf("%s: packed B taken in place", ar.name)
		}
	}
}

func BenchmarkSgemmSmall(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 5))
	for _, sz := range []struct{ m, n, k int }{{17, 17, 16}, {17, 16, 17}, {12, 12, 64}, {32, 32, 32}, {48, 48, 32}, {64, 64, 32}, {64, 64, 64}, {128, 64, 64}, {1, 2048, 128}, {4, 2048, 128}, {1, 128, 2048}, {4, 128, 2048}, {8, 2048, 128}, {16, 2048, 128}, {8, 128, 2048}, {16, 128, 2048}, {8, 768, 768}, {16, 768, 768}} {
		a, bm, c := randSlice(r, sz.m*sz.k), randSlice(r, sz.k*sz.n), randSlice(r, sz.m*sz.n)
		for _, tb := range []bool{false, true} {
			for _, small := range []bool{false, true} {
				b.Run(fmt.Sprintf("%dx%dx%d/tB=%t/small=%t", sz.m, sz.n, sz.k, tb, small), func(b *testing.B) {
					prev, prevDot, prevVecs := smallWork, smallDotWork, smallDotVecs
					defer func() { smallWork, smallDotWork, smallDotVecs = prev, prevDot, prevVecs }()
					smallWork = map[bool]int{false: -1, true: math.MaxInt}[small]
					smallDotWork, smallDotVecs = smallWork, 0
					ldb := map[bool]int{false: sz.n, true: sz.k}[tb]
					b.ReportAllocs()
					for b.Loop() {
						Exec{Threads: 1}.Sgemm(false, tb, sz.m, sz.n, sz.k, 1, a, sz.k, bm, ldb, 0, c, sz.n)
					}
					reportGFLOPS(b, sz.m, sz.n, sz.k)
				})
			}
		}
	}
}

// TestEmptyOperands: products with a dimension of 0, whose operands have
// row stride 0 as tensors of shape [m,0] do, give C = beta*C (zeros for
// beta 0, whatever C held) and touch nothing when C is empty.
func TestEmptyOperands(t *testing.T) {
	const m, n = 2, 3
	stale := func() []float32 { return []float32{1, 2, 3, 4, 5, 6} }
	want := func(beta float32) []float32 {
		w := stale()
		for i := range w {
			w[i] *= beta
		}
		return w
	}
	for _, beta := range []float32{0, 2} {
		c := stale()
		Sgemm(false, false, m, n, 0, 1, nil, 0, nil, n, beta, c, n)
		if !slices.Equal(c, want(beta)) {
			t.Errorf("Sgemm k=0 beta=%v: %v, want %v", beta, c, want(beta))
		}
		c = stale()
		Sgemm(true, true, m, n, 0, 1, nil, m, nil, 0, beta, c, n)
		if !slices.Equal(c, want(beta)) {
			t.Errorf("Sgemm transposed k=0 beta=%v: %v, want %v", beta, c, want(beta))
		}
		c = stale()
		SgemmPacked(m, n, 0, 1, nil, 0, PackB(false, 0, n, nil, n), beta, c, n)
		if !slices.Equal(c, want(beta)) {
			t.Errorf("SgemmPacked k=0 beta=%v: %v, want %v", beta, c, want(beta))
		}
		c = stale()
		SgemmStrided(2, false, false, 1, n, 0, 1, nil, 0, 0, nil, n, 0, beta, c, n, n)
		if !slices.Equal(c, want(beta)) {
			t.Errorf("SgemmStrided k=0 beta=%v: %v, want %v", beta, c, want(beta))
		}
		d := []float64{1, 2, 3, 4, 5, 6}
		Dgemm(false, false, m, n, 0, 1, nil, 0, nil, n, float64(beta), d, n)
		for i, v := range d {
			if v != float64(want(beta)[i]) {
				t.Errorf("Dgemm k=0 beta=%v: %v", beta, d)
				break
			}
		}
	}
	// m or n of 0: C has no elements, and its stride may be 0.
	Sgemm(false, false, 0, n, 4, 1, nil, 4, make([]float32, 4*n), n, 0, nil, n)
	Sgemm(false, false, m, 0, 4, 1, make([]float32, 4*m), 4, nil, 0, 0, nil, 0)
	Dgemm(false, false, m, 0, 4, 1, make([]float64, 4*m), 4, nil, 0, 0, nil, 0)
	SgemmStrided(0, false, false, m, n, 4, 1, nil, 4, 0, nil, n, 0, 0, nil, n, 0)
}

// TestFewRowsInPlace: products of up to smallRows rows are multiplied in
// place whatever their size, on one goroutine or split by columns over
// several, on every path, against the float64 reference.
func TestFewRowsInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 1))
	for _, ar := range archs {
		prev := active
		active = ar
		for _, m := range []int{1, 3, 8} {
			for _, n := range []int{33, 1000, 2049} {
				for _, k := range []int{64, 300} {
					for _, tB := range []bool{false, true} {
						for _, threads := range []int{1, 2} {
							s := shape{false, tB, m, n, k, 0, 1, 0.5}
							ldb := map[bool]int{false: n, true: k}[tB]
							a, b := randSlice(r, m*k), randSlice(r, k*n)
							c := randSlice(r, m*n)
							orig := append([]float32(nil), c...)
							want, mag := ref(false, tB, m, n, k, 1, a, k, b, ldb, 0.5, c, n)
							Exec{Threads: threads}.Sgemm(false, tB, m, n, k, 1, a, k, b, ldb, 0.5, c, n)
							checkC(t, s, c, n, want, mag, orig)
						}
					}
				}
			}
		}
		active = prev
	}
}
