package gemm

import (
	"os"
	"unsafe"
)

// kernelFunc is a micro-kernel for a fixed number of rows mr (the index in
// arch.kernels) and the arch's nr columns: it sets
//
//	C[i*ldc+j] = alpha*sum_p a[p*mr+i]*b[p*nr+j] + beta*C[i*ldc+j]
//
// for i < mr, j < nr, over k steps of the packed panels a and b. With
// beta == 0, C is only written.
type kernelFunc func(k int, a, b, c *float32, ldc int, alpha, beta float32)

// arch is one implementation path: a micro-kernel family and its blocking.
type arch struct {
	name    string
	mr, nr  int           // micro-tile
	kc      int           // depth of a packed block (B micro-panel kc*nr in L1)
	mc      int           // rows of a packed A block (mc*kc in L2); multiple of mr
	nc      int           // columns of a packed B block; multiple of nr
	kernels []kernelFunc  // kernels[r] handles r rows, 1 <= r <= mr
	small   *smallKernels // in-place kernels for small products; nil: pure Go
}

// archs lists the paths this CPU and build support, fastest first; the
// pure Go path is always last.
var archs []*arch

// active is the path Sgemm uses: archs[0], or the pure Go path when
// ONNXPE_PUREGO=1.
var active *arch

func init() {
	archs = append(nativeArchs(), goArch)
	active = archs[0]
	if os.Getenv("ONNXPE_PUREGO") == "1" {
		active = goArch
	}
}

// Path names the implementation Sgemm uses: "avx512", "avx2" or "go".
func Path() string { return active.name }

// Paths lists the implementations available on this CPU and build, fastest
// first; the pure Go path "go" is always present.
func Paths() []string {
	names := make([]string, len(archs))
	for i, a := range archs {
		names[i] = a.name
	}
	return names
}

// goArch is the portable path: a pure Go 4x8 kernel (about 7 GFLOP/s a core).
var goArch = &arch{
	name: "go", mr: goMR, nr: goNR, kc: 256, mc: 128, nc: 4096,
	kernels: []kernelFunc{nil, goKernel1, goKernel2, goKernel3, goKernel4},
}

const (
	goMR = 4
	goNR = 8
)

func goKernel1(k int, a, b, c *float32, ldc int, alpha, beta float32) {
	goKernel(1, k, a, b, c, ldc, alpha, beta)
}
func goKernel2(k int, a, b, c *float32, ldc int, alpha, beta float32) {
	goKernel(2, k, a, b, c, ldc, alpha, beta)
}
func goKernel3(k int, a, b, c *float32, ldc int, alpha, beta float32) {
	goKernel(3, k, a, b, c, ldc, alpha, beta)
}
func goKernel4(k int, a, b, c *float32, ldc int, alpha, beta float32) {
	goKernel(4, k, a, b, c, ldc, alpha, beta)
}

// goKernel computes an mr x 8 tile (mr <= 4) one row at a time: the Go
// compiler keeps one row's 8 accumulators, its A value and the B row in
// registers, where larger register tiles spill.
func goKernel(mr, k int, a, b, c *float32, ldc int, alpha, beta float32) {
	as := unsafe.Slice(a, k*mr)
	bs := unsafe.Slice(b, k*goNR)
	cs := unsafe.Slice(c, (mr-1)*ldc+goNR)
	for i := 0; i < mr; i++ {
		var c0, c1, c2, c3, c4, c5, c6, c7 float32
		for p := 0; p < k; p++ {
			av := as[p*mr+i]
			bb := bs[p*goNR : p*goNR+goNR : p*goNR+goNR]
			c0 += av * bb[0]
			c1 += av * bb[1]
			c2 += av * bb[2]
			c3 += av * bb[3]
			c4 += av * bb[4]
			c5 += av * bb[5]
			c6 += av * bb[6]
			c7 += av * bb[7]
		}
		row := cs[i*ldc : i*ldc+goNR : i*ldc+goNR]
		acc := [goNR]float32{c0, c1, c2, c3, c4, c5, c6, c7}
		if beta == 0 {
			for j := range row {
				row[j] = alpha * acc[j]
			}
		} else {
			for j := range row {
				row[j] = alpha*acc[j] + beta*row[j]
			}
		}
	}
}
