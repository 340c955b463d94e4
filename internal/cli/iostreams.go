package cli

import (
	"io"
	"os"
)

// IOStreams are the standard streams of a command, replaced by buffers in
// tests.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// IsTerminal says whether Out is a terminal (tables and progress bars
	// are for people; pipes get plain output).
	IsTerminal bool
	// ErrIsTerminal says whether ErrOut is a terminal (progress lines
	// are drawn there).
	ErrIsTerminal bool
}

// System returns the process's streams.
func System() *IOStreams {
	return &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, IsTerminal: isTerminal(os.Stdout), ErrIsTerminal: isTerminal(os.Stderr)}
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
