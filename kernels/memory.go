package kernels

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"unsafe"

	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
)

// Memory of a run: the executor counts the bytes of intermediate storage
// it holds (views such as Reshape or Squeeze share their input's storage
// and are counted once), recycles freed intermediates through a per-session
// pool, and records for each run the peak it held next to the figure the
// topological order requires.

// RunStats describes the memory of one Run.
type RunStats struct {
	// PeakLiveBytes is the largest number of bytes of intermediate storage
	// (values computed by nodes, graph outputs included; constants and the
	// caller's inputs excluded) held at once. Storage shared by views is
	// counted once, at its capacity.
	PeakLiveBytes int64
	// RequiredBytes is the largest simultaneous live set the topological
	// order requires: the maximum over steps of the bytes of the storage
	// that must exist at that step (the step's inputs and outputs, and
	// values produced earlier and read later), each at its used size. A
	// value's life ends at its last use in the plan (the step the session
	// compiled to drop it), whatever the run actually freed, so that
	// PeakLiveBytes/RequiredBytes measures how well the run frees.
	RequiredBytes int64
	// ConstBytes and InputBytes are the constants' and the fed inputs'
	// storage, which neither figure above includes.
	ConstBytes, InputBytes int64
	// PackedBytes is the size of the constant matrix-product weights the
	// session packed and of the float16/bfloat16 constants it widened to
	// float32 for kernels that take float32, about. A packed weight
	// mapped from a side file is not held a second time: its pages are
	// dropped once packed.
	PackedBytes int64
	// MappedBytes is the part of ConstBytes used in place over side files
	// mapped read-only (kernels/weights.go).
	MappedBytes int64
	// PoolBytes is the free storage the session's buffer pool keeps for
	// the next run.
	PoolBytes int64
	// Steps is the number of nodes run, nested subgraph and function
	// steps included.
	Steps int
	// BlockwiseAttention is the number of decomposed attention chains
	// the run computed blockwise, without their [..., S, T] scores (see
	// Session.FusedAttention).
	BlockwiseAttention int
}

// LastRunStats returns the memory figures of the last successful Run.
func (s *Session) LastRunStats() RunStats { return s.stats }

// FusedAttention is the number of decomposed attention chains (MatMul,
// scale, bias or mask, Softmax, MatMul) the session runs as one blockwise
// step when their tensors allow (RunStats.BlockwiseAttention counts those
// a run did).
func (s *Session) FusedAttention() int { return s.fusedChains }

// storageKey identifies the backing array of a tensor's elements by the
// address one past its end: every view of a tensor (which shares its
// slice) and every prefix or suffix slice of it has the same key, and live
// arrays do not share an end. It returns 0 for empty storage and sequences.
func storageKey(t *Tensor) (key uintptr, capBytes, lenBytes int64) {
	if t == nil || t.seq != nil {
		return 0, 0, 0
	}
	var p unsafe.Pointer
	var c, l, size int
	switch d := t.data.(type) {
	case []float32:
		p, c, l, size = unsafe.Pointer(unsafe.SliceData(d)), cap(d), len(d), 4
	case []float64:
		p, c, l, size = unsafe.Pointer(unsafe.SliceData(d)), cap(d), len(d), 8
	case []float16.Float16:
		p, c, l, size = unsafe.Pointer(unsafe.SliceData(d)), cap(d), len(d), 2
	case []graph.BF16:
		p, c, l, size = unsafe.Pointer(unsafe.SliceData(d)), cap(d), len(d), 2
	case []int64:
		p, c, l, size = unsafe.Pointer(unsafe.SliceData(d)), cap(d), len(d), 8
	case []int32:
		p, c, l, size = unsafe.Pointer(unsafe.SliceData(d)), cap(d), len(d), 4
	case []int8:
		p, c, l, size = unsafe.Pointer(unsafe.SliceData(d)), cap(d), len(d), 1
	case []uint8:
		p, c, l, size = unsafe.Pointer(unsafe.SliceData(d)), cap(d), len(d), 1
	case []int16:
		p, c, l, size = unsafe.Pointer(unsafe.SliceData(d)), cap(d), len(d), 2
	case []uint16:
		p, c, l, size = unsafe.Pointer(unsafe.SliceData(d)), cap(d), len(d), 2
	case []uint32:
		p, c, l, size = unsafe.Pointer(unsafe.SliceData(d)), cap(d), len(d), 4
	case []uint64:
		p, c, l, size = unsafe.Pointer(unsafe.SliceData(d)), cap(d), len(d), 8
	case []bool:
		p, c, l, size = unsafe.Pointer(unsafe.SliceData(d)), cap(d), len(d), 1
	default:
		return 0, 0, 0
	}
	if c == 0 {
		return 0, 0, 0
	}
	return uintptr(p) + uintptr(c*size), int64(c * size), int64(l * size)
}

