package kernels

import (
	"fmt"
	"runtime"
	"sync"
)

// parallelMin is the number of element operations below which a kernel
// stays on one goroutine: under about 64K elements, starting and joining
// goroutines costs more than it saves.
const parallelMin = 1 << 16

// threads is the goroutine budget of the run c belongs to: Options.Threads
// (0 meaning GOMAXPROCS), at most GOMAXPROCS.
func (c *Call) threads() int {
	p := runtime.GOMAXPROCS(0)
	if c != nil && c.opts != nil && c.opts.Threads > 0 && c.opts.Threads < p {
		return c.opts.Threads
	}
	return p
}

// parallelFor runs f over [0,n) split into contiguous chunks on c's
// threads when work (element operations, weighted by their cost) reaches
// parallelMin; otherwise f(0, n) runs on the calling goroutine.
func parallelFor(c *Call, n, work int, f func(lo, hi int)) {
	p := c.threads()
	if p <= 1 || work < parallelMin || n < 2 {
		f(0, n)
		return
	}
	p = min(p, n, max(work/(parallelMin/2), 2))
	fanOut(p, n, f)
}

// workerPanic is a panic of a worker goroutine raised again on the
// goroutine that started it, with the worker's stack.
type workerPanic struct {
	val   any
	stack []byte
}

func (w workerPanic) String() string { return fmt.Sprint(w.val) }

// fanOut splits [0,n) into p contiguous chunks, runs f on chunks 1..p-1
// on new goroutines and on chunk 0 on the calling one, and returns when
// all have ended. A panic in any of them is raised again on the calling
// goroutine (where the session recovers it into an error of the node); a
// panic on a worker goroutine would end the process.
func fanOut(p, n int, f func(lo, hi int)) {
	if p <= 1 {
		f(0, n)
		return
	}
	var j struct {
		wg   sync.WaitGroup
		mu   sync.Mutex
		perr any
	}
	for t := 1; t < p; t++ {
		j.wg.Add(1)
		go func(lo, hi int) {
			defer j.wg.Done()
			if wp := caught(func() { f(lo, hi) }); wp != nil {
				j.mu.Lock()
				if j.perr == nil {
					j.perr = *wp
				}
				j.mu.Unlock()
			}
		}(t*n/p, (t+1)*n/p)
	}
	func() {
		defer j.wg.Wait() // also when f panics here: no worker outlives the kernel
		f(0, n/p)
	}()
	if j.perr != nil {
		panic(j.perr)
	}
}

// serial reports whether parallelFor(c, n, work, ...) would run on the
// calling goroutine: callers then skip building the closure.
func serial(c *Call, n, work int) bool {
	return work < parallelMin || n < 2 || c.threads() <= 1
}
