// Package cli implements the onnxpe command line: one file per command,
// each with an options struct, a NewCmdX constructor and an xRun function
// that tests call directly with buffers.
//
// It formats and prints; it does not analyse models itself (that is graph,
// passes, verify and codegen).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/onnxpe/onnxpe/kernels"
)

// NewRootCmd builds the onnxpe command tree.
func NewRootCmd(ios *IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "onnxpe <command>",
		Short: "Audit, rewrite, extend, verify and generate code for the positional encodings of ONNX models",
		Long: `onnxpe works on the positional encodings of ONNX models: sinusoidal and
learned absolute tables; RoPE (half-split, interleaved, partial, with its
scaling rules; multimodal M-RoPE of Qwen2-VL; 2-D RoPE over a ViT's patch
grid); ALiBi; T5's bucketed relative bias; Shaw's clipped relative
embeddings; Transformer-XL's and XLNet's relative sinusoids; DeBERTa's
disentangled attention; complex-order word embeddings; FLOATER's
integrated positions; and none at all (NoPE).

  audit    which scheme, in which attention layers, with which parameters,
           read from the graph alone, each finding with the measurement
           that confirms it, and unknown (with the reason) where the graph
           does not tell: a table, JSON, markdown, or an HTML report with
           plots; policies for CI (--require, --forbid) that fail on unknown
  rewrite  computed encodings become precomputed constants, RoPE becomes
           fused RotaryEmbedding nodes, ALiBi and T5 bias are folded or
           fused; the result is proven equal to the model before it is
           written
  extend   a longer context: RoPE scaling rules (linear, NTK, dynamic NTK,
           YaRN, Llama 3), learned tables extended, tables and bias
           constants continued; checked before writing
  codegen  the model's exact encoding as standalone Go or C source, with
           tests whose golden vectors onnxpe computed on the model
  diff     what differs between the audits of two models (or two saved
           reports): the scheme of each layer, findings, every param; a
           CI check that a rewrite or an extension changed what it should
  verify   whether two models compute the same outputs on inputs that
           exercise positions (large positions, KV caches, padding), in
           onnxpe's kernels and ONNX Runtime; --precision audits cos/sin
           values in half precision
  inspect  what a model file holds (opsets, inputs, nodes, weights)
  convert  re-save a model losslessly, moving weights to or from a side file
  run      run a model with onnxpe's own reference kernels

` + exitCodesHelp,
		Example: `  onnxpe audit model.onnx
  onnxpe audit model.onnx --format html -o audit.html
  onnxpe rewrite model.onnx -o model_pe.onnx
  onnxpe extend llama.onnx -o llama_8k.onnx --to 8192 --method yarn --original-max-positions 2048
  onnxpe codegen model.onnx --lang go --package pe -o pe
  onnxpe verify model.onnx model_pe.onnx
  onnxpe diff model.onnx model_8k.onnx
  onnxpe inspect model.onnx --json
  onnxpe convert big.onnx -o small.onnx --external-data
  onnxpe run model.onnx --inputs test_data_set_0`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints what `onnxpe version` prints.
		Version: readVersion().line(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.InitDefaultVersionFlag()
	root.Flags().Lookup("version").Usage = "print the version, commit and Go version (as onnxpe version does)"
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
		NewCmdDiff(ios),
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

// execute runs root's command. A panic of the command (a bug: a model
// the code did not expect) becomes an internal error, exit 3, instead of
// Go's crash with exit 2, which says bad input; ONNXPE_DEBUG=1 prints its
// stack. The goroutines the commands start run under kernels.Group or
// kernels.Catch (the kernels' workers under their session): a panic on
// one comes back to the command as the same error, a
// *kernels.PanicError wrapping kernels.ErrInternal.
func execute(ctx context.Context, root *cobra.Command, errOut io.Writer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = kernels.Recovered(r)
		}
		var pe *kernels.PanicError
		if errors.As(err, &pe) && os.Getenv("ONNXPE_DEBUG") == "1" {
			fmt.Fprintf(errOut, "onnxpe: panic: %v\n%s\n", pe.Value, pe.Stack)
		}
	}()
	return root.ExecuteContext(ctx)
}

// signalsReady is called once Main handles SIGINT and SIGTERM (the
// interrupt tests wait for it before they signal).
var signalsReady = func() {}

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
	signalsReady()
	go func() {
		s := <-sigs
		guard.why = signalName(s)
		cancel()
		// Nothing waits for this goroutine: a panic here is said in one
		// line and exits 3 rather than crash with Go's trace.
		code := ExitInternal
		if err := kernels.Catch(func() error { code = guard.interrupted(ios.ErrOut); return nil }); err != nil {
			fmt.Fprintln(ios.ErrOut, "onnxpe: internal error: "+oneLine(err.Error()))
			code = ExitInternal
		}
		os.Exit(code)
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
	return runRoot(ctx, guard, ios, args, NewRootCmd)
}

// runRoot runs the command tree newRoot builds (tests add commands to it).
func runRoot(ctx context.Context, guard *writeGuard, ios *IOStreams, args []string, newRoot func(*IOStreams) *cobra.Command) int {
	// Commands write to out, which knows whether they wrote anything and
	// whether they print JSON: a command given --json that fails before
	// printing its report prints the error object instead.
	out := newStdout(ios.Out)
	cios := *ios
	cios.Out = out
	root := newRoot(&cios)
	addMemoryFlag(root)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		out.parsed(cmd)
		if err := checkFiniteFlags(cmd); err != nil {
			return err
		}
		return applyMemoryLimit(cmd)
	}
	guard.onStop(func(code int, msg string) { out.fail(root, args, code, msg) })
	root.SetArgs(args)
	err := execute(ctx, root, ios.ErrOut)
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
		out.fail(root, args, exitCode(err), oneLine(msg))
	}
	return exitCode(err)
}

// checkFiniteFlags refuses, before any work, a number flag given NaN or an
// infinity: no flag of onnxpe means anything by them (--factor Inf failed
// late, as a failed check).
func checkFiniteFlags(cmd *cobra.Command) error {
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		switch f.Value.Type() {
		case "float64", "float32":
			v, perr := strconv.ParseFloat(f.Value.String(), 64)
			if perr == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
				err = badInput("--%s %s: give a finite number", f.Name, f.Value.String())
			}
		}
	})
	return err
}