// storage is one backing array held by a run.
type storage struct {
	key            uintptr
	capBytes, need int64 // allocated bytes; largest extent a view used
	refs           int   // values of the run's envs that hold it
	born, last     int   // steps of its first use and of its release
	// prefs counts the values holding it that the plan has not dropped
	// yet; pend is the step at which the last of them was dropped by the
	// plan (-1 while one lives): RequiredBytes uses [born, pend].
	prefs, pend int
	buf         *Tensor
	pooled      bool  // handed out by the pool: returned to it when freed
	escaped     bool  // seen outside the env that made it: never pooled
	resv        int64 // bytes of the memory budget reserved for it
}

// tracker follows the storage of one run.
type tracker struct {
	pool      *bufPool
	consts    map[uintptr]bool // the session's constants (shared, read-only)
	inputs    map[uintptr]bool // the run's fed inputs
	outside   map[uintptr]bool // outputs written into a Spill (Call.allocOutput)
	live      map[uintptr]*storage
	all       []*storage
	orphans   []*storage
	step      int
	liveBytes int64
	peak      int64
	inBytes   int64
	slab      []*storage // records reused across runs
	used      int
	// pending are the storage records whose planned references all
	// ended during the current step (see planDrop).
	pending []*storage
	// blockwise counts the attention chains run blockwise.
	blockwise int
	// dropped counts the bytes freed to the collector since it last ran
	// (see keep).
	dropped int64
	// budget is the memory budget the run's storage is reserved in;
	// resv is what the run holds of it (all given back when Run returns).
	budget *Budget
	resv   int64
}

// take reserves n bytes of the budget for the run.
func (tr *tracker) take(n int64) error {
	if tr.budget == nil || n <= 0 {
		return nil
	}
	if err := tr.budget.Reserve(n); err != nil {
		return err
	}
	tr.resv += n
	return nil
}

// force reserves n bytes whatever the limit (the slack of a pooled
// buffer, reserved before at its asked size).
func (tr *tracker) force(n int64) {
	if tr.budget == nil || n <= 0 {
		return
	}
	tr.budget.used.Add(n)
	tr.resv += n
}

// give returns n bytes of the run's reservation.
func (tr *tracker) give(n int64) {
	if tr.budget == nil || n <= 0 {
		return
	}
	tr.budget.Release(n)
	tr.resv -= n
}

// giveAll returns the run's whole reservation: when Run returns, what it
// hands back is the caller's, and the rest is garbage or the pool's.
func (tr *tracker) giveAll() {
	if tr.budget != nil && tr.resv > 0 {
		tr.budget.Release(tr.resv)
	}
	tr.resv = 0
	// The records stay for the next run: they must not keep the run's
	// buffers alive (the outputs are the caller's, the rest garbage or
	// the pool's).
	for _, st := range tr.slab[:tr.used] {
		st.buf = nil
	}
	clear(tr.live)
	clear(tr.pending)
	clear(tr.orphans)
}

func newTracker(pool *bufPool, consts map[uintptr]bool) *tracker {
	return &tracker{pool: pool, consts: consts, inputs: map[uintptr]bool{}, outside: map[uintptr]bool{}, live: map[uintptr]*storage{}}
}

