// Package gemm is onnxpe's dense matrix multiply: float32 Sgemm over
// row-major matrices with optional transposes, a batched/strided form for
// MatMul with batch dimensions, a pre-packed right-hand side for constant
// weights (PackB, SgemmPacked), and a plain float64 Dgemm.
//
// Sgemm follows the GotoBLAS/BLIS design: op(B) is packed into KC x NC
// blocks of NR-wide panels, op(A) into MC x KC blocks of MR-high panels, and
// an MR x NR register-blocked micro-kernel accumulates each tile of C. The
// micro-kernels are hand-written Go assembly for AVX-512 (up to 12x32) and
// AVX2+FMA (up to 6x16), chosen at run time by CPU feature; a portable pure
// Go kernel is used elsewhere, under the build tag purego, or when the
// environment variable ONNXPE_PUREGO=1 is set at start-up. Work is split
// over GOMAXPROCS goroutines (the methods of Exec take a per-call limit,
// Exec{Threads: 1} forces a single thread; there is no process-wide
// setting); packing buffers come from pools, so a call allocates only for
// its goroutines. A panic in a worker goroutine is raised again on the
// calling goroutine.
//
// Results are not bit-identical across paths or thread counts' blockings:
// the summation order over k differs (the kernels use FMA). Callers that
// need exact references use Dgemm (float64) or their own loops.
//
// It is not a BLAS: there is no complex or banded support, no column-major
// interface, and Dgemm is simple blocked Go rather than a tuned kernel.
package gemm
