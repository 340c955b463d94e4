package cli

import (
	_ "embed"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
)

// ErrorSchema is the JSON Schema of the object a command given --json
// prints on standard output when it fails before it has printed its
// report (error.schema.json).
//
//go:embed error.schema.json
var ErrorSchema []byte

// ReportsSchema is the JSON Schema of what inspect, convert, run,
// codegen, rewrite, extend, diff and version print with --json, one definition
// per command under $defs (reports.schema.json).
//
//go:embed reports.schema.json
var ReportsSchema []byte

// errorReport is what a command given --json prints on standard output
// when it fails without having printed its report: standard output holds
// one JSON document whatever the exit code.
type errorReport struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Command  string `json:"command"`   // the command run ("" when none was found)
	ExitCode int    `json:"exit_code"` // the process's exit code
	Kind     string `json:"kind"`      // check_failed, bad_input, internal or interrupted
	Message  string `json:"message"`   // the line printed on standard error, without "onnxpe: "
}

// exitKinds name the exit codes in the error object.
var exitKinds = map[int]string{
	ExitCheckFailed: "check_failed",
	ExitBadInput:    "bad_input",
	ExitInternal:    "internal",
	ExitInterrupted: "interrupted",
}

// errClosed is what a write to standard output returns once the error
// object has been printed (a command still running after an interrupt).
var errClosed = errors.New("standard output closed after the error report")

// stdout is a command's standard output: it knows whether anything was
// written to it and whether the command asked for JSON, and prints the
// error object when a command with --json fails before writing anything.
type stdout struct {
	mu      sync.Mutex
	w       io.Writer
	written bool
	closed  bool
	// json is set once the command's flags are parsed: 1 when it prints
	// JSON, 0 when it does not, -1 when unknown (parsing failed).
	json    int
	command string
}

func newStdout(w io.Writer) *stdout { return &stdout{w: w, json: -1} }

func (s *stdout) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errClosed
	}
	if len(p) > 0 {
		s.written = true
	}
	return s.w.Write(p)
}

// parsed records, once cobra has parsed cmd's flags, whether cmd prints
// JSON (--json, or --format json).
func (s *stdout) parsed(cmd *cobra.Command) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.command = cmd.Name()
	s.json = 0
	if f := cmd.Flags().Lookup("json"); f != nil && f.Value.String() == "true" {
		s.json = 1
	}
	if f := cmd.Flags().Lookup("format"); f != nil && f.Value.String() == "json" {
		s.json = 1
	}
}

// fail prints the error object for a command that failed with exit code
// code and message msg, if the command asked for JSON (args are read when
// its flags could not be parsed) and has written nothing to standard
// output; then it closes standard output. A write in progress (the
// report, on an interrupt) means there is a report: fail does not wait
// for it, so that a reader that stopped reading cannot keep an interrupted
// process alive.
func (s *stdout) fail(root *cobra.Command, args []string, code int, msg string) {
	if !s.mu.TryLock() {
		return
	}
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.written {
		return
	}
	wants := s.json == 1
	if s.json < 0 {
		wants = jsonInArgs(args)
		if c, _, err := root.Find(args); err == nil && c != root {
			s.command = c.Name()
		}
	}
	if !wants {
		return
	}
	b, err := json.MarshalIndent(errorReport{errorBody{Command: s.command, ExitCode: code, Kind: exitKinds[code], Message: msg}}, "", "  ")
	if err != nil {
		return
	}
	_, _ = s.w.Write(append(b, '\n'))
}

// jsonInArgs reports whether args ask for JSON (--json, --json=true,
// --format json, --format=json before a "--"), for a command line whose
// flags could not be parsed.
func jsonInArgs(args []string) bool {
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "--json":
			return true
		case strings.HasPrefix(a, "--json="):
			if v, err := strconv.ParseBool(strings.TrimPrefix(a, "--json=")); err == nil && v {
				return true
			}
		case a == "--format=json":
			return true
		case a == "--format" && i+1 < len(args) && args[i+1] == "json":
			return true
		}
	}
	return false
}
