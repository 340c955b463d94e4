package kernels

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels/gemm"
)

// This file is the scaled-dot-product attention shared by the attention
// ops (the standard Attention of opsets 23 and 24, and ONNX Runtime's
// GroupQueryAttention, MultiHeadAttention, Attention and QAttention).
//
// The score matrix is never materialised whole: work is split into tasks
// of one batch entry, one key/value head and a block of query rows. A task
// copies the query rows of every query head that shares the key/value head
// (grouped-query attention) into one matrix, multiplies it by the keys in
// one GEMM, runs each score row through the op's own transformations
// (softcap, bias, masks) and a softmax, and multiplies the probabilities by
// the values. Rows attend to a prefix of the keys (causal rows to fewer),
// and the GEMMs of a block stop at the longest prefix its rows need. The
// scratch of a task is (rows x keys) floats, sized to stay in the L2
// cache, so a long prompt never holds its (S x T) scores per head.

// rowsOf addresses the rows of a (batch, head, row, element) tensor held
// in a flat float32 slice: row i of head h of batch b starts at
// b*bs + h*hs + i*rs. Layouts (B, N, S, H) and (B, S, N, H) are both
// described this way.
type rowsOf struct {
	d          []float32
	bs, hs, rs int
}

func (r rowsOf) at(b, h, i int) int { return b*r.bs + h*r.hs + i*r.rs }

// bnsh describes a (B, N, S, H) tensor's rows; bsnh a (B, S, N, H) one.
func bnsh(d []float32, n, s, h int) rowsOf { return rowsOf{d, n * s * h, s * h, h} }
func bsnh(d []float32, n, s, h int) rowsOf { return rowsOf{d, s * n * h, h, n * h} }

// attnJob is one batched attention: out = softmax(rowOp(scale*Q.K^T)).V
// per batch entry b and query head n (which reads key/value head
// n/(Nq/Nkv)).
type attnJob struct {
	B, Nq, Nkv, S, T int // batch, query heads, key/value heads, query rows, keys
	Hk, Hv           int // head sizes of Q/K and of V
	q, k, v, out     rowsOf
	scale            float32
	// keys is the number of leading keys whose scores row (b, s) needs
	// (nil: all T). Scores past it are not computed for that row.
	keys func(b, s int) int
	// row turns the scores of row (b, n, s) over its keys (len(sc) =
	// keys(b, s), scale applied) into softmax inputs in place, and
	// returns the range [lo, hi) the softmax runs over: the
	// probabilities outside it are zero. nil: the whole row.
	row func(sc []float32, b, n, s int) (lo, hi int)
	// sink, when set, makes the softmax "smooth": one extra logit of
	// value sink(n) takes part in the normalisation but has no value row.
	sink func(n int) float32
	// maskedZero says what a row does whose softmax inputs are all -Inf:
	// false gives NaN (as exp(-Inf - -Inf) does), true gives zeros.
	maskedZero bool
	// probs, when set, sees each row's probabilities (len keys(b, s)).
	probs func(p []float32, b, n, s int)
}

// attnScratchFloats is the size (in float32s) of the score block a task
// aims for: 32K floats (128 KiB) stays in L2 with the query and output
// blocks beside it.
const attnScratchFloats = 1 << 15

// run computes the job on c's threads.
func (j *attnJob) run(c *Call) {
	if j.B == 0 || j.Nq == 0 || j.S == 0 {
		return
	}
	g := j.Nq / j.Nkv
	// Query rows per block: enough rows (over the group) for an efficient
	// GEMM, few enough that the block's scores stay in cache.
	qb := attnScratchFloats / max(g*j.T, 1)
	qb = max(qb, (48+g-1)/g)
	qb = min(qb, j.S)
	nblk := (j.S + qb - 1) / qb
	tasks := j.B * j.Nkv * nblk
	p := c.threads()
	work := j.B * j.Nq * j.S * max(j.T, 1) * (j.Hk + j.Hv)
	if work < 1<<17 {
		p = 1
	}
	p = min(p, tasks)
	var next atomic.Int64
	fanOut(p, p, func(_, _ int) {
		w := newAttnWorker(j, g*qb)
		for {
			t := int(next.Add(1) - 1)
			if t >= tasks {
				return
			}
			blk := t % nblk
			bh := t / nblk
			w.block(bh/j.Nkv, bh%j.Nkv, blk*qb, min((blk+1)*qb, j.S))
		}
	})
}

// attnWorker holds one goroutine's scratch.
type attnWorker struct {
	j       *attnJob
	qbuf    []float32 // rows (g, s) of the block's queries, Hk wide
	sc      []float32 // their scores, T wide
	obuf    []float32 // their outputs, Hv wide
	rowKeys []int
	e64     [vecChunk]float64
}

func newAttnWorker(j *attnJob, rows int) *attnWorker {
	return &attnWorker{j: j, qbuf: make([]float32, rows*j.Hk), sc: make([]float32, rows*max(j.T, 1)),
		obuf: make([]float32, rows*j.Hv), rowKeys: make([]int, rows)}
}

