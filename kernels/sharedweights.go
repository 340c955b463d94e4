package kernels

import (
	"errors"
	"hash/maphash"
	"sync"
	"unsafe"

	"github.com/onnxpe/onnxpe/kernels/gemm"
)

// Packed weights are shared by the sessions of the process whose weights
// have the same bytes: a model and its rewrite or extension keep every
// weight outside the encoding, and verify holds a session of each. A
// packed weight is found by its content (two 64-bit hashes of its bytes,
// its shape and layout), counted by the sessions that hold it, and
// reserved once, while they do, in the budget of the session that made or
// took it (packed weights take at most 3/4 of a limited budget; a weight
// beyond that is not packed: its step packs per call from the mapped
// file, and the rest of the budget stays for the runs). A session that is closed (or collected) stops holding its
// weights; one nobody holds any more is kept, unreserved, until the next
// session has been made, which may take it over (verify runs model A,
// closes it, then builds B), and is freed then.

// weightKey identifies a packed weight by content.
type weightKey struct {
	h1, h2 uint64
	k, n   int
	transB bool
}

// packedData is one packed weight and its holders.
type packedData struct {
	key    weightKey
	pb     *gemm.PackedB
	bytes  int64
	budget *Budget
	refs   int    // sessions holding it (under shared.mu)
	freed  bool   // its storage was given back
	raw    []byte // its storage outside the heap (bigBuf)
}

var shared struct {
	mu     sync.Mutex
	byKey  map[weightKey]*packedData
	linger []*packedData // held by nobody: freed after the next session is made
	seeds  [2]maphash.Seed
	hashed map[[2]uintptr][2]uint64 // the hashes of mapped bytes, by address and length
}

func init() {
	shared.seeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}
	shared.byKey = map[weightKey]*packedData{}
	shared.hashed = map[[2]uintptr][2]uint64{}
}

// contentHash is the two hashes of b (memoized for mapped memory, whose
// bytes do not change).
func contentHash(b []float32, mapped bool) (h1, h2 uint64) {
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), 4*len(b))
	var mk [2]uintptr
	if mapped && len(raw) > 0 {
		mk = [2]uintptr{uintptr(unsafe.Pointer(&raw[0])), uintptr(len(raw))}
		shared.mu.Lock()
		h, ok := shared.hashed[mk]
		shared.mu.Unlock()
		if ok {
			return h[0], h[1]
		}
	}
	var a, c maphash.Hash
	a.SetSeed(shared.seeds[0])
	c.SetSeed(shared.seeds[1])
	for off := 0; off < len(raw); off += 1 << 20 {
		chunk := raw[off:min(off+1<<20, len(raw))]
		a.Write(chunk)
		c.Write(chunk)
	}
	h1, h2 = a.Sum64(), c.Sum64()
	if mapped && len(raw) > 0 {
		shared.mu.Lock()
		shared.hashed[mk] = [2]uint64{h1, h2}
		shared.mu.Unlock()
	}
	return h1, h2
}

// acquirePacked returns the packed form of op(B) (b, k x n, row stride
// ldb), shared with the sessions that hold the same weight, or packed now.
// A packed weight is reserved in budget while a session holds it; when
// budget cannot hold it, acquirePacked returns nil (the step then
// multiplies b as it is, packing per call).
func acquirePacked(budget *Budget, transB bool, k, n int, b []float32, ldb int, mapped bool) *packedData {
	h1, h2 := contentHash(b, mapped)
	key := weightKey{h1, h2, k, n, transB}
	if pd := takeShared(key, budget); pd != nil {
		return pd
	}
	size := int64(4 * gemm.PackedLen(k, n))
	if !reserveWeight(budget, size) {
		return nil
	}
	pd := &packedData{key: key, bytes: size, budget: budget}
	buf, raw := bigBuf(gemm.PackedLen(k, n))
	pd.raw = raw
	pd.pb = gemm.PackBTo(buf, transB, k, n, b, ldb)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if old := shared.byKey[key]; old != nil && !old.freed && old.refs > 0 {
		// Packed meanwhile by another session: take that one.
		old.refs++
		budget.Release(size)
		pd.budget = nil
		pd.free()
		return old
	}
	pd.refs = 1
	shared.byKey[key] = pd
	sharedLive += size
	sharedPeak = max(sharedPeak, sharedLive)
	sharedMade += size
	return pd
}

// weightShare is the part of a limited budget packed weights may take:
// the rest stays for the runs' tensors.
const weightShare = 0.75

// reserveWeight reserves size bytes of packed weights in budget when they
// keep within weightShare of its limit.
func reserveWeight(budget *Budget, size int64) bool {
	if lim := budget.Limit(); lim > 0 && float64(budget.Used()+size) > weightShare*float64(lim) {
		return false
	}
	return budget.Reserve(size) == nil
}

// takeShared takes a hold on the packed weight of key when one exists:
// one nobody held (lingering) is reserved in budget again, or not taken
// when budget cannot hold it.
func takeShared(key weightKey, budget *Budget) *packedData {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	pd := shared.byKey[key]
	if pd == nil || pd.freed {
		return nil
	}
	if pd.refs == 0 {
		if !reserveWeight(budget, pd.bytes) {
			return nil
		}
		pd.budget = budget
	}
	pd.refs++
	return pd
}

// sharedLive and sharedPeak are the bytes of packed weights held now and
// at most since ResetWeightPeak, sharedMade the bytes packed since then
// (under shared.mu).
var sharedLive, sharedPeak, sharedMade int64

// free gives pd's storage back (under shared.mu, or before pd is
// published); no session holds it (refs 0) and it is reserved nowhere.
func (pd *packedData) free() {
	if pd.freed {
		return
	}
	pd.freed = true
	pd.pb = nil
	freeBig(pd.raw)
	pd.raw = nil
}

// releaseHeld ends a session's hold on its packed weights: those nobody
// holds any more are given back to their budget and linger until the next
// session is made.
func releaseHeld(held []*packedData) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	for _, pd := range held {
		pd.refs--
		if pd.refs == 0 {
			pd.budget.Release(pd.bytes)
			pd.budget = nil
			shared.linger = append(shared.linger, pd)
		}
	}
}

// endLinger frees the packed weights nobody took over: called when a
// session has been made (or failed), and by ReleaseUnusedWeights.
func endLinger() {
	shared.mu.Lock()
	for _, pd := range shared.linger {
		if pd.refs == 0 && !pd.freed {
			pd.free()
			if shared.byKey[pd.key] == pd {
				delete(shared.byKey, pd.key)
			}
			sharedLive -= pd.bytes
		}
	}
	shared.linger = shared.linger[:0]
	shared.mu.Unlock()
}

// ReleaseUnusedWeights frees the packed weights that no session holds,
// which are otherwise kept until the next session is made (it may share
// them).
func ReleaseUnusedWeights() { endLinger() }

// WeightMemory is the memory of the packed weights of the process'
// sessions, each shared weight once: Live now, Peak the most since
// ResetWeightPeak, Made the bytes packed since then (a weight another
// session already held is not packed again).
type WeightMemory struct {
	Live, Peak, Made int64
}

// Weights returns the memory of the packed weights.
func Weights() WeightMemory {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	return WeightMemory{Live: sharedLive, Peak: sharedPeak, Made: sharedMade}
}

// ResetWeightPeak starts WeightMemory.Peak from the bytes held now and
// Made from 0.
func ResetWeightPeak() {
	shared.mu.Lock()
	sharedPeak, sharedMade = sharedLive, 0
	shared.mu.Unlock()
}

// errClosed is the error of a closed session's Run.
var errClosed = errors.New("kernels: the session is closed")
