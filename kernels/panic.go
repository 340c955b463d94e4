package kernels

import (
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
)

// PanicError is a panic recovered on a goroutine outside a kernel (a
// worker of the command line, a pass's helper goroutine) and returned to
// whoever waits for that goroutine: a defect of onnxpe, not of the model.
// It wraps ErrInternal, as the error of a node whose kernel panicked does;
// its message is the panic's value on one line, Stack the stack of the
// goroutine that panicked (ONNXPE_DEBUG=1 makes the command line print it).
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return "panic: " + strings.Join(strings.Fields(fmt.Sprint(e.Value)), " ")
}

func (e *PanicError) Unwrap() error { return ErrInternal }

// Recovered turns r, what recover returned in a deferred function, into a
// *PanicError with the stack of the goroutine that panicked (the current
// one, or a kernel's worker whose panic was raised again).
func Recovered(r any) *PanicError {
	if wp, ok := r.(workerPanic); ok {
		return &PanicError{Value: wp.val, Stack: wp.stack}
	}
	return &PanicError{Value: r, Stack: debug.Stack()}
}

// caught runs f and returns its panic with the stack of the goroutine that
// panicked, nil when f returned.
func caught(f func()) (p *workerPanic) {
	defer func() {
		if r := recover(); r != nil {
			if wp, ok := r.(workerPanic); ok {
				p = &wp
				return
			}
			p = &workerPanic{r, debug.Stack()}
		}
	}()
	f()
	return nil
}

// Catch runs f and returns its error, or its panic as a *PanicError.
func Catch(f func() error) error {
	var err error
	if p := caught(func() { err = f() }); p != nil {
		return &PanicError{Value: p.val, Stack: p.stack}
	}
	return err
}

// Group runs functions on goroutines of their own and waits for them, as
// errgroup does, but a panic on one of them comes back from Wait as a
// *PanicError instead of ending the process. The zero Group is ready.
type Group struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	err error
}

// Go runs f on a new goroutine under Catch.
func (g *Group) Go(f func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := Catch(f); err != nil {
			g.mu.Lock()
			if g.err == nil {
				g.err = err
			}
			g.mu.Unlock()
		}
	}()
}

// Wait waits for every goroutine Go started and returns the first error
// (or panic) one of them ended with.
func (g *Group) Wait() error {
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}
