package depgraph

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/onnxpe/onnxpe"

// layers is DESIGN.md's picture, bottom up (paths below the module): a
// package may import the module's packages of the layers below its own,
// in the tool's code (tests may import more: testmodels,
// internal/conformance, ...), never one of its own layer or above. The
// scheme packages (passes/scheme/*) are one layer: no scheme imports
// another. Only graph imports onnxpb; kernels/gemm is the executor's
// matrix multiply, imported by kernels alone; testmodels is imported only
// by tests, bench/ tools and passes/internal/schemetest (the passes'
// test support: builders of small models, one detector run alone, the
// golden comparison), which tests alone import; internal/metamorph
// (graph transformations for metamorphic tests) by tests only;
// internal/ortpeer (tag ort) by verify.
var layers = [][]string{
	{"internal/onnxpb", "internal/atomicfile", "internal/junit", "internal/conformance", "golden", "internal/tools/testsummary", "internal/tools/opschema", "internal/depgraph", "kernels/gemm"},
	{"graph"},
	{"kernels"},
	{"internal/ortpeer", "testmodels", "internal/metamorph"},
	{"passes"},
	{"passes/pattern"},
	{"passes/work"},
	{"passes/probe"},
	{"passes/attn"},
	{"passes/rewrite"},
	{"codegen/emit", "internal/htmlreport/plot"},
	{"passes/absolute", "passes/scorebias"},
	{"passes/scheme"},
	{"passes/scheme/*"},
	{"passes/schemes"},
	{"passes/internal/schemetest"},
	{"passes/audit"},
	{"passes/extend"},
	{"verify", "codegen", "internal/htmlreport"},
	{"internal/cli"},
	{"cmd/onnxpe"},
}

// only are the packages some packages alone may import.
var only = map[string][]string{
	"internal/onnxpb":            {"graph"},
	"kernels/gemm":               {"kernels"},
	"internal/ortpeer":           {"verify"},
	"testmodels":                 {"passes/internal/schemetest"},
	"passes/internal/schemetest": {},
	"internal/metamorph":         {},
}

// layerOf is the layer of a package of the module (-1: not in the picture).
func layerOf(pkg string) int {
	for i, l := range layers {
		for _, p := range l {
			if p == pkg || strings.HasSuffix(p, "/*") && strings.HasPrefix(pkg, strings.TrimSuffix(p, "*")) && !strings.Contains(strings.TrimPrefix(pkg, strings.TrimSuffix(p, "*")), "/") {
				return i
			}
		}
	}
	return -1
}

// benchAllowed is what the bench/ tools may import: the library, the
// corpus, ONNX Runtime and the helpers they share, not the command line.
var benchAllowed = []string{"graph", "kernels", "passes", "verify", "codegen", "testmodels", "internal/ortpeer", "bench/internal/benchutil"}

// external are third-party module paths only some packages may import.
var external = map[string][]string{
	"google.golang.org/protobuf":      {"graph", "internal/onnxpb"}, // only graph touches protobuf types
	"github.com/yalue/onnxruntime_go": {"internal/ortpeer"},         // and only under the ort tag
}

type pkg struct {
	ImportPath string
	Standard   bool
	Imports    []string
	CgoFiles   []string
	Error      *struct{ Err string }
	DepsErrors []*struct{ Err string }
}

// goList runs go list -json over the module's packages (with -deps: and
// everything they import) and decodes what it prints.
func goList(t *testing.T, env []string, args ...string) []*pkg {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the packages: %v", err)
	}
	cmd := exec.Command(goTool, append(append([]string{"list", "-e", "-json"}, args...), module+"/...")...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.Bytes())
	}
	var pkgs []*pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(pkg)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list %v: %v", args, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// own is the path of p below the module, or "" for other packages.
func own(path string) string {
	if path == module {
		return "."
	}
	rest, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return ""
	}
	return rest
}

// edgeAllowed says whether module package from may import module package to.
func edgeAllowed(from, to string) bool {
	if strings.HasPrefix(from, "bench/") {
		return slices.Contains(benchAllowed, to) || strings.HasPrefix(to, "passes/")
	}
	if who, ok := only[to]; ok && !slices.Contains(who, from) {
		return false
	}
	lf, lt := layerOf(from), layerOf(to)
	return lf >= 0 && lt >= 0 && lt < lf
}

