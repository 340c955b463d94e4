// Package cli implements the onnxpe command line: one file per command,
// each with an options struct, a NewCmdX constructor and an xRun function
// that tests call directly with buffers.
//
// It formats and prints; it does not analyse models itself (that is graph,
// passes, verify and codegen).
package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// NewRootCmd builds the onnxpe command tree.
func NewRootCmd(ios *IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "onnxpe <command>",
		Short: "Audit, rewrite and verify the positional encodings of ONNX models",
		Long: `onnxpe is a tool for the positional encodings of ONNX models (sinusoidal,
learned, RoPE and its variants, ALiBi, T5 relative bias, Shaw relative
embeddings, NoPE). It inspects models, converts their storage without
losing a byte, runs them with its own reference kernels, and verifies that
two models compute the same outputs on inputs that exercise positions;
auditing, rewriting and code generation (the model's exact encoding as Go
or C source with its own tests) are built on these.

` + exitCodesHelp,
		Example: `  onnxpe audit model.onnx
  onnxpe inspect model.onnx
  onnxpe inspect model.onnx --json
  onnxpe convert big.onnx -o small.onnx --external-data
  onnxpe run model.onnx --inputs test_data_set_0
  onnxpe verify model.onnx rewritten.onnx
  onnxpe codegen model.onnx --lang go --package pe -o pe`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)
	root.SetIn(ios.In)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &inputError{err} })
	root.AddCommand(
		NewCmdAudit(ios),
		NewCmdInspect(ios),
		NewCmdConvert(ios),
		NewCmdCodegen(ios),
		NewCmdRewrite(ios),
		NewCmdExtend(ios),
		NewCmdRun(ios),
		NewCmdVerify(ios),
		NewCmdVersion(ios),
	)
	// `completion` with a shell it does not know exits 2 (cobra prints
	// the help and exits 0).
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					var shells []string
					for _, s := range cmd.Commands() {
						shells = append(shells, s.Name())
					}
					return badInput("completion: no shell %q (one of %s)", args[0], strings.Join(shells, ", "))
				}
				return cmd.Help()
			}
		}
	}
	// Usage errors (unknown command, wrong argument count) exit 2.
	for _, c := range root.Commands() {
		wrapArgs(c)
	}
	return root
}

// wrapArgs makes argument-count errors usage errors.
func wrapArgs(c *cobra.Command) {
	if c.Args == nil {
		return
	}
	check := c.Args
	c.Args = func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &inputError{fmt.Errorf("%s: %w (see 'onnxpe %s --help')", cmd.Name(), err, cmd.Name())}
		}
		return nil
	}
}

// Main runs the command line and returns the exit code. SIGINT and
// SIGTERM stop the command: a write in progress is finished or undone
// first, and the exit code is ExitInterrupted.
func Main() int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx, guard := withGuard(ctx)
	ios := System()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		guard.why = signalName(s)
		cancel()
		os.Exit(guard.interrupted(ios.ErrOut))
	}()
	return runContext(ctx, guard, ios, os.Args[1:])
}

// Run runs the command line with args on the given streams and returns the
// exit code (what tests of other packages use to run onnxpe).
func Run(ios *IOStreams, args []string) int { return run(ios, args) }

func run(ios *IOStreams, args []string) int {
	ctx, guard := withGuard(context.Background())
	return runContext(ctx, guard, ios, args)
}

func runContext(ctx context.Context, guard *writeGuard, ios *IOStreams, args []string) int {
	root := NewRootCmd(ios)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if ctx.Err() != nil {
		// Interrupted: the command stopped (or finished) meanwhile.
		return guard.interrupted(ios.ErrOut)
	}
	if err != nil {
		msg := err.Error()
		if strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") || strings.HasPrefix(msg, "unknown shorthand") {
			err = &inputError{err}
		}
		prefix := "onnxpe: "
		if exitCode(err) == ExitInternal {
			prefix += "internal error: "
		}
		fmt.Fprintln(ios.ErrOut, prefix+oneLine(msg))
	}
	return exitCode(err)
}
