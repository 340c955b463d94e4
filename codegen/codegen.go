package codegen

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"text/template"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/scheme/nope"
	"github.com/onnxpe/onnxpe/passes/schemes"
)

// Options are the flags of onnxpe codegen (the language, the package, the
// positions the golden vectors cover).
type Options = emit.Options

// Emitted is what the generated code of one finding holds.
type Emitted = emit.Emitted

// DefaultPositions is the number of positions the golden vectors cover
// when the model stores no table and Options.MaxPositions is 0.
const DefaultPositions = emit.DefaultPositions

// Languages are the languages Generate writes.
var Languages = emit.Languages

// ErrOptions marks options Generate refuses.
var ErrOptions = emit.ErrOptions

// ErrNothing is returned when the model has no positional encoding to
// generate code for (NoPE in every layer, or no attention at all).
var ErrNothing = errors.New("no positional encoding to generate code for")

// File is one file of the generated source.
type File struct {
	Name string
	Data []byte
}

// Result is what Generate made: the files, what each finding became and
// the findings it could not turn into code.
type Result struct {
	Files   []File         `json:"-"`
	Emitted []emit.Emitted `json:"emitted"`
	Skipped []Skipped      `json:"skipped"`
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
type emitter func(g *emit.Gen, f *passes.Finding, suffix string) (*emit.Part, error)

// Generate turns the findings of rep (the audit of ctx's model) into
// source. It returns ErrNothing when no finding has a positional encoding
// to generate.
func Generate(rep *passes.Report, ctx *passes.Context, opts emit.Options) (*Result, error) {
	if err := opts.Check(); err != nil {
		return nil, err
	}
	if opts.MaxPositions <= 0 {
		opts.MaxPositions = emit.DefaultPositions
	}
	g := &emit.Gen{Ctx: ctx, Rep: rep, Opts: opts, Lang: opts.Lang}
	res := &Result{Emitted: []emit.Emitted{}, Skipped: []Skipped{}}
	var parts []*emit.Part
	count := map[string]int{}
	for _, f := range rep.Findings {
		var em emitter
		if sc := schemes.Lookup(f.Scheme); sc != nil && sc.Codegen != nil {
			em = sc.Codegen.Emit
		}
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
			res.Skipped = append(res.Skipped, Skipped{f.Scheme, f.Layers, strings.TrimPrefix(err.Error(), emit.ErrSkip.Error()+": ")})
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
	files, err := render(g, parts)
	if err != nil {
		return nil, err
	}
	res.Files = files
	for _, p := range parts {
		if g.Lang == "c" {
			for i, fn := range p.Emitted.Functions {
				p.Emitted.Functions[i] = emit.Cname(opts.Package, fn)
			}
		}
		res.Emitted = append(res.Emitted, p.Emitted)
	}
	return res, nil
}

// fileData is what the file templates see.
type fileData struct {
	Opts     emit.Options
	Parts    []*emit.Part
	Half     bool
	BHalf    bool
	Imports  []string
	TestImps []string
	Schemes  string
	// Embeds are the tables stored as data files (Go).
	Embeds []*emit.Table
	// B2F and Pick: a transcribed program compares or chooses (Go helpers).
	B2F, Pick bool
}

func render(g *emit.Gen, parts []*emit.Part) ([]File, error) {
	fd := &fileData{Opts: g.Opts, Parts: parts}
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
			if g.Lang == "go" && t.Embed() {
				fd.Embeds = append(fd.Embeds, t)
				imps["embed"], imps["encoding/binary"] = true, true
			}
		}
	}
	fd.Imports, fd.TestImps = sortedKeys(imps), sortedKeys(timps)
	for _, p := range parts {
		for _, t := range p.Tables {
			if g.Lang == "go" && t.Embed() {
				p.Emitted.Embedded = append(p.Emitted.Embedded, t.File(g.Opts.Package))
			}
		}
	}
	fd.Schemes = strings.Join(slices.Compact(schemes), ", ")
	t, err := templates(g)
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
	pkg := g.Opts.Package
	switch g.Lang {
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
			files = append(files, File{t.File(pkg), t.Bytes()})
		}
		if g.Opts.Module != "" {
			files = append(files, File{"go.mod", []byte("// Code generated by onnxpe; DO NOT EDIT.\n\nmodule " + g.Opts.Module + "\n\ngo 1.21\n")})
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
func templates(g *emit.Gen) (*template.Template, error) {
	var t *template.Template
	funcs := g.Funcs()
	funcs["part"] = func(p *emit.Part) (string, error) {
		var b bytes.Buffer
		err := t.ExecuteTemplate(&b, p.Tmpl, p)
		return b.String(), err
	}
	funcs["parttest"] = func(p *emit.Part) (string, error) {
		var b bytes.Buffer
		err := t.ExecuteTemplate(&b, p.Tmpl+"_test", p)
		return b.String(), err
	}
	t = template.New(g.Lang).Funcs(funcs)
	pattern := path.Join("templates", g.Lang, "*.tmpl")
	if _, err := t.ParseFS(templateFS, pattern); err != nil {
		return nil, fmt.Errorf("codegen: templates: %w", err)
	}
	// The schemes' templates (each once: two schemes may share theirs).
	seen := map[fs.FS]bool{}
	for _, sc := range schemes.All {
		if sc.Codegen == nil || seen[sc.Codegen.Templates] {
			continue
		}
		seen[sc.Codegen.Templates] = true
		if _, err := t.ParseFS(sc.Codegen.Templates, pattern); err != nil {
			return nil, fmt.Errorf("codegen: the templates of %s: %w", sc.Name, err)
		}
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