// checkEdges checks every import of the module's packages in one build
// configuration and returns the edges seen.
func checkEdges(t *testing.T, config string, pkgs []*pkg) map[[2]string]bool {
	t.Helper()
	seen := map[[2]string]bool{}
	for _, p := range pkgs {
		from := own(p.ImportPath)
		if from == "" {
			continue
		}
		if p.Error != nil {
			t.Errorf("%s: %s: %s", config, from, p.Error.Err)
			continue
		}
		if layerOf(from) < 0 && !strings.HasPrefix(from, "bench/") {
			t.Errorf("%s: package %s is not in DESIGN.md's picture (nor in this test's table): place it there", config, from)
			continue
		}
		for _, imp := range p.Imports {
			if to := own(imp); to != "" {
				seen[[2]string{from, to}] = true
				if !edgeAllowed(from, to) {
					t.Errorf("%s: %s imports %s, which DESIGN.md does not allow", config, from, to)
				}
				continue
			}
			for prefix, who := range external {
				if (imp == prefix || strings.HasPrefix(imp, prefix+"/")) && !slices.Contains(who, from) {
					t.Errorf("%s: %s imports %s (only %v may)", config, from, imp, who)
				}
			}
		}
	}
	return seen
}

// TestImportGraph checks the imports of every package of the module, in
// the default build and with -tags ort, against DESIGN.md's picture.
func TestImportGraph(t *testing.T) {
	def := checkEdges(t, "default build", goList(t, nil))
	ort := checkEdges(t, "-tags ort", goList(t, nil, "-tags", "ort"))
	// The table is not vacuous: the layers it describes are there.
	for _, e := range [][2]string{
		{"graph", "internal/onnxpb"}, {"kernels", "graph"}, {"passes/work", "kernels"}, {"passes/work", "passes/pattern"},
		{"passes/scheme/rope", "passes/attn"}, {"passes/scheme/rope", "passes/scheme"}, {"passes/schemes", "passes/scheme/rope"}, {"passes/audit", "passes/schemes"}, {"passes/extend", "passes/audit"},
		{"verify", "passes"}, {"codegen", "passes"}, {"internal/cli", "verify"}, {"internal/cli", "codegen"}, {"cmd/onnxpe", "internal/cli"},
	} {
		if !def[e] {
			t.Errorf("default build: %s does not import %s: DESIGN.md's picture (and this table) is out of date", e[0], e[1])
		}
	}
	if !ort[[2]string{"verify", "internal/ortpeer"}] || def[[2]string{"verify", "internal/ortpeer"}] {
		t.Errorf("verify imports internal/ortpeer: with -tags ort %v, by default %v; want only with the tag",
			ort[[2]string{"verify", "internal/ortpeer"}], def[[2]string{"verify", "internal/ortpeer"}])
	}
	t.Logf("%d imports between the module's packages by default, %d with -tags ort", len(def), len(ort))
}

// TestDefaultBuildIsPureGo: without the ort tag nothing the module's
// packages depend on outside the standard library uses cgo, ONNX
// Runtime's binding is not among them, and every package builds with
// CGO_ENABLED=0; with the tag, internal/ortpeer reaches ONNX Runtime
// through cgo (the tag is what isolates it).
func TestDefaultBuildIsPureGo(t *testing.T) {
	const ort = "github.com/yalue/onnxruntime_go"
	deps := goList(t, nil, "-deps")
	for _, p := range deps {
		switch {
		case strings.HasPrefix(p.ImportPath, ort):
			t.Errorf("the default build depends on %s", p.ImportPath)
		case !p.Standard && len(p.CgoFiles) > 0:
			t.Errorf("the default build depends on %s, which uses cgo (%v)", p.ImportPath, p.CgoFiles)
		}
	}
	n := 0
	for _, p := range goList(t, []string{"CGO_ENABLED=0"}, "-deps") {
		if own(p.ImportPath) != "" {
			n++
		}
		if p.Error != nil {
			t.Errorf("CGO_ENABLED=0: %s: %s", p.ImportPath, p.Error.Err)
		}
		for _, e := range p.DepsErrors {
			t.Errorf("CGO_ENABLED=0: %s: %s", p.ImportPath, e.Err)
		}
	}
	if n == 0 {
		t.Error("CGO_ENABLED=0: go list found none of the module's packages")
	}
	found := false
	for _, p := range goList(t, nil, "-deps", "-tags", "ort") {
		if p.ImportPath == ort {
			found = len(p.CgoFiles) > 0
		}
	}
	if !found {
		t.Errorf("with -tags ort the module does not reach %s through cgo: is the tag still what isolates it?", ort)
	}
	t.Logf("%d packages in the default build, %d of the module's with CGO_ENABLED=0", len(deps), n)
}
