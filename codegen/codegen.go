package codegen

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"go/token"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"text/template"

	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/scheme/alibi"
	"github.com/onnxpe/onnxpe/passes/scheme/complexorder"
	"github.com/onnxpe/onnxpe/passes/scheme/disentangled"
	"github.com/onnxpe/onnxpe/passes/scheme/floater"
	"github.com/onnxpe/onnxpe/passes/scheme/learned"
	"github.com/onnxpe/onnxpe/passes/scheme/nope"
	"github.com/onnxpe/onnxpe/passes/scheme/relsin"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
	"github.com/onnxpe/onnxpe/passes/scheme/shaw"
	"github.com/onnxpe/onnxpe/passes/scheme/sinusoidal"
	"github.com/onnxpe/onnxpe/passes/scheme/t5"
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

// ErrNothing is returned when the model has no positional encoding to
// generate code for (NoPE in every layer, or no attention at all).
var ErrNothing = errors.New("no positional encoding to generate code for")

// ErrOptions marks bad options (an unknown language, a package name that
// is not an identifier).
var ErrOptions = errors.New("bad options")

// File is one file of the generated source.
type File struct {
	Name string
	Data []byte
}

// Result is what Generate made: the files, what each finding became and
// the findings it could not turn into code.
type Result struct {
	Files   []File    `json:"-"`
	Emitted []Emitted `json:"emitted"`
	Skipped []Skipped `json:"skipped"`
}

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

// Skipped is a finding left out, with the reason.
type Skipped struct {
	Scheme string `json:"scheme"`
	Layers []int  `json:"layers"`
	Reason string `json:"reason"`
}

//go:embed templates
var templateFS embed.FS

// emitter builds the part of one finding: template data and golden
// vectors. It returns errSkip (wrapped with the reason) for findings whose
// encoding cannot be reproduced exactly.
type emitter func(g *gen, f *passes.Finding, suffix string) (*part, error)

// emitters are the schemes codegen knows, by scheme name.
var emitters = map[string]emitter{
	rope.Name:         emitRoPE,
	sinusoidal.Name:   emitSinusoidal,
	learned.Name:      emitLearned,
	alibi.Name:        emitALiBi,
	t5.Name:           emitT5,
	shaw.Name:         emitShaw,
	relsin.Name:       emitRelSin,
	disentangled.Name: emitDisentangled,
	complexorder.Name: emitComplexOrder,
	floater.Name:      emitFloater,
}

// errSkip marks findings the generator leaves out (with a reason), as
// opposed to failures.
var errSkip = errors.New("skipped")

// findingOf returns f's evidence and params as a scheme's types, or the
// skip why (the finding does not carry what its template reads).
func findingOf[E, P any](f *passes.Finding, why string) (*E, *P, error) {
	ev, _ := f.Evidence.(*E)
	p, _ := any(f.Params).(*P)
	if ev == nil || p == nil {
		return nil, nil, skip("%s", why)
	}
	return ev, p, nil
}

func skip(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errSkip, fmt.Sprintf(format, args...))
}

// gen is one generation: the model's audit and the options.
type gen struct {
	ctx  *passes.Context
	rep  *passes.Report
	opts Options
	lang string
}

