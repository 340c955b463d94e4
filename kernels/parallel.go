package kernels

import (
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
	var wg sync.WaitGroup
	for t := 1; t < p; t++ {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			f(lo, hi)
		}(t*n/p, (t+1)*n/p)
	}
	f(0, n/p)
	wg.Wait()
}

// serial reports whether parallelFor(c, n, work, ...) would run on the
// calling goroutine: callers then skip building the closure.
func serial(c *Call, n, work int) bool {
	return work < parallelMin || n < 2 || c.threads() <= 1
}
