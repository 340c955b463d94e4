package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/atomicfile"
	"github.com/onnxpe/onnxpe/kernels"
)

type runOptions struct {
	IO         *IOStreams
	Model      string
	Inputs     string
	Outputs    string
	JSON       bool
	Accumulate string
	ctx        context.Context
}

// NewCmdRun builds `onnxpe run`.
func NewCmdRun(ios *IOStreams) *cobra.Command {
	opts := &runOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "run MODEL --inputs IN",
		Short: "Run a model with onnxpe's reference kernels",
		Long: `Run executes a model with onnxpe's own Go kernels and prints the shape and
summary statistics of each output.

IN is an ONNX test-data folder (input_0.pb, input_1.pb, ... in the order of
the model's inputs; a folder holding test_data_set_0/ works too) or a NumPy
.npz file whose arrays are named after the inputs. With --outputs DIR the
outputs are written to DIR as output_0.pb, output_1.pb, ... (replacing
regular files of those names; DIR must not be a test-data folder, one
holding input_N.pb, whose output files are reference outputs).

--accumulate float64 runs float32 models with float64 accumulation in
reductions, matrix products and normalisations: a reference-grade mode.

--json also reports the time to load (the model, its inputs and the
executor's session: weights mapped and packed) apart from the time of the
run, and the memory of the weights and of the run's intermediates.

` + exitCodesHelp,
		Example: `  onnxpe run model.onnx --inputs test_data_set_0
  onnxpe run model.onnx --inputs feeds.npz --outputs out/ --json
  onnxpe run model.onnx --inputs feeds.npz --accumulate float64`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Model = args[0]
			opts.ctx = cmd.Context()
			return runRun(opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Inputs, "inputs", "", "test-data folder or .npz file with the inputs (required)")
	f.StringVar(&opts.Outputs, "outputs", "", "folder to write output_N.pb files to")
	f.BoolVar(&opts.JSON, "json", false, "print JSON")
	f.StringVar(&opts.Accumulate, "accumulate", "float32", "accumulation type for float32 models: float32 or float64")
	return cmd
}

// RunReport is the JSON form of `onnxpe run`.
type RunReport struct {
	Model   string        `json:"model"`
	Outputs []OutputStats `json:"outputs"`
	Written string        `json:"written,omitempty"`
	// LoadSeconds is the time to load the model and its inputs and make
	// the executor's session (weights mapped, packed); ComputeSeconds the
	// run itself.
	LoadSeconds    float64   `json:"load_seconds"`
	ComputeSeconds float64   `json:"compute_seconds"`
	Memory         RunMemory `json:"memory"`
}

// RunMemory is what the run held: weights packed for the matrix products
// (outside the Go heap), weights used in place over the mapped side files,
// and the peak of intermediate tensors.
type RunMemory struct {
	PackedWeightBytes     int64 `json:"packed_weight_bytes"`
	MappedWeightBytes     int64 `json:"mapped_weight_bytes"`
	PeakIntermediateBytes int64 `json:"peak_intermediate_bytes"`
}