// reset readies tr for another run, keeping its maps and records.
func (tr *tracker) reset() {
	clear(tr.inputs)
	clear(tr.outside)
	clear(tr.live)
	clear(tr.all)
	tr.all = tr.all[:0]
	tr.orphans = tr.orphans[:0]
	tr.used = 0
	tr.step, tr.liveBytes, tr.peak, tr.inBytes, tr.blockwise = 0, 0, 0, 0, 0
	tr.pending = tr.pending[:0]
}

// record returns a zeroed storage record from tr's slab.
func (tr *tracker) record() *storage {
	if tr.used == len(tr.slab) {
		tr.slab = append(tr.slab, make([]*storage, max(len(tr.slab), 64))...)
	}
	st := tr.slab[tr.used]
	if st == nil {
		st = new(storage)
		tr.slab[tr.used] = st
	}
	tr.used++
	*st = storage{}
	return st
}

func (tr *tracker) external(k uintptr) bool { return tr.consts[k] || tr.inputs[k] || tr.outside[k] }

// input registers a fed input (not counted, never pooled).
func (tr *tracker) input(t *Tensor) {
	k, cb, _ := storageKey(t)
	if k == 0 || tr.external(k) {
		return
	}
	tr.inputs[k] = true
	tr.inBytes += cb
}

// hold records that a value of an env now refers to t, which the kernel
// of call c returned. Storage the kernel allocated with alloc is reserved
// in the budget already; other new storage (made without alloc) is
// reserved here, and an error says when that goes over the budget.
func (tr *tracker) hold(t *Tensor, c *Call) error {
	if t != nil && t.seq != nil {
		// A sequence refers to its tensors without the tracker seeing
		// it: their storage is never recycled.
		for _, e := range t.seq {
			k, _, _ := storageKey(e)
			if st := tr.live[k]; st != nil {
				st.escaped = true
			}
			for i, b := range c.allocs {
				if bk, _, _ := storageKey(b); bk == k {
					c.allocs = slices.Delete(c.allocs, i, i+1)
					break
				}
			}
		}
		return nil
	}
	k, cb, lb := storageKey(t)
	if k == 0 || tr.external(k) {
		return nil
	}
	if st := tr.live[k]; st != nil {
		st.refs++
		st.prefs++
		st.need = max(st.need, lb)
		return nil
	}
	st := tr.record()
	*st = storage{key: k, capBytes: cb, need: lb, refs: 1, born: tr.step, last: -1, prefs: 1, pend: -1}
	if c != nil {
		for i, b := range c.allocs {
			if bk, _, _ := storageKey(b); bk == k {
				st.pooled, st.buf, st.resv = true, b, cb
				c.allocs = slices.Delete(c.allocs, i, i+1)
				break
			}
		}
	}
	tr.live[k] = st
	tr.all = append(tr.all, st)
	tr.liveBytes += st.capBytes
	tr.peak = max(tr.peak, tr.liveBytes)
	if !st.pooled {
		if err := tr.take(cb); err != nil {
			return fmt.Errorf("its output of %v: %w", t.Shape, err)
		}
		st.resv = cb
	}
	return nil
}

// planDrop records that the plan drops a value holding t's storage at
// this step (its last use, or the end of the subgraph env that made it):
// when no value the plan keeps holds the storage at the end of the step,
// its required life ends there. It is independent of release, which
// frees the storage: RequiredBytes comes from planDrop, PeakLiveBytes
// from release.
func (tr *tracker) planDrop(t *Tensor) {
	k, _, _ := storageKey(t)
	st := tr.live[k]
	if k == 0 || st == nil {
		return
	}
	st.prefs--
	if st.prefs == 0 {
		tr.pending = append(tr.pending, st)
	}
}

// release drops one reference to t's storage; the last one frees it (into
// the pool when it came from there and never left its env).
func (tr *tracker) release(t *Tensor) {
	k, _, _ := storageKey(t)
	st := tr.live[k]
	if k == 0 || st == nil {
		return
	}
	st.refs--
	if st.refs > 0 {
		return
	}
	tr.retire(st)
	switch {
	case st.escaped:
		// Seen outside its env (an output the caller gets, a sequence's
		// element): not garbage, and never pooled.
	case st.pooled && tr.keep(st.buf):
	default:
		tr.garbage(st.capBytes)
	}
	// The record stays in tr.all and the slab until the run ends: it
	// must not keep the freed buffer from the collector (at 4096
	// positions of a 0.32B Llama, 1.5 GB of garbage held to the end).
	st.buf = nil
}

