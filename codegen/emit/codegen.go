package emit

import (
	"errors"
	"fmt"
	"go/token"
	"io/fs"
	"regexp"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/passes"
)

// Options configure Generate.
type Options struct {
	// Lang is "go" or "c".
	Lang string
	// Package is the Go package name, or the prefix of every C name (and
	// the name of the C files).
	Package string
	// Module, for Go, also writes a go.mod declaring this module path, so
	// that the folder builds on its own.
	Module string
	// Model is the model's file name and SHA256 the hex SHA-256 of its
	// bytes, for the package documentation.
	Model  string
	SHA256 string
	// MaxPositions is how far the golden vectors go for encodings the
	// model computes at any position (no stored table bounds them): 0
	// means DefaultPositions. Stored tables are tested at all their rows.
	MaxPositions int
	// Version is onnxpe's version, for the header ("" leaves it out).
	Version string
}

// DefaultPositions is the number of positions the golden vectors cover
// for encodings without a stored table (positions 0..4095).
const DefaultPositions = 4096

// Languages are the values of Options.Lang.
var Languages = []string{"go", "c"}

// ErrOptions marks bad options (an unknown language, a package name that
// is not an identifier).
var ErrOptions = errors.New("bad options")

// Emitted describes the code of one finding.
type Emitted struct {
	Scheme string `json:"scheme"`
	Layers []int  `json:"layers"`
	// Functions are the exported functions (Go names; C names are the
	// package prefix and the snake-case name).
	Functions []string `json:"functions"`
	// Form says how the code computes the encoding: "computed" (the
	// graph's arithmetic), "dynamic" (frequencies recomputed from the
	// positions), "table" (a table as data: the model's stored table, or
	// the states FLOATER's solver integrates, as onnxpe's executor
	// computes them).
	Form string `json:"form"`
	// Positions is how many positions the golden vectors cover (0..n-1),
	// and MaxPositions the positions the model supports (0: any).
	Positions    int `json:"golden_positions"`
	MaxPositions int `json:"max_positions"`
	// Golden counts the values the generated tests compare.
	Golden int `json:"golden_values"`
	// Embedded names the data files of tables too large for literals.
	Embedded []string `json:"embedded,omitempty"`
}

// ErrSkip marks findings the generator leaves out (with a reason), as
// opposed to failures.
var ErrSkip = errors.New("skipped")

// findingOf returns f's evidence and params as a scheme's types, or the
// skip why (the finding does not carry what its template reads).
func FindingOf[E, P any](f *passes.Finding, why string) (*E, *P, error) {
	ev, _ := f.Evidence.(*E)
	p, _ := any(f.Params).(*P)
	if ev == nil || p == nil {
		return nil, nil, Skip("%s", why)
	}
	return ev, p, nil
}

func Skip(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSkip, fmt.Sprintf(format, args...))
}

// gen is one generation: the model's audit and the options.
type Gen struct {
	Ctx  *passes.Context
	Rep  *passes.Report
	Opts Options
	Lang string
}

// part is the code of one finding: the scheme's template data (Data),
// the tables it holds and what the report says about it.
type Part struct {
	Scheme string
	Layers []int
	// Tmpl is the template (templates/<lang>/<Tmpl>.tmpl defines Tmpl and
	// Tmpl+"_test").
	Tmpl string
	// Go and C name suffixes distinguishing several findings of a scheme
	// ("" for the first).
	Suffix string
	Data   any
	Tables []*Table
	// Doc is the part's paragraph of the package documentation.
	Doc     string
	Emitted Emitted
	Half    bool // needs the float16 helpers
	BHalf   bool // needs the bfloat16 helpers
	// B2F and Pick: the part's Go code calls the b2f and pick helpers (a
	// transcribed program compares or chooses).
	B2F, Pick bool
	Imports   []string
	TestImps  []string
}

// CTest is the name of the part's C test function.
func (p *Part) CTest() string { return "test_" + p.Scheme + p.Suffix }

// Check returns an ErrOptions error for options Generate refuses (callers
// check them before auditing the model).
func (opts Options) Check() error {
	if !slices.Contains(Languages, opts.Lang) {
		return fmt.Errorf("%w: language %q (want go or c)", ErrOptions, opts.Lang)
	}
	if !token.IsIdentifier(opts.Package) || token.IsKeyword(opts.Package) || opts.Package == "_" || strings.ToLower(opts.Package) != opts.Package || strings.Contains(opts.Package, "__") {
		return fmt.Errorf("%w: package name %q is not a lower-case identifier", ErrOptions, opts.Package)
	}
	if opts.Lang == "go" && opts.Package == "main" {
		return fmt.Errorf("%w: package name main: the generated code is a library package", ErrOptions)
	}
	if opts.Module != "" && (opts.Lang != "go" || !modulePath.MatchString(opts.Module) || strings.Contains("/"+opts.Module+"/", "/.") || strings.Contains("/"+opts.Module+"/", "./")) {
		return fmt.Errorf("%w: module path %q (want a Go module path such as example.com/pe, with --lang go)", ErrOptions, opts.Module)
	}
	return nil
}

// modulePath is what a Go module path is made of: elements of letters,
// digits and -._~ separated by slashes (none beginning or ending with a
// dot, which Check tests apart).
var modulePath = regexp.MustCompile(`^[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*$`)

// Generator is a scheme's code generator: Emit builds the part of one
// finding (template data, golden vectors, what the report says of it;
// an error wrapping ErrSkip leaves the finding out with the reason), and
// Templates holds templates/go/*.tmpl and templates/c/*.tmpl, which
// define each part's code (the part's Tmpl) and its test (Tmpl_test).
type Generator struct {
	Emit      func(g *Gen, f *passes.Finding, suffix string) (*Part, error)
	Templates fs.FS
}