// part is the code of one finding: the scheme's template data (Data),
// the tables it holds and what the report says about it.
type part struct {
	Scheme string
	Layers []int
	// Tmpl is the template (templates/<lang>/<Tmpl>.tmpl defines Tmpl and
	// Tmpl+"_test").
	Tmpl string
	// Go and C name suffixes distinguishing several findings of a scheme
	// ("" for the first).
	Suffix string
	Data   any
	Tables []*table
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
func (p *part) CTest() string { return "test_" + p.Scheme + p.Suffix }

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

// Generate turns the findings of rep (the audit of ctx's model) into
// source. It returns ErrNothing when no finding has a positional encoding
// to generate.
func Generate(rep *passes.Report, ctx *passes.Context, opts Options) (*Result, error) {
	if err := opts.Check(); err != nil {
		return nil, err
	}
	if opts.MaxPositions <= 0 {
		opts.MaxPositions = DefaultPositions
	}
	g := &gen{ctx: ctx, rep: rep, opts: opts, lang: opts.Lang}
	res := &Result{Emitted: []Emitted{}, Skipped: []Skipped{}}
	var parts []*part
	count := map[string]int{}
	for _, f := range rep.Findings {
		em := emitters[f.Scheme]
		if em == nil {
			if f.Scheme != nope.Name {
				res.Skipped = append(res.Skipped, Skipped{f.Scheme, f.Layers, "no code generator for this scheme"})
			}
			continue
		}
		if f.Subgraph != "" {
			res.Skipped = append(res.Skipped, Skipped{f.Scheme, f.Layers, "in the graph " + f.Subgraph + " of a generation op (generate code from the decoder model it wraps)"})
			continue
		}
		suffix := ""
		if n := count[f.Scheme]; n > 0 {
			suffix = fmt.Sprint(n + 1)
		}
		p, err := em(g, f, suffix)
		if err != nil {
			// Code that cannot be tested against the model is not written:
			// the finding is left out with the reason.
			res.Skipped = append(res.Skipped, Skipped{f.Scheme, f.Layers, strings.TrimPrefix(err.Error(), errSkip.Error()+": ")})
			continue
		}
		count[f.Scheme]++
		p.Scheme, p.Layers, p.Suffix = f.Scheme, f.Layers, suffix
		p.Emitted.Scheme, p.Emitted.Layers = f.Scheme, f.Layers
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return res, ErrNothing
	}
	files, err := g.render(parts)
	if err != nil {
		return nil, err
	}
	res.Files = files
	for _, p := range parts {
		if g.lang == "c" {
			for i, fn := range p.Emitted.Functions {
				p.Emitted.Functions[i] = cname(opts.Package, fn)
			}
		}
		res.Emitted = append(res.Emitted, p.Emitted)
	}
	return res, nil
}

// fileData is what the file templates see.
type fileData struct {
	Opts     Options
	Parts    []*part
	Half     bool
	BHalf    bool
	Imports  []string
	TestImps []string
	Schemes  string
	// Embeds are the tables stored as data files (Go).
	Embeds []*table
	// B2F and Pick: a transcribed program compares or chooses (Go helpers).
	B2F, Pick bool
}

func (g *gen) render(parts []*part) ([]File, error) {
	fd := &fileData{Opts: g.opts, Parts: parts}
	imps := map[string]bool{"math": true}
	timps := map[string]bool{"testing": true, "math": true}
	var schemes []string
	for _, p := range parts {
		fd.Half = fd.Half || p.Half
		fd.BHalf = fd.BHalf || p.BHalf
		for _, i := range p.Imports {
			imps[i] = true
		}
		for _, i := range p.TestImps {
			timps[i] = true
		}
		schemes = append(schemes, p.Scheme)
		fd.B2F = fd.B2F || p.B2F
		fd.Pick = fd.Pick || p.Pick
		for _, t := range p.Tables {
			if g.lang == "go" && t.embed() {
				fd.Embeds = append(fd.Embeds, t)
				imps["embed"], imps["encoding/binary"] = true, true
			}
		}
	}
	fd.Imports, fd.TestImps = sortedKeys(imps), sortedKeys(timps)
	for _, p := range parts {
		for _, t := range p.Tables {
			if g.lang == "go" && t.embed() {
				p.Emitted.Embedded = append(p.Emitted.Embedded, t.file(g.opts.Package))
			}
		}
	}
	fd.Schemes = strings.Join(slices.Compact(schemes), ", ")
	t, err := g.templates()
	if err != nil {
		return nil, err
	}
	var files []File
	exec := func(name string, data any) ([]byte, error) {
		var b bytes.Buffer
		if err := t.ExecuteTemplate(&b, name, data); err != nil {
			return nil, fmt.Errorf("codegen: template %s: %w", name, err)
		}
		return b.Bytes(), nil
	}
	pkg := g.opts.Package
	switch g.lang {
	case "go":
		for _, f := range []struct{ tmpl, name string }{{"file", pkg + ".go"}, {"testfile", pkg + "_test.go"}} {
			src, err := exec(f.tmpl, fd)
			if err != nil {
				return nil, err
			}
			out, err := format.Source(src)
			if err != nil {
				return nil, fmt.Errorf("codegen: %s does not parse: %w\n%s", f.name, err, numbered(src))
			}
			files = append(files, File{f.name, out})
		}
		for _, t := range fd.Embeds {
			files = append(files, File{t.file(pkg), t.bytes()})
		}
		if g.opts.Module != "" {
			files = append(files, File{"go.mod", []byte("// Code generated by onnxpe; DO NOT EDIT.\n\nmodule " + g.opts.Module + "\n\ngo 1.21\n")})
		}
	case "c":
		for _, f := range []struct{ tmpl, name string }{{"file", pkg + ".h"}, {"testfile", pkg + "_test.c"}} {
			src, err := exec(f.tmpl, fd)
			if err != nil {
				return nil, err
			}
			files = append(files, File{f.name, tidyC(src)})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, nil
}

// templates parses the templates of the language, with the helpers.
func (g *gen) templates() (*template.Template, error) {
	var t *template.Template
	funcs := g.funcs()
	funcs["part"] = func(p *part) (string, error) {
		var b bytes.Buffer
		err := t.ExecuteTemplate(&b, p.Tmpl, p)
		return b.String(), err
	}
	funcs["parttest"] = func(p *part) (string, error) {
		var b bytes.Buffer
		err := t.ExecuteTemplate(&b, p.Tmpl+"_test", p)
		return b.String(), err
	}
	t = template.New(g.lang).Funcs(funcs)
	pattern := path.Join("templates", g.lang, "*.tmpl")
	if _, err := t.ParseFS(templateFS, pattern); err != nil {
		return nil, fmt.Errorf("codegen: templates: %w", err)
	}
	return t, nil
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// numbered prints source with line numbers (for template defects).
func numbered(src []byte) string {
	var b strings.Builder
	for i, l := range strings.Split(string(src), "\n") {
		fmt.Fprintf(&b, "%4d %s\n", i+1, l)
	}
	return b.String()
}

// tidyC removes runs of blank lines the templates leave.
func tidyC(src []byte) []byte {
	lines := strings.Split(string(src), "\n")
	var out []string
	blank := 0
	for _, l := range lines {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			blank++
			if blank > 1 {
				continue
			}
		} else {
			blank = 0
		}
		out = append(out, l)
	}
	s := strings.TrimLeft(strings.Join(out, "\n"), "\n")
	return []byte(strings.TrimRight(s, "\n") + "\n")
}
