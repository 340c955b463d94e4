package kernels

import (
	"errors"
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

// DefaultMaxTensorBytes is the default of Options.MaxTensorBytes: the
// largest tensor a kernel makes from sizes it reads from its inputs or
// attributes.
const DefaultMaxTensorBytes = 16 << 30

// DefaultMaxLoopIterations is the default of Options.MaxLoopIterations.
const DefaultMaxLoopIterations = 1 << 24

// maxTensorBytes is c's tensor size limit (the default outside a session).
func (c *Call) maxTensorBytes() int64 {
	lim := int64(DefaultMaxTensorBytes)
	if c != nil && c.opts != nil && c.opts.MaxTensorBytes > 0 {
		lim = c.opts.MaxTensorBytes
	}
	// No tensor is larger than the memory budget.
	b := processBudget
	if c != nil && c.opts != nil && c.opts.Budget != nil {
		b = c.opts.Budget
	}
	if bl := b.Limit(); bl > 0 {
		lim = min(lim, bl)
	}
	return min(lim, graph.MaxTensorBytes)
}

// maxLoopIterations is c's Loop iteration limit.
func (c *Call) maxLoopIterations() int64 {
	if c != nil && c.opts != nil && c.opts.MaxLoopIterations > 0 {
		return c.opts.MaxLoopIterations
	}
	return DefaultMaxLoopIterations
}

// ErrTooLarge is wrapped by errors about outputs larger than
// Options.MaxTensorBytes.
var ErrTooLarge = errors.New("tensor too large")

// checkSize returns an error when a tensor of dt and the given dimensions
// (from a model's values, so possibly huge or negative) would be larger
// than c's limit; kernels that grow sizes call it before allocating.
func (c *Call) checkSize(dt graph.DataType, dims []int64) error {
	lim := c.maxTensorBytes()
	bits := int64(max(dt.Bits(), 8))
	maxElems := lim / (bits / 8)
	n := int64(1)
	for _, d := range dims {
		if d < 0 {
			return fmt.Errorf("negative dimension in %v", dims)
		}
		if d == 0 {
			return nil
		}
	}
	for _, d := range dims {
		if n > maxElems/d {
			return fmt.Errorf("output %v of %v needs more than %d bytes: %w", dims, dt, lim, ErrTooLarge)
		}
		n *= d
	}
	return nil
}

// checkShape is checkSize of an int shape.
func (c *Call) checkShape(dt graph.DataType, shape []int) error {
	lim := c.maxTensorBytes()
	maxElems := lim / int64(max(dt.Bits(), 8)/8)
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return fmt.Errorf("negative dimension in %v", shape)
		}
		if d == 0 {
			return nil
		}
	}
	for _, d := range shape {
		if n > maxElems/int64(d) {
			return fmt.Errorf("output %v of %v needs more than %d bytes: %w", shape, dt, lim, ErrTooLarge)
		}
		n *= int64(d)
	}
	return nil
}

// allocError is the panic value with which reserve refuses an allocation:
// callKernel turns it into the error of the node (not ErrInternal), so
// that the one check in reserve covers every tensor a kernel allocates,
// however deep in the kernel the allocation is.
type allocError struct{ err error }

func (e allocError) String() string { return e.err.Error() }

// reserve is the bound check of every tensor a kernel allocates (alloc,
// zeros and the helpers built on them): a tensor of dt and shape larger
// than Options.MaxTensorBytes, or with a negative dimension, is refused
// before anything is allocated, by a panic with an allocError that the
// session returns as an error of the node wrapping ErrTooLarge.
func (c *Call) reserve(dt graph.DataType, shape []int) {
	if err := c.checkShape(dt, shape); err != nil {
		panic(allocError{err})
	}
}

// reserveElems is reserve of a 1-D buffer of n elements of elemBytes bytes
// (kernel scratch that is not a tensor).
func (c *Call) reserveElems(n int, elemBytes int) {
	lim := c.maxTensorBytes()
	if n < 0 || int64(n) > lim/int64(max(elemBytes, 1)) {
		panic(allocError{fmt.Errorf("scratch of %d elements of %d bytes exceeds %d bytes: %w", n, elemBytes, lim, ErrTooLarge)})
	}
}

// checkCount is checkSize of a 1-D tensor of a count computed in float64
// (NaN and infinities fail).
func (c *Call) checkCount(dt graph.DataType, n float64) error {
	if math.IsNaN(n) || n > float64(math.MaxInt64/16) {
		return fmt.Errorf("output of %v elements of %v: %w", n, dt, ErrTooLarge)
	}
	return c.checkSize(dt, []int64{int64(max(n, 0))})
}
