package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/onnxpe/onnxpe/graph"
)

type convertOptions struct {
	IO        *IOStreams
	In, Out   string
	External  bool
	Inline    bool
	Threshold int64
	Location  string
	InPlace   bool
	JSON      bool
}

// ConvertReport is the JSON form of `onnxpe convert`.
type ConvertReport struct {
	Input         string   `json:"input"`
	Output        string   `json:"output"`
	Bytes         int64    `json:"bytes"`
	ExternalFiles []string `json:"external_files,omitempty"`
	ExternalBytes int64    `json:"external_bytes"`
}

// NewCmdConvert builds `onnxpe convert`.
func NewCmdConvert(ios *IOStreams) *cobra.Command {
	opts := &convertOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "convert IN -o OUT",
		Short: "Re-save a model, moving tensors between the model file and external data",
		Long: `Convert loads a model and saves it again. With no option the saved file
is byte-for-byte the input (external tensors stay where they are; their
side files are copied when OUT is in another folder).

--external-data moves every tensor of at least --threshold bytes into one
side file beside OUT (OUT's name + ".data" unless --location is given),
aligned to 4 KiB. --inline moves every external tensor into OUT.

OUT is written to a temporary file in its folder and renamed into place,
so a failure never leaves a partial model. The input is never overwritten
unless --in-place is given.

` + exitCodesHelp,
		Example: `  onnxpe convert model.onnx -o copy.onnx
  onnxpe convert model.onnx -o out/model.onnx --external-data --threshold 4096
  onnxpe convert split.onnx -o whole.onnx --inline`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.In = args[0]
			return convertRun(opts)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Out, "output", "o", "", "where to write the model")
	f.BoolVar(&opts.External, "external-data", false, "store large tensors in a side file")
	f.BoolVar(&opts.Inline, "inline", false, "store every tensor in the model file")
	f.Int64Var(&opts.Threshold, "threshold", graph.DefaultExternalThreshold, "with --external-data: smallest tensor, in bytes, to move out")
	f.StringVar(&opts.Location, "location", "", "with --external-data: side file name (default OUT.data)")
	f.BoolVar(&opts.InPlace, "in-place", false, "allow OUT to be the input file")
	f.BoolVar(&opts.JSON, "json", false, "print what was written as JSON")
	return cmd
}

// sameFile reports whether two paths name the same existing file.
func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// checkOutput refuses to overwrite the input without --in-place and needs a
// folder that exists.
func checkOutput(in, out string, inPlace bool) error {
	if out == "" {
		return badInput("no output file: give -o OUT")
	}
	if sameFile(in, out) && !inPlace {
		return badInput("%s is the input file: pass --in-place to overwrite it", out)
	}
	if fi, err := os.Stat(filepath.Dir(out)); err != nil || !fi.IsDir() {
		return badInput("%s: the output folder does not exist", out)
	}
	if fi, err := os.Stat(out); err == nil && fi.IsDir() {
		return badInput("%s is a folder, not a file", out)
	}
	return nil
}

func convertRun(opts *convertOptions) error {
	if opts.External && opts.Inline {
		return badInput("--external-data and --inline contradict each other: give one")
	}
	if opts.InPlace && opts.Out == "" {
		opts.Out = opts.In
	}
	if err := checkOutput(opts.In, opts.Out, opts.InPlace); err != nil {
		return err
	}
	if opts.Threshold < 0 {
		return badInput("--threshold must not be negative")
	}
	m, err := loadModel(opts.IO.ErrOut, opts.In)
	if err != nil {
		return err
	}
	so := graph.SaveOptions{External: graph.KeepStorage}
	switch {
	case opts.External:
		so = graph.SaveOptions{External: graph.ExternalizeLarge, Threshold: opts.Threshold, Location: opts.Location}
		if so.Threshold == 0 {
			so.Threshold = 1 // 0 would mean the default; the user asked for everything
		}
	case opts.Inline:
		so.External = graph.InlineAll
	}
	if err := m.Save(opts.Out, so); err != nil {
		return badInput("%s: %v", opts.Out, err)
	}
	fi, err := os.Stat(opts.Out)
	if err != nil {
		return err
	}
	r := ConvertReport{Input: opts.In, Output: opts.Out, Bytes: fi.Size()}
	// Describe the result as saved: reload it (weights are not read).
	saved, err := loadModel(nil, opts.Out)
	if err != nil {
		return fmt.Errorf("the saved model does not load: %w", err)
	}
	in := Inspect(opts.Out, saved).Initializers
	r.ExternalFiles, r.ExternalBytes = in.ExternalFiles, in.ExternalBytes
	if opts.JSON {
		return writeJSON(opts.IO, r)
	}
	fmt.Fprintf(opts.IO.ErrOut, "wrote %s (%s", opts.Out, humanBytes(r.Bytes))
	if len(r.ExternalFiles) > 0 {
		fmt.Fprintf(opts.IO.ErrOut, ", %s of external data in %s", humanBytes(r.ExternalBytes), strings.Join(r.ExternalFiles, ", "))
	}
	fmt.Fprintln(opts.IO.ErrOut, ")")
	return nil
}
