package kernels

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Budget is a memory budget shared by the sessions that use it: the bytes
// of tensor storage they may hold at once. The executor reserves the
// storage of every tensor a kernel allocates before allocating it and
// releases it when the storage is freed (at the latest when Run returns:
// what Run hands back is the caller's), so a run that would go over the
// budget fails with an error of the node that asked, naming the bytes,
// instead of the process dying of Go's "out of memory".
//
// The process has one (ProcessBudget), which every session uses unless
// Options.Budget names another. Other memory can be accounted in the same
// budget with Reserve and Release: weights a loader maps from a file, or
// shares between sessions, are reserved once by whoever holds them.
//
// A Budget is safe for concurrent use.
type Budget struct {
	limit atomic.Int64
	used  atomic.Int64
	peak  atomic.Int64
	mu    sync.Mutex
	hint  string
}

// ErrOverBudget is wrapped by the errors of Reserve, and so by the error
// of a node whose tensors would go over the budget (which wraps
// ErrTooLarge too).
var ErrOverBudget = errors.New("over the memory budget")

// NewBudget returns a budget of limit bytes (0 or less: no limit).
func NewBudget(limit int64) *Budget {
	b := &Budget{}
	b.SetLimit(limit)
	return b
}

var processBudget = NewBudget(DefaultBudgetLimit())

// ProcessBudget is the budget of the process: sessions whose
// Options.Budget is nil use it. Its limit is DefaultBudgetLimit() until
// SetLimit changes it (onnxpe's --memory-limit and ONNXPE_MEMORY_LIMIT).
func ProcessBudget() *Budget { return processBudget }

// SetLimit sets the limit in bytes (0 or less: no limit). Bytes already
// reserved stay reserved.
func (b *Budget) SetLimit(limit int64) {
	if limit <= 0 {
		limit = 0
	}
	b.limit.Store(limit)
}

// SetHint sets what errors say about how to change the limit (onnxpe:
// "--memory-limit or ONNXPE_MEMORY_LIMIT").
func (b *Budget) SetHint(hint string) {
	b.mu.Lock()
	b.hint = hint
	b.mu.Unlock()
}

// Limit is the limit in bytes (0: none).
func (b *Budget) Limit() int64 { return b.limit.Load() }

// Used is the number of bytes reserved now.
func (b *Budget) Used() int64 { return b.used.Load() }

// Peak is the largest number of bytes reserved at once since the budget
// was made or ResetPeak was called.
func (b *Budget) Peak() int64 { return b.peak.Load() }

// ResetPeak sets Peak to Used.
func (b *Budget) ResetPeak() { b.peak.Store(b.used.Load()) }

// Reserve takes n bytes from the budget, or returns an error wrapping
// ErrOverBudget and ErrTooLarge (and takes nothing) when the bytes
// reserved would exceed the limit.
func (b *Budget) Reserve(n int64) error {
	if n <= 0 {
		return nil
	}
	for {
		used := b.used.Load()
		lim := b.limit.Load()
		if lim > 0 && (n > lim || used > lim-n) {
			return b.overError(n, used, lim)
		}
		if b.used.CompareAndSwap(used, used+n) {
			for p := b.peak.Load(); used+n > p && !b.peak.CompareAndSwap(p, used+n); p = b.peak.Load() {
			}
			return nil
		}
	}
}

// Release gives back n bytes reserved before.
func (b *Budget) Release(n int64) {
	if n > 0 {
		b.used.Add(-n)
	}
}

// Fits reports whether a single allocation of n bytes is within the limit
// (whatever is reserved now): the check of a size before any work.
func (b *Budget) Fits(n int64) error {
	lim := b.limit.Load()
	if lim > 0 && n > lim {
		return b.overError(n, 0, lim)
	}
	return nil
}

func (b *Budget) overError(n, used, lim int64) error {
	b.mu.Lock()
	hint := b.hint
	b.mu.Unlock()
	if hint != "" {
		hint = "; " + hint + " sets it"
	}
	if used > 0 {
		return fmt.Errorf("%s more (%s held already) would be over the memory budget of %s%s: %w", Bytes(n), Bytes(used), Bytes(lim), hint, errors.Join(ErrOverBudget, ErrTooLarge))
	}
	return fmt.Errorf("%s would be over the memory budget of %s%s: %w", Bytes(n), Bytes(lim), hint, errors.Join(ErrOverBudget, ErrTooLarge))
}

// Bytes prints a byte count with a binary unit and the exact count
// ("6.0 GiB (6442450944 bytes)").
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", float64(n)/float64(div), "KMGTPE"[exp], n)
}

// DefaultBudgetLimit is the default limit of ProcessBudget: half of the
// memory the process may use (the smallest of the machine's memory, its
// cgroup's limit and ulimit -v/-d), leaving the rest to the Go heap's
// garbage, the model's weights and everything else; 4 GiB where that
// cannot be read.
func DefaultBudgetLimit() int64 {
	if m := machineMemory(); m > 0 {
		return m / 2
	}
	return 4 << 30
}
