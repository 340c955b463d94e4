package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
)

// ExitInterrupted is the exit code of a command stopped by SIGINT or
// SIGTERM (128 + SIGINT's number, as shells report it).
const ExitInterrupted = 130

// writeGuard orders a command's final writes and an interrupt: an
// interrupt waits until a write in progress has finished or stopped (model
// saves stop on the cancelled context and remove their temporary files),
// and no write starts after it. So an interrupt leaves either nothing or
// complete outputs, never a temporary or half-written file.
type writeGuard struct {
	mu      sync.Mutex
	written []string
	once    sync.Once
	code    int
	// why names the signal (set by the handler before it cancels).
	why string
	// stopped, when set, is told the exit code and the message (without
	// "onnxpe: ") of an interrupt: with --json it prints the error object.
	stopped func(code int, msg string)
}

type guardKey struct{}

// withGuard returns ctx carrying a new guard.
func withGuard(ctx context.Context) (context.Context, *writeGuard) {
	g := &writeGuard{}
	return context.WithValue(ctx, guardKey{}, g), g
}

// onStop sets what an interrupt tells (see writeGuard.stopped).
func (g *writeGuard) onStop(f func(code int, msg string)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = f
}

// commit runs write, which writes out, unless ctx is done (the command was
// interrupted): then it returns ctx's error and writes nothing.
func commit(ctx context.Context, out string, write func() error) error {
	if ctx == nil {
		return write()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	g, _ := ctx.Value(guardKey{}).(*writeGuard)
	if g == nil {
		return write()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := write(); err != nil {
		return err
	}
	g.written = append(g.written, out)
	return nil
}

// interrupted waits for a write in progress, takes the guard for good (no
// write starts after it), prints one line saying what was written, and
// returns ExitInterrupted. Called by the signal handler and by a command
// that returned because its context was cancelled, it prints once.
func (g *writeGuard) interrupted(w io.Writer) int {
	g.once.Do(func() {
		why := cmp.Or(g.why, "SIGINT")
		g.mu.Lock() // never unlocked: the process ends
		msg := "interrupted (" + why + "); nothing written"
		if len(g.written) > 0 {
			msg = "interrupted (" + why + "); " + strings.Join(g.written, ", ") + " had been written completely before"
		}
		fmt.Fprintln(w, "onnxpe: "+msg)
		g.code = ExitInterrupted
		if g.stopped != nil {
			g.stopped(g.code, msg)
		}
	})
	return g.code
}

// ctxOr is ctx, or the background context for run functions that tests
// call without one.
func ctxOr(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// signalName names a signal for the interrupt message.
func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}
