package kernels

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ErrUnsupportedOp is wrapped by errors about ops (or op versions) that
// have no kernel.
var ErrUnsupportedOp = errors.New("unsupported op")

// ErrUnsupportedType is wrapped by errors about element types a kernel
// does not handle.
var ErrUnsupportedType = errors.New("unsupported element type")

// ErrInternal is wrapped by the error of a node whose kernel panicked (a
// defect of this package, not of the model): the error names the node, op
// and input shapes; Options.PanicStacks or ONNXPE_DEBUG=1 prints the stack.
// A *PanicError (a panic on a goroutine run by Group or Catch) wraps it too.
var ErrInternal = errors.New("internal error in a kernel")

// typePanic is the panic of a helper asked for an element type it does not
// handle (Data[T] of a tensor of another type, copies and products of an
// unsupported type): a kernel that reaches one was given an input of a
// type it is not written for, so callKernel returns it as an error of the
// node wrapping ErrUnsupportedType, not as ErrInternal. Callers outside a
// session see an ordinary panic.
type typePanic string

func (p typePanic) Error() string { return string(p) }

// Kernel computes a node's outputs from its inputs (nil for absent
// optional inputs). It must not change its inputs; it may return an input
// (or a view of one) as an output. It returns one tensor per node output;
// a nil entry is allowed for an output the node leaves out.
type Kernel func(c *Call, in []*Tensor) ([]*Tensor, error)

// KernelFlags tell the executor how to call a kernel.
type KernelFlags uint8

const (
	// Native marks a kernel that handles float16 and bfloat16 tensors
	// itself; other kernels see them widened to float32, and their float32
	// outputs are rounded back (once per op, as ONNX Runtime does).
	Native KernelFlags = 1 << iota
)

type opKey struct{ domain, op string }

type entry struct {
	since, until int64 // opset range, inclusive
	fn           Kernel
	flags        KernelFlags
}

// registry maps ops to their kernels. Kernels are registered by init
// functions, but Register is exported and may be called at any time, also
// while sessions compile: registryMu guards the map (sessions look kernels
// up when they are made, never while they run).
var (
	registryMu sync.RWMutex
	registry   = map[opKey][]entry{}
)

// Domains.
const (
	DomainONNX      = ""
	DomainMicrosoft = "com.microsoft"
	// DomainOnnxpe is the domain of the project's own fused ops.
	DomainOnnxpe = "ai.onnxpe"
)

func normDomain(d string) string {
	if d == "ai.onnx" {
		return ""
	}
	return d
}

// Register adds a kernel for op in domain, for the opset versions
// since..until inclusive (until 0 means no upper bound). Registering an
// overlapping range panics. It is safe to call from several goroutines,
// also while other goroutines make sessions.
func Register(domain, op string, since, until int64, fn Kernel, flags KernelFlags) {
	k := opKey{normDomain(domain), op}
	if until == 0 {
		until = 1 << 30
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, e := range registry[k] {
		if since <= e.until && e.since <= until {
			panic(fmt.Sprintf("kernels: Register %s.%s [%d,%d] overlaps [%d,%d]", domain, op, since, until, e.since, e.until))
		}
	}
	registry[k] = append(registry[k], entry{since, until, fn, flags})
}

func lookup(domain, op string, opset int64) (entry, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	for _, e := range registry[opKey{normDomain(domain), op}] {
		if e.since <= opset && opset <= e.until {
			return e, true
		}
	}
	return entry{}, false
}

// Supports reports whether op of domain at the given opset version has a
// kernel.
func Supports(domain, op string, opset int64) bool {
	_, ok := lookup(domain, op, opset)
	return ok
}

// Ops lists the registered ops as "domain.op" (just "op" for the ONNX
// domain), sorted.
func Ops() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	var out []string
	for k := range registry {
		if k.domain == "" {
			out = append(out, k.op)
		} else {
			out = append(out, k.domain+"."+k.op)
		}
	}
	sort.Strings(out)
	return out
}

// reg registers a kernel for every opset from since on (ONNX domain).
func reg(op string, since, until int64, fn Kernel) { Register("", op, since, until, fn, 0) }