// block computes query rows [s0, s1) of every query head that reads
// key/value head kh of batch entry b.
func (w *attnWorker) block(b, kh, s0, s1 int) {
	j := w.j
	g := j.Nq / j.Nkv
	ns := s1 - s0
	m := g * ns
	tmax := 0
	for r := range ns {
		t := j.T
		if j.keys != nil {
			t = min(j.keys(b, s0+r), j.T)
		}
		for gi := range g {
			w.rowKeys[gi*ns+r] = t
		}
		tmax = max(tmax, t)
	}
	hk, hv := j.Hk, j.Hv
	for gi := range g {
		n := kh*g + gi
		for r := range ns {
			o := j.q.at(b, n, s0+r)
			copy(w.qbuf[(gi*ns+r)*hk:(gi*ns+r+1)*hk], j.q.d[o:o+hk])
		}
	}
	ld := max(tmax, 1)
	one := gemm.Exec{Threads: 1}
	if tmax > 0 && hk > 0 {
		ko := j.k.at(b, kh, 0)
		one.Sgemm(false, true, m, tmax, hk, j.scale, w.qbuf, hk, j.k.d[ko:], j.k.rs, 0, w.sc, ld)
	} else {
		clear(w.sc[:m*ld])
	}
	for gi := range g {
		n := kh*g + gi
		for r := range ns {
			i := gi*ns + r
			t := w.rowKeys[i]
			row := w.sc[i*ld : i*ld+tmax]
			lo, hi := 0, t
			if j.row != nil {
				lo, hi = j.row(row[:t], b, n, s0+r)
			}
			var sink float32
			smooth := j.sink != nil
			if smooth {
				sink = j.sink(n)
			}
			w.softmax(row[lo:hi], smooth, sink)
			clear(row[:lo])
			clear(row[hi:])
			if j.probs != nil {
				j.probs(row[:t], b, n, s0+r)
			}
		}
	}
	if hv == 0 {
		return
	}
	if tmax > 0 {
		vo := j.v.at(b, kh, 0)
		one.Sgemm(false, false, m, hv, tmax, 1, w.sc, ld, j.v.d[vo:], j.v.rs, 0, w.obuf, hv)
	} else {
		clear(w.obuf[:m*hv])
	}
	for gi := range g {
		n := kh*g + gi
		for r := range ns {
			o := j.out.at(b, n, s0+r)
			i := gi*ns + r
			copy(j.out.d[o:o+hv], w.obuf[i*hv:(i+1)*hv])
		}
	}
}

// softmax normalises x in place: e^(x-m)/sum with the exponentials in
// float64 (expN). smooth adds a logit of value sink to the sum. A row of
// only -Inf gives NaN, or zeros when the job's maskedZero is set.
func (w *attnWorker) softmax(x []float32, smooth bool, sink float32) {
	if len(x) == 0 {
		return
	}
	m := rowMax(x)
	if smooth && sink > m {
		m = sink
	}
	if math.IsInf(float64(m), -1) {
		v := float32(math.NaN())
		if w.j.maskedZero {
			v = 0
		}
		for i := range x {
			x[i] = v
		}
		return
	}
	m64 := float64(m)
	if math.IsInf(m64, 1) || math.IsNaN(m64) {
		for i := range x {
			x[i] = float32(math.Exp(float64(x[i]) - m64))
		}
		return
	}
	var s float64
	if smooth {
		s = math.Exp(float64(sink) - m64)
	}
	for lo := 0; lo < len(x); lo += vecChunk {
		xx := x[lo:min(lo+vecChunk, len(x))]
		b := w.e64[:len(xx)]
		for i, v := range xx {
			b[i] = widen(v) - m64
		}
		expN(b, b)
		for i, e := range b {
			xx[i] = float32(e)
			s += e
		}
	}
	inv := float32(1 / s)
	for i := range x {
		x[i] *= inv
	}
}

// float32Kernel wraps the kernel of an op computed in float32 (the
// attention and quantized-matrix ops): a float input of another type than
// float32 (after the executor widened float16 and bfloat16), such as
// float64, is an error wrapping ErrUnsupportedType.
func float32Kernel(fn Kernel) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		for i, t := range in {
			if t != nil && !t.IsSequence() && isFloatType(t.DType) && t.DType != graph.Float {
				return nil, fmt.Errorf("input %d is %v: this op is computed for float32, float16 and bfloat16: %w", i, t.DType, ErrUnsupportedType)
			}
		}
		return fn(c, in)
	}
}

// fanOutDynamic runs [0, n) in chunks of chunk items on p goroutines that
// take the next chunk when done with theirs (on a machine whose cores other
// work also uses, no goroutine waits for a slow one's fixed share). Each
// goroutine calls worker once for its function of a chunk (which owns the
// goroutine's scratch).
func fanOutDynamic(p, n, chunk int, worker func() func(lo, hi int)) {
	chunk = max(chunk, 1)
	nc := (n + chunk - 1) / chunk
	var next atomic.Int64
	fanOut(min(p, nc), min(p, nc), func(_, _ int) {
		f := worker()
		for {
			i := int(next.Add(1) - 1)
			if i >= nc {
				return
			}
			f(i*chunk, min((i+1)*chunk, n))
		}
	})
}