// keep puts a freed buffer in the pool while the pool holds less than
// half the run's peak of live storage so far (and 64 MiB at least), and
// says whether it did; past that it is left to the collector: free
// buffers of sizes the rest of the run may not ask for again would
// otherwise pile up beside the live ones (gigabytes at long sequences).
func (tr *tracker) keep(t *Tensor) bool {
	_, cb, _ := storageKey(t)
	if tr.pool.bytes+cb > max(tr.peak/2, 64<<20) {
		return false
	}
	tr.pool.put(t)
	return true
}

// garbage counts n bytes of storage freed to the collector; once they
// reach an eighth of the live peak (and 128 MiB), it collects them, so
// that the heap reuses them instead of growing to twice what is live (Go's
// default goal). A collection of a
// heap of large pointer-free buffers takes milliseconds: a run of 4096
// positions of a 0.32B Llama peaks at 2.14 GB instead of 2.94, and one of
// 8192 at 2.92 GB instead of 5.2 (BENCHMARKS.md, "Models of billions of
// parameters"), in the same CPU time.
func (tr *tracker) garbage(n int64) {
	tr.dropped += n
	if tr.dropped >= max(tr.peak/8, 128<<20) {
		tr.dropped = 0
		if tr.peak >= hugeRun {
			// A run this large takes seconds: the pages the collection
			// frees go back at once (milliseconds of faults later) rather
			// than stay in the process beside the next large buffers.
			debug.FreeOSMemory()
		} else {
			runtime.GC()
		}
	}
}

// largeAlloc is the size of a new buffer from which it makes room first
// (makeRoom).
const largeAlloc = 64 << 20

// makeRoom, before a new buffer of n bytes (largeAlloc or more) that the
// pool cannot serve, drops free buffers of as many bytes from the pool
// and collects when the garbage then covers n, so that the heap reuses
// them for the new buffer instead of growing by n beside them. A buffer
// of hugeAlloc or more, which the free spans of smaller buffers cannot
// hold (the heap grows for it), first returns the heap's free memory to
// the system (the logits of 8192 positions, 1 GB, came on top of the
// pool's half of the peak and the garbage not yet returned: extend --to
// 8192 of a 0.32B Llama peaked at 3.58 GB, 2.5-2.75 GB with this).
func (tr *tracker) makeRoom(n int64) {
	before := tr.pool.bytes
	tr.pool.trim(max(before-n, 0))
	tr.dropped += before - tr.pool.bytes
	switch {
	case n >= hugeAlloc:
		tr.dropped = 0
		debug.FreeOSMemory()
	case tr.dropped >= n:
		tr.dropped = 0
		runtime.GC()
	}
}

// hugeRun is the live peak from which a run's collections return the
// memory they free to the system.
const hugeRun = 1 << 30

// hugeAlloc is the size of a new buffer from which makeRoom returns the
// heap's free memory to the system.
const hugeAlloc = 256 << 20

func (tr *tracker) retire(st *storage) {
	delete(tr.live, st.key)
	st.last = tr.step
	tr.liveBytes -= st.capBytes
	tr.give(st.resv)
	st.resv = 0
}

// leave drops the reference of a subgraph or function output that its env
// hands to the calling kernel: the storage may come back as the node's
// output, so it stays counted until the end of the calling step.
func (tr *tracker) leave(t *Tensor) {
	k, _, _ := storageKey(t)
	st := tr.live[k]
	if k == 0 || st == nil {
		return
	}
	st.escaped = true
	st.refs--
	if st.refs == 0 {
		tr.orphans = append(tr.orphans, st)
	}
}

// endStep retires the orphans no env took back, and ends the required
// life of the storage the plan no longer holds.
func (tr *tracker) endStep() {
	for _, st := range tr.pending {
		if st.prefs == 0 && st.pend < 0 {
			st.pend = tr.step
		}
	}
	tr.pending = tr.pending[:0]
	for _, st := range tr.orphans {
		if st.refs == 0 && st.last < 0 {
			tr.retire(st)
		}
	}
	tr.orphans = tr.orphans[:0]
}

