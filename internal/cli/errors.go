package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
)

// Exit codes of every command.
const (
	ExitOK          = 0 // success
	ExitCheckFailed = 1 // a check failed or a findings policy was violated
	ExitBadInput    = 2 // usage error, or an input that cannot be read
	ExitInternal    = 3 // a bug in onnxpe
)

const exitCodesHelp = `Exit codes:
  0  success
  1  a check failed (verify found a difference, a policy was violated)
  2  usage error, an input that cannot be read (missing, truncated,
     corrupt or unsafe file, not a regular file), or a size over the
     memory budget (--memory-limit); nothing was written
  3  internal error (a bug: please report it)
` + exitInterruptedHelp

// exitInterruptedHelp is the line of every command's exit codes about
// SIGINT and SIGTERM, and what --json prints when a command fails.
const exitInterruptedHelp = `  130  interrupted (SIGINT, SIGTERM): a write in progress is undone,
       nothing is left half-written

Errors are one line on standard error. With --json, standard output holds
one JSON document whatever the exit code: the command's report, or, when
the command fails before it has one, {"error": {"command", "exit_code",
"kind", "message"}} (kind check_failed, bad_input, internal or
interrupted; the message is the line on standard error). JSON Schemas:
internal/cli/error.schema.json and reports.schema.json, passes/ and
verify/report.schema.json, verify/precision.schema.json.`

// inputError marks errors about what the user gave us: exit 2.
type inputError struct{ err error }

func (e *inputError) Error() string { return e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

// badInput wraps an error as a usage or input error.
func badInput(format string, args ...any) error {
	return &inputError{fmt.Errorf(format, args...)}
}

// checkFailed is returned by commands whose check did not pass: exit 1.
// Its message is printed as the last line of the command's output.
type checkFailed struct{ msg string }

func (e *checkFailed) Error() string { return e.msg }

// exitCode maps a command's error to the process exit code.
func exitCode(err error) int {
	var in *inputError
	var cf *checkFailed
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &cf):
		return ExitCheckFailed
	case errors.As(err, &in):
		return ExitBadInput
	}
	return ExitInternal
}

// oneLine folds an error message onto a single line, with every word
// longer than 96 bytes shortened (a model's 1 MB node name would
// otherwise be printed whole: graph.ShortName keeps its start, end and
// length) and the whole line kept under 8 KiB.
func oneLine(s string) string {
	fields := strings.Fields(s)
	for i, f := range fields {
		fields[i] = graph.ShortName(f)
	}
	line := strings.Join(fields, " ")
	if len(line) > maxLine {
		line = line[:maxLine/2] + " … " + line[len(line)-maxLine/4:]
		line = strings.ToValidUTF8(line, "")
	}
	return line
}

// maxLine bounds the line of an error.
const maxLine = 8 << 10
