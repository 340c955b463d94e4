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
	dims := make([]int64, len(shape))
	for i, d := range shape {
		dims[i] = int64(d)
	}
	return c.checkSize(dt, dims)
}

// checkCount is checkSize of a 1-D tensor of a count computed in float64
// (NaN and infinities fail).
func (c *Call) checkCount(dt graph.DataType, n float64) error {
	if math.IsNaN(n) || n > float64(math.MaxInt64/16) {
		return fmt.Errorf("output of %v elements of %v: %w", n, dt, ErrTooLarge)
	}
	return c.checkSize(dt, []int64{int64(max(n, 0))})
}