// required sweeps the storage intervals for the largest simultaneous set.
func (tr *tracker) required() int64 {
	delta := make([]int64, tr.step+2)
	for _, st := range tr.all {
		last := st.pend
		if last < 0 {
			last = tr.step
		}
		delta[st.born] += st.need
		delta[last+1] -= st.need
	}
	var cur, best int64
	for _, d := range delta {
		cur += d
		best = max(best, cur)
	}
	return best
}

// bufPool keeps freed intermediate storage of a session by element type for
// reuse by later kernels and runs.
type bufPool struct {
	free  map[graph.DataType][]*Tensor
	bytes int64
}

// poolSlack is how much larger (as a fraction 1/poolSlack) than asked a
// pooled buffer may be; it bounds the memory lost to reuse.
const poolSlack = 8

// get returns a tensor of dt and shape whose elements are not zeroed, from
// the pool when a buffer of a close size is free (the smallest that fits;
// reused then says so), else a new zeroed one.
func (p *bufPool) get(dt graph.DataType, shape []int) (t *Tensor, reused bool) {
	n := shapeSize(shape)
	if n == 0 {
		return New(dt, shape...), false
	}
	list := p.free[dt]
	best := -1
	bestCap := 0
	for i, b := range list {
		c := capOf(b)
		if c >= n && c <= n+n/poolSlack && (best < 0 || c < bestCap) {
			best, bestCap = i, c
		}
	}
	if best < 0 {
		return New(dt, shape...), false
	}
	b := list[best]
	list[best] = list[len(list)-1]
	list[len(list)-1] = nil
	p.free[dt] = list[:len(list)-1]
	_, cb, _ := storageKey(b)
	p.bytes -= cb
	d := b.data
	if lenAny(d) != n {
		d = resliceAny(d, n)
	}
	return newTensor(dt, shape, d), true
}

// fits reports whether get would serve n elements of dt from the pool.
func (p *bufPool) fits(dt graph.DataType, n int) bool {
	for _, b := range p.free[dt] {
		if c := capOf(b); c >= n && c <= n+n/poolSlack {
			return true
		}
	}
	return false
}

// trim drops free buffers (the largest first) until the pool holds at most
// limit bytes: buffers of sizes a run no longer asks for do not pile up.
func (p *bufPool) trim(limit int64) {
	for p.bytes > limit {
		var bt graph.DataType
		bi, bc := -1, int64(0)
		for dt, list := range p.free {
			for i, b := range list {
				if _, cb, _ := storageKey(b); cb > bc {
					bt, bi, bc = dt, i, cb
				}
			}
		}
		if bi < 0 {
			return
		}
		list := p.free[bt]
		list[bi] = list[len(list)-1]
		list[len(list)-1] = nil
		p.free[bt] = list[:len(list)-1]
		p.bytes -= bc
	}
}

func (p *bufPool) put(t *Tensor) {
	if t == nil {
		return
	}
	if p.free == nil {
		p.free = map[graph.DataType][]*Tensor{}
	}
	_, cb, _ := storageKey(t)
	p.bytes += cb
	p.free[t.DType] = append(p.free[t.DType], t)
}

func capOf(t *Tensor) int {
	switch d := t.data.(type) {
	case []float32:
		return cap(d)
	case []float64:
		return cap(d)
	case []float16.Float16:
		return cap(d)
	case []graph.BF16:
		return cap(d)
	case []int64:
		return cap(d)
	case []int32:
		return cap(d)
	case []int8:
		return cap(d)
	case []uint8:
		return cap(d)
	case []int16:
		return cap(d)
	case []uint16:
		return cap(d)
	case []uint32:
		return cap(d)
	case []uint64:
		return cap(d)
	case []bool:
		return cap(d)
	}
	return 0
}

