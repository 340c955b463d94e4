package cli

import (
	"cmp"
	"context"
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
	Overwrite bool // --overwrite-side-files
	JSON      bool
	ctx       context.Context
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
aligned to 4 KiB. --inline moves every external tensor into OUT. Both
stream external tensors from their side files: a tensor is never held in
memory whole.

OUT is written to a temporary file in its folder and renamed into place,
so a failure never leaves a partial model. The input is never overwritten
unless --in-place is given.

` + sideFilesHelp + `

` + exitCodesHelp,
		Example: `  onnxpe convert model.onnx -o copy.onnx
  onnxpe convert model.onnx -o model_ext.onnx --external-data --threshold 4096
  onnxpe convert split.onnx -o whole.onnx --inline`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.In = args[0]
			opts.ctx = cmd.Context()
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
	f.BoolVar(&opts.Overwrite, overwriteSideFilesFlag, false, overwriteSideFilesUsage)
	f.BoolVar(&opts.JSON, "json", false, "print what was written as JSON")
	return cmd
}

func convertRun(opts *convertOptions) error {
	if opts.External && opts.Inline {
		return badInput("--external-data and --inline contradict each other: give one")
	}
	if opts.InPlace && opts.Out == "" {
		opts.Out = opts.In
	}
	if opts.Out == "" {
		return badInput("convert: give -o OUT (or --in-place)")
	}
	if opts.Threshold < 0 {
		return badInput("--threshold must not be negative")
	}
	if sameFile(opts.In, opts.Out) && !opts.InPlace {
		return badInput("%s is the input file: pass --in-place to overwrite it", opts.Out)
	}
	// --in-place: the model (and its side file) may be rewritten, through
	// temporary files renamed over them once complete.
	var reads []string
	if !opts.InPlace {
		reads = []string{opts.In}
	}
	if err := checkOutputFile("-o", opts.Out, reads...); err != nil {
		return err
	}
	m, err := loadModel(opts.IO.ErrOut, opts.In)
	if err != nil {
		return err
	}
	if opts.External {
		side := filepath.Join(filepath.Dir(opts.Out), cmp.Or(opts.Location, filepath.Base(opts.Out)+".data"))
		if filepath.Clean(side) == filepath.Clean(opts.Out) || sameFile(side, opts.Out) {
			return badInput("--location %s: the side file would be the model file itself", filepath.Base(side))
		}
		if !opts.InPlace {
			if err := checkNotRead("--location", side, append([]string{opts.In}, m.SideFiles()...)...); err != nil {
				return err
			}
		}
	}
	if !opts.InPlace {
		if err := checkNotRead("-o", opts.Out, m.SideFiles()...); err != nil {
			return err
		}
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
	sideReads := reads
	if !opts.InPlace {
		sideReads = append(sideReads, m.SideFiles()...)
	}
	if err := checkModelSave(m, opts.Out, so, opts.Overwrite, sideReads...); err != nil {
		return err
	}
	so.Context = ctxOr(opts.ctx)
	if err := commit(opts.ctx, opts.Out, func() error { return m.Save(opts.Out, so) }); err != nil {
		return badInput("%s: %v", opts.Out, err)
	}
	fi, err := os.Stat(opts.Out)
	if err != nil {
		return err
	}
	r := ConvertReport{Input: opts.In, Output: opts.Out, Bytes: fi.Size()}
	if so.External != graph.InlineAll {
		// Describe the result as saved: reload it (weights are not
		// read). An inlined model holds every weight: reading it back
		// would hold them all twice, and it has no external data.
		saved, err := loadModel(nil, opts.Out)
		if err != nil {
			return fmt.Errorf("the saved model does not load: %w", err)
		}
		in := Inspect(opts.Out, saved).Initializers
		r.ExternalFiles, r.ExternalBytes = in.ExternalFiles, in.ExternalBytes
	}
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