// OutputStats summarises one output tensor.
type OutputStats struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"`
	Shape []int   `json:"shape"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
	Std   float64 `json:"std"`
	NaN   int     `json:"nan"`
	Inf   int     `json:"inf"`
}

func statsOf(name string, t *kernels.Tensor) OutputStats {
	s := OutputStats{Name: name, DType: t.DType.String(), Shape: append([]int{}, t.Shape...)}
	// The values are read where they are, or in chunks: a copy of
	// gigabytes of logits in float64 would double the run's memory.
	each := func(f func(v float64)) {
		switch t.DType {
		case graph.Float:
			for _, v := range kernels.Data[float32](t) {
				f(float64(v))
			}
		case graph.Double:
			for _, v := range kernels.Data[float64](t) {
				f(v)
			}
		case graph.Float16:
			for _, v := range kernels.Data[float16.Float16](t) {
				f(float64(v.Float32()))
			}
		case graph.BFloat16:
			for _, v := range kernels.Data[graph.BF16](t) {
				f(float64(v.Float32()))
			}
		default:
			for _, v := range t.Float64s() {
				f(v)
			}
		}
	}
	n := 0
	s.Min, s.Max = math.Inf(1), math.Inf(-1)
	each(func(v float64) {
		switch {
		case math.IsNaN(v):
			s.NaN++
			return
		case math.IsInf(v, 0):
			s.Inf++
			return
		}
		n++
		s.Min = math.Min(s.Min, v)
		s.Max = math.Max(s.Max, v)
	})
	if n == 0 {
		s.Min, s.Max = 0, 0
		return s
	}
	// Mean and standard deviation of the finite values, computed on the
	// values divided by the largest magnitude: sums of squares of float64
	// values beyond 1e154 would overflow (and NaN or Inf has no JSON).
	scale := math.Max(-s.Min, s.Max)
	if scale == 0 {
		return s
	}
	var sum, sq float64
	each(func(v float64) {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			sum += v / scale
		}
	})
	mean := sum / float64(n)
	each(func(v float64) {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			d := v/scale - mean
			sq += d * d
		}
	})
	s.Mean = mean * scale
	s.Std = math.Min(math.Sqrt(sq/float64(n))*scale, math.MaxFloat64)
	return s
}

func runRun(opts *runOptions) error {
	start := time.Now()
	if opts.Inputs == "" {
		return badInput("run: --inputs is required")
	}
	var ko kernels.Options
	switch opts.Accumulate {
	case "float32":
	case "float64":
		ko.Accumulate64 = true
	default:
		return badInput("--accumulate must be float32 or float64, not %q", opts.Accumulate)
	}
	if opts.Outputs != "" {
		if err := checkOutputFolder("--outputs", opts.Outputs); err != nil {
			return err
		}
	}
	m, err := loadModel(opts.IO.ErrOut, opts.Model)
	if err != nil {
		return err
	}
	if opts.Outputs != "" {
		reads := append(append([]string{opts.Model}, m.SideFiles()...), filesUnder(opts.Inputs)...)
		if err := checkTestDataOutputs("--outputs", opts.Outputs, len(m.Graph.Outputs), reads...); err != nil {
			return err
		}
	}
	feeds, err := kernels.ReadInputs(opts.Inputs, m)
	if err != nil {
		return badInput("%v", err)
	}
	sess, err := kernels.NewSession(m, ko)
	if err != nil {
		return runError(opts.Model, err)
	}
	loaded := time.Now()
	outs, err := sess.Run(feeds)
	if err != nil {
		return runError(opts.Model, err)
	}
	st := sess.LastRunStats()
	r := &RunReport{Model: opts.Model, LoadSeconds: loaded.Sub(start).Seconds(), ComputeSeconds: time.Since(loaded).Seconds(),
		Memory: RunMemory{PackedWeightBytes: st.PackedBytes, MappedWeightBytes: st.MappedBytes, PeakIntermediateBytes: st.PeakLiveBytes}}
	for _, v := range m.Graph.Outputs {
		r.Outputs = append(r.Outputs, statsOf(v.Name, outs[v.Name]))
	}
	if opts.Outputs != "" {
		if err := commit(opts.ctx, opts.Outputs, func() error { return writeOutputs(opts.Outputs, m.Graph.Outputs, outs) }); err != nil {
			return badInput("%s: %v", opts.Outputs, err)
		}
		r.Written = opts.Outputs
	}
	if opts.JSON {
		return writeJSON(opts.IO, r)
	}
	tw := tabwriter.NewWriter(opts.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OUTPUT\tTYPE\tSHAPE\tMIN\tMAX\tMEAN\tSTD\tNAN/INF")
	for _, s := range r.Outputs {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%.6g\t%.6g\t%.6g\t%.6g\t%d/%d\n", s.Name, s.DType, s.Shape, s.Min, s.Max, s.Mean, s.Std, s.NaN, s.Inf)
	}
	tw.Flush()
	if r.Written != "" {
		fmt.Fprintf(opts.IO.ErrOut, "wrote %d outputs to %s\n", len(r.Outputs), r.Written)
	}
	return nil
}

// writeOutputs writes output_N.pb files into dir: all of them are written
// into a temporary folder inside dir first and moved into place only when
// every one was written, so a failure leaves none.
func writeOutputs(dir string, vals []*graph.Value, outs map[string]*kernels.Tensor) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := atomicfile.TempDir(filepath.Join(dir, "outputs"))
	if err != nil {
		return err
	}
	defer tmp.Release()
	for i, v := range vals {
		name := outputFileName(i)
		if err := kernels.WriteTensorFile(filepath.Join(tmp.Path, name), v.Name, outs[v.Name]); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	for i := range vals {
		name := outputFileName(i)
		if err := os.Rename(filepath.Join(tmp.Path, name), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// outputFileName is the test-data name of output i.
func outputFileName(i int) string { return fmt.Sprintf("output_%d.pb", i) }

// runError classifies an executor error: a kernel's internal failure is a
// bug in onnxpe (exit 3); anything else is about the model or its inputs
// (an unsupported op, a shape that does not fit: exit 2).
func runError(model string, err error) error {
	if errors.Is(err, kernels.ErrInternal) {
		return fmt.Errorf("%s: %w", model, err)
	}
	return badInput("%s: %v", model, err)
}