// resliceAny returns d[:n] of a typed slice held in an any.
func resliceAny(d any, n int) any {
	switch d := d.(type) {
	case []float32:
		return d[:n]
	case []float64:
		return d[:n]
	case []float16.Float16:
		return d[:n]
	case []graph.BF16:
		return d[:n]
	case []int64:
		return d[:n]
	case []int32:
		return d[:n]
	case []int8:
		return d[:n]
	case []uint8:
		return d[:n]
	case []int16:
		return d[:n]
	case []uint16:
		return d[:n]
	case []uint32:
		return d[:n]
	case []uint64:
		return d[:n]
	case []bool:
		return d[:n]
	}
	panic("kernels: resliceAny of an unsupported slice")
}

// alloc makes an output tensor whose elements the kernel overwrites in
// full: it may come from the session's pool and hold stale values. Outside
// a run (c nil, or constant folding) it is a fresh zeroed tensor.
//
// alloc (and zeros and clone, built on it) is how kernels allocate
// tensors: its size passes reserve, the bound check of Options.MaxTensorBytes.
// sinkMin is the size from which RunInto writes an output a matrix product
// makes into its Spill (a variable for the tests).
var sinkMin int64 = hugeAlloc

// allocOutput is alloc for output 0 of a kernel that can write it a block
// of rows at a time (a matrix product), with sunk set when the buffer is
// the running RunInto's Spill's: the step's output is one the run returns,
// of sinkMin bytes or more, and not rounded to half precision after the
// kernel. The kernel then releases each block of rows once written
// (ReleaseSpilled). The tracker neither counts nor pools that buffer.
func (c *Call) allocOutput(dt graph.DataType, shape ...int) (t *Tensor, sunk bool) {
	if c != nil && c.tr != nil && c.sess != nil && c.sess.sink != nil && c.half == 0 && c.Node != nil &&
		len(c.Node.Outputs()) > 0 && slices.Contains(c.sess.outs, c.Node.Output(0)) {
		c.reserve(dt, shape)
		if int64(shapeSize(shape))*int64(elemBytes(dt)) < sinkMin {
			return c.alloc(dt, shape...), false
		}
		if t = c.sess.sink.sink(dt, shape); t != nil {
			k, _, _ := storageKey(t)
			c.tr.outside[k] = true
			return t, true
		}
	}
	return c.alloc(dt, shape...), false
}

// allocOver is alloc for an elementwise kernel that may write its output
// over one of its inputs: the first of from that has dt and shape and
// that nothing reads after this step (a value of the step's own env that
// the step frees, whose storage no other value holds, handed out by the
// pool) is returned to be written over (each of its elements read before
// the output's same element is written). A Mul of two [8192, 5632]
// activations of a Llama's MLP then takes no third buffer of 184 MB.
func (c *Call) allocOver(dt graph.DataType, shape []int, from ...*Tensor) *Tensor {
	if c != nil && c.tr != nil && c.step != nil && c.sess != nil && !c.sess.keepAll && c.env != nil && c.env.plan != nil {
		for _, t := range from {
			if t != nil && t.DType == dt && !t.frozen && t.seq == nil && equalShape(t.Shape, shape) && c.dies(t) {
				return t
			}
		}
	}
	return c.alloc(dt, shape...)
}

// dies reports whether t is an input of the running step whose storage
// nothing holds after it.
func (c *Call) dies(t *Tensor) bool {
	st := c.step
	idx := -1
	for i, x := range st.ins {
		switch {
		case x != t:
		case idx >= 0:
			return false // read twice: one of them is written over
		default:
			idx = i
		}
	}
	if idx < 0 || idx >= len(st.in) {
		return false
	}
	r := &st.in[idx]
	if r.k != nil || r.up != 0 || r.slot < 0 || !slices.Contains(st.free, r.slot) {
		return false
	}
	k, _, lb := storageKey(t)
	rec := c.tr.live[k]
	if k == 0 || rec == nil || rec.refs != 1 || rec.escaped || !rec.pooled || rec.buf == nil {
		return false
	}
	_, _, blb := storageKey(rec.buf)
	return blb == lb
}

func (c *Call) alloc(dt graph.DataType, shape ...int) *Tensor {
	t, _ := c.allocDirty(dt, shape)
	return t
}

