package kernels

import (
	"testing"

	"github.com/onnxpe/onnxpe/graph"
)

// TestLargeBufferTakesRoomFromPool: a new buffer of 64 MiB or more that
// the pool cannot serve drops free buffers of its size from the pool
// first (they would otherwise stay beside it); one the pool serves
// leaves the pool's other buffers alone.
func TestLargeBufferTakesRoomFromPool(t *testing.T) {
	const mb = 1 << 20
	pool := &bufPool{}
	for range 3 {
		pool.put(New(graph.Float, 40*mb/4))
	}
	tr := newTracker(pool, nil)
	c := &Call{tr: tr}
	before := pool.bytes
	c.alloc(graph.Float, 10*mb/4) // small: no room made
	if pool.bytes != before {
		t.Fatalf("a 10 MiB buffer changed the pool: %d -> %d bytes", before, pool.bytes)
	}
	c.alloc(graph.Float, 70*mb/4) // fits none of the 40 MiB buffers
	if pool.bytes > before-70*mb {
		t.Errorf("after a new 70 MiB buffer the pool holds %d MiB, want at most %d", pool.bytes/mb, (before-70*mb)/mb)
	}
	if pool.bytes == 0 {
		t.Errorf("the pool gave up more than the buffer's size")
	}
	pool.put(New(graph.Float, 80*mb/4))
	kept := pool.bytes
	c.alloc(graph.Float, 80*mb/4) // served by the pool
	if pool.bytes != kept-80*mb {
		t.Errorf("a buffer the pool serves: pool %d MiB, want %d", pool.bytes/mb, (kept-80*mb)/mb)
	}
}
