package kernels

import (
	"errors"
	"strings"
	"testing"
)

// TestGroupReturnsPanics: a panic on a goroutine a Group started comes
// back from Wait as a one-line *PanicError wrapping ErrInternal, with the
// stack of that goroutine; the other goroutines run to their end; Catch
// passes an ordinary error through.
func TestGroupReturnsPanics(t *testing.T) {
	var g Group
	done := make([]bool, 4)
	for i := range done {
		g.Go(func() error {
			if i == 2 {
				panicOnWorker("injected\nsecond line")
			}
			done[i] = true
			return nil
		})
	}
	err := g.Wait()
	if !errors.Is(err, ErrInternal) {
		t.Fatalf("Wait: %v, want an error wrapping ErrInternal", err)
	}
	var pe *PanicError
	if !errors.As(err, &pe) || err.Error() != "panic: injected second line" {
		t.Errorf("Wait: %q (%T), want the one-line *PanicError %q", err, err, "panic: injected second line")
	}
	if pe != nil && !strings.Contains(string(pe.Stack), "panicOnWorker") {
		t.Errorf("the stack is not the worker's:\n%s", pe.Stack)
	}
	for i, d := range done {
		if d != (i != 2) {
			t.Errorf("goroutine %d ran to its end: %v", i, d)
		}
	}
	plain := errors.New("plain")
	if err := Catch(func() error { return plain }); err != plain {
		t.Errorf("Catch: %v, want the function's own error", err)
	}
	var g2 Group
	g2.Go(func() error { return plain })
	g2.Go(func() error { return nil })
	if err := g2.Wait(); err != plain {
		t.Errorf("Wait: %v, want the goroutine's own error", err)
	}
}

//go:noinline
func panicOnWorker(msg string) { panic(msg) }