// allocDirty is alloc, and reports whether the elements may be other than
// zeros (a pooled or poisoned buffer).
func (c *Call) allocDirty(dt graph.DataType, shape []int) (t *Tensor, dirty bool) {
	c.reserve(dt, shape)
	if c == nil || c.tr == nil {
		t = New(dt, shape...)
	} else {
		// The live total: the storage is reserved in the budget before
		// it is allocated, and adjusted to what it is (a pooled buffer
		// may be up to 1/poolSlack larger).
		tr := c.tr
		need := int64(shapeSize(shape)) * int64(max(dt.Bits(), 8)/8)
		err := tr.take(need)
		if err != nil && tr.pool.bytes > 0 {
			// Free buffers are not live: drop them and try again.
			tr.pool.trim(0)
			err = tr.take(need)
		}
		if err != nil {
			panic(allocError{fmt.Errorf("a tensor %v of %v: %w", shape, dt, err)})
		}
		if need >= largeAlloc && !tr.pool.fits(dt, shapeSize(shape)) {
			tr.makeRoom(need)
		}
		t, dirty = tr.pool.get(dt, shape)
		if _, cb, _ := storageKey(t); cb > need {
			tr.force(cb - need)
		} else if cb < need {
			tr.give(need - cb)
		}
		c.allocs = append(c.allocs, t)
	}
	if c != nil && c.opts != nil && c.opts.poison {
		poison(t)
		dirty = true
	}
	return t, dirty
}

// zeros is alloc of a tensor of zeros (a new buffer is zero already).
func (c *Call) zeros(dt graph.DataType, shape ...int) *Tensor {
	t, dirty := c.allocDirty(dt, shape)
	if dirty {
		clearAny(t.data)
	}
	return t
}

// clone is alloc of a copy of t.
func (c *Call) clone(t *Tensor) *Tensor {
	out := c.alloc(t.DType, t.Shape...)
	copyAny(out, 0, t, 0, t.Len())
	return out
}

// clearAny zeroes the elements of a typed slice held in an any.
func clearAny(d any) {
	switch d := d.(type) {
	case []float32:
		clear(d)
	case []float64:
		clear(d)
	case []float16.Float16:
		clear(d)
	case []graph.BF16:
		clear(d)
	case []int64:
		clear(d)
	case []int32:
		clear(d)
	case []int8:
		clear(d)
	case []uint8:
		clear(d)
	case []int16:
		clear(d)
	case []uint16:
		clear(d)
	case []uint32:
		clear(d)
	case []uint64:
		clear(d)
	case []bool:
		clear(d)
	default:
		panic("kernels: clearAny of an unsupported slice")
	}
}

// poison fills t with values no kernel computes by accident (NaN, -99,
// true), for the tests that check that kernels write every element of
// what alloc gives them (Options.poison).
func poison(t *Tensor) {
	switch d := t.data.(type) {
	case []float32:
		for i := range d {
			d[i] = float32(math.NaN())
		}
	case []float64:
		for i := range d {
			d[i] = math.NaN()
		}
	case []float16.Float16:
		for i := range d {
			d[i] = float16.NaN()
		}
	case []graph.BF16:
		for i := range d {
			d[i] = 0x7fc1
		}
	case []int64:
		for i := range d {
			d[i] = -99
		}
	case []int32:
		for i := range d {
			d[i] = -99
		}
	case []int8:
		for i := range d {
			d[i] = -99
		}
	case []uint8:
		for i := range d {
			d[i] = 0x9d
		}
	case []int16:
		for i := range d {
			d[i] = -99
		}
	case []uint16, []uint32, []uint64:
		fromInt64(t, slices.Repeat([]int64{-99}, t.Len()))
	case []bool:
		for i := range d {
			d[i] = true
		}
	}
}

// dropTemps returns the buffers c allocated but no value took (kernel
// temporaries and outputs the node leaves unnamed) to the pool.
func (c *Call) dropTemps() {
	for _, t := range c.allocs {
		_, cb, _ := storageKey(t)
		c.tr.give(cb)
		c.tr.keep(t)
	}
	// The array stays for the step's next call: it must not keep the
	// buffers alive.
	clear(c.allocs)
	c.allocs = c.allocs[:0]
}
