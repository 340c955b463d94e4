package cli

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/onnxpe/onnxpe/codegen"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/atomicfile"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/work"
	"github.com/spf13/cobra"
)

type codegenOptions struct {
	IO           *IOStreams
	Model        string
	Lang         string
	Package      string
	Out          string
	Module       string
	MaxPositions int
	JSON         bool
	ctx          context.Context
}

// NewCmdCodegen builds `onnxpe codegen`.
func NewCmdCodegen(ios *IOStreams) *cobra.Command {
	opts := &codegenOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "codegen MODEL --lang go|c --package NAME -o DIR",
		Short: "Write the model's exact positional encoding as standalone Go or C source, with tests",
		Long: `Codegen audits MODEL and writes its positional encodings as standalone
source into DIR: for every scheme found, the constants read from the
model (frequencies as stored, slopes, bucket parameters, tables), each
with a comment naming the tensor or node it came from, and the functions
that compute what the model computes:

  rope              RoPECosSin, ApplyRoPE (float16/bfloat16 variants where
                    the model rotates in those types); multimodal RoPE
                    (M-RoPE, Qwen2-VL): MRoPECosSin, ApplyMRoPE; axial
                    2-D RoPE over a patch grid (rope-vit, EVA-02):
                    AxialRoPECell, AxialRoPECosSin, ApplyAxialRoPE
  sinusoidal        SinusoidalTable
  learned_absolute  PositionEmbedding
  alibi             ALiBiBias
  t5_relative_bias  T5Bucket, T5Bias
  relative_clipped  ShawRelativeIndex, ShawRelativeKeys, ShawRelativeValues
  relative_sinusoidal
                    RelSinRowCount, RelSinDistances, RelSinRows, RelSinTable
                    (Transformer-XL, XLNet)
  disentangled      DisentangledBucket, DisentangledRelativePositions,
                    DisentangledC2PIndex, DisentangledP2CIndex (DeBERTa)
  complex_order     ComplexOrderPositions, ComplexOrderPhase,
                    ComplexOrderEmbedding (Wang et al. 2020)
  floater           FloaterState, FloaterBiases (the states the model's
                    solver integrates, as a table)

The functions repeat the model's own arithmetic (the element types it
computes in, rounding as it rounds); stored tables become data. A test
file holds golden vectors that onnxpe's executor computed on the model's
own subgraph at positions up to the model's largest (a stored table's
rows; --max-positions, default 4096, for encodings computed at any
position): ` + "`go test`" + ` in DIR, or the C test program, checks the code against
the model.

--lang go writes a package (standard library only) that builds inside
your module; --module PATH also writes a go.mod so that DIR builds on its
own. Tables of more than 4096 values are stored in .bin files read with
go:embed. --lang c writes one header-only C99 file, NAME.h, and a test
program NAME_test.c (cc -std=c99 NAME_test.c -lm).

DIR is written through a temporary folder renamed into place: nothing is
half-written. An existing DIR is replaced only when it holds nothing but
files onnxpe generated.

A model without a positional encoding (NoPE in every layer) is a check
that fails: exit 1, nothing written. Findings codegen cannot reproduce
exactly (cos/sin given as graph inputs, a rotation inside a fused
attention op) are listed and left out.

` + exitCodesHelp,
		Example: `  onnxpe codegen model.onnx --lang go --package llamarope -o internal/llamarope
  onnxpe codegen model.onnx --lang go --package pe -o pe --module example.com/pe
  onnxpe codegen model.onnx --lang c --package llama_pe -o c/
  onnxpe codegen model.onnx --lang go --package pe -o pe --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Model = args[0]
			opts.ctx = cmd.Context()
			return codegenRun(opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Lang, "lang", "", "language: go or c")
	f.StringVar(&opts.Package, "package", "", "Go package name, or the prefix of the C names and files (lower case)")
	f.StringVarP(&opts.Out, "output", "o", "", "folder to write (created, or replaced when onnxpe generated it)")
	f.StringVar(&opts.Module, "module", "", "with --lang go: also write a go.mod declaring this module path")
	f.IntVar(&opts.MaxPositions, "max-positions", 0, "how far the golden vectors go for encodings without a stored table (default 4096)")
	f.BoolVar(&opts.JSON, "json", false, "print what was written as JSON")
	return cmd
}

// CodegenReport is what `onnxpe codegen --json` prints.
type CodegenReport struct {
	Model   string               `json:"model"`
	SHA256  string               `json:"sha256"`
	Lang    string               `json:"lang"`
	Package string               `json:"package"`
	Dir     string               `json:"dir"`
	Files   []CodegenFile        `json:"files"`
	Emitted []codegen.Emitted    `json:"emitted"`
	Skipped []codegen.Skipped    `json:"skipped"`
	Schemes []string             `json:"schemes"`
	Layers  []passes.LayerScheme `json:"layers"`
}

// CodegenFile is one file written.
type CodegenFile struct {
	Name  string `json:"name"`
	Bytes int    `json:"bytes"`
}

func codegenRun(opts *codegenOptions) error {
	switch {
	case opts.Lang == "":
		return badInput("codegen: give --lang go or --lang c")
	case opts.Lang != "go" && opts.Lang != "c":
		return badInput("codegen: --lang %q: want go or c", opts.Lang)
	case opts.Package == "":
		return badInput("codegen: give --package NAME (the Go package, or the prefix of the C names)")
	case opts.Out == "":
		return badInput("codegen: give -o DIR, the folder to write")
	case opts.Module != "" && opts.Lang != "go":
		return badInput("codegen: --module is for --lang go")
	case opts.MaxPositions < 0:
		return badInput("codegen: --max-positions must not be negative")
	}
	co := codegen.Options{Lang: opts.Lang, Package: opts.Package, Module: opts.Module, MaxPositions: opts.MaxPositions}
	if err := co.Check(); err != nil {
		return badInput("codegen: %v", err)
	}
	if err := checkCodegenDir(opts.Out); err != nil {
		return err
	}
	// Weights in absent external data are never read (the golden vectors
	// run the encoding's subgraph only), as for the audit.
	m, err := loadModelWith(opts.IO.ErrOut, opts.Model, graph.LoadOptions{AllowMissingExternal: true})
	if err != nil {
		return err
	}
	sum, err := fileSHA256(opts.Model)
	if err != nil {
		return badInput("%s: %v", opts.Model, err)
	}
	rep, ctx, err := audit.AuditModel(m, filepath.Base(opts.Model), passes.Options{})
	if err != nil {
		if errors.Is(err, work.ErrModel) {
			return badInput("%s: %v", opts.Model, err)
		}
		return fmt.Errorf("%s: %w", opts.Model, err)
	}
	co.Model, co.SHA256 = filepath.Base(opts.Model), sum
	if co.MaxPositions > 0 {
		// The golden vectors at --max-positions N, against the memory
		// budget, before the executor computes them.
		if err := checkPositionsMemory("--max-positions", rep, int64(co.MaxPositions), true); err != nil {
			return err
		}
	}
	res, err := codegen.Generate(rep, ctx, co)
	switch {
	case errors.Is(err, codegen.ErrOptions):
		return badInput("codegen: %v", err)
	case errors.Is(err, codegen.ErrNothing):
		why := "the audit finds no attention layer"
		if len(rep.Schemes) > 0 {
			why = "the audit finds " + strings.Join(rep.Schemes, ", ")
			for _, s := range res.Skipped {
				why += fmt.Sprintf("; %s (layers %v) left out: %s", s.Scheme, s.Layers, s.Reason)
			}
		}
		return &checkFailed{fmt.Sprintf("%s: no positional encoding to generate code for (%s); nothing written", opts.Model, why)}
	case err != nil:
		return fmt.Errorf("%s: codegen: %w", opts.Model, err)
	}
	if err := commit(opts.ctx, opts.Out, func() error { return writeDir(opts.Out, res.Files) }); err != nil {
		return err
	}
	out := CodegenReport{Model: opts.Model, SHA256: sum, Lang: opts.Lang, Package: opts.Package, Dir: opts.Out,
		Emitted: res.Emitted, Skipped: res.Skipped, Schemes: rep.Schemes, Layers: rep.Layers}
	for _, f := range res.Files {
		out.Files = append(out.Files, CodegenFile{f.Name, len(f.Data)})
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	printCodegen(opts.IO.Out, &out)
	for _, s := range res.Skipped {
		fmt.Fprintf(opts.IO.ErrOut, "onnxpe: warning: %s: %s (layers %v) left out: %s\n", opts.Model, s.Scheme, s.Layers, s.Reason)
	}
	return nil
}

func printCodegen(w io.Writer, r *CodegenReport) {
	fmt.Fprintf(w, "%s (SHA-256 %s…): wrote %s\n", r.Model, r.SHA256[:12], r.Dir)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEME\tLAYERS\tFORM\tFUNCTIONS\tGOLDEN")
	for _, e := range r.Emitted {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d values at positions 0..%d\n", e.Scheme, intList(e.Layers), e.Form, strings.Join(e.Functions, ", "), e.Golden, max(e.Positions-1, 0))
	}
	tw.Flush()
	for _, f := range r.Files {
		fmt.Fprintf(w, "  %s (%d bytes)\n", filepath.Join(r.Dir, f.Name), f.Bytes)
	}
	switch {
	case r.Lang == "go" && inGoModule(r.Dir):
		fmt.Fprintf(w, "test it: (cd %s && go test)\n", r.Dir)
	case r.Lang == "go":
		// Outside a module `go test` refuses to run: make DIR one (or give
		// --module).
		fmt.Fprintf(w, "test it: (cd %s && go mod init %s && go test)\n", r.Dir, r.Package)
	default:
		fmt.Fprintf(w, "test it: (cd %s && cc -std=c99 -o %s_test %s_test.c -lm && ./%s_test)\n", r.Dir, r.Package, r.Package, r.Package)
	}
}

// inGoModule says whether dir is inside a Go module (a go.mod in it or
// above it).
func inGoModule(dir string) bool {
	d, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return true
		}
		up := filepath.Dir(d)
		if up == d {
			return false
		}
		d = up
	}
}

func intList(v []int) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ",")
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", pathErr(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, bufio.NewReader(f)); err != nil {
		return "", pathErr(err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// pathErr is the error of a file operation without the operation and the
// path (which the caller's message names).
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// generatedMark starts every file onnxpe codegen writes but the data
// files (which are named after the package).
const generatedMark = "Code generated by onnxpe"

// checkCodegenDir accepts a folder that does not exist (in a folder that
// does) or one holding only files onnxpe generated.
func checkCodegenDir(dir string) error {
	if err := checkOutputFolder("-o", dir); err != nil {
		return err
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	// DIR is replaced by a folder written beside it.
	if err := checkFolder("-o", dir, filepath.Dir(filepath.Clean(dir))); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return badInput("%s: %v", dir, err)
	}
	for _, e := range entries {
		if !generatedFile(filepath.Join(dir, e.Name()), e) {
			return badInput("%s holds %s, which onnxpe did not generate: give a new folder or one codegen wrote", dir, e.Name())
		}
	}
	return nil
}

func generatedFile(path string, e os.DirEntry) bool {
	if !e.Type().IsRegular() {
		return false
	}
	if strings.HasSuffix(e.Name(), ".bin") {
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	return strings.Contains(line, generatedMark)
}

// writeDir writes files into a temporary folder beside dir and renames it
// into place (replacing a folder codegen wrote before).
func writeDir(dir string, files []codegen.File) error {
	dir = filepath.Clean(dir)
	tmp, err := atomicfile.TempDir(dir)
	if err != nil {
		return badInput("%s: %v", dir, err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Release()
		}
	}()
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(tmp.Path, f.Name), f.Data, 0o644); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	var old string
	if _, err := os.Stat(dir); err == nil {
		old = tmp.Path + ".old"
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	if err := os.Rename(tmp.Path, dir); err != nil {
		if old != "" {
			os.Rename(old, dir)
		}
		return fmt.Errorf("%s: %w", dir, err)
	}
	ok = true
	tmp.Release() // the lock; its folder is dir now
	if old != "" {
		os.RemoveAll(old)
	}
	return nil
}
