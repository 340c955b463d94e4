package schemes_test

import (
	"encoding/json"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/schemes"
)

// TestTheListIsWhole: every scheme of the list has what the commands read
// (a name its params report, a doc, a detector but for nope and unknown, whose findings
// the audit makes), names are unique, and the report schema names exactly
// the list's schemes and describes the keys of each one's params.
func TestTheListIsWhole(t *testing.T) {
	var schema struct {
		Defs map[string]struct {
			Enum       []string                   `json:"enum"`
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(passes.ReportSchema, &schema); err != nil {
		t.Fatal(err)
	}
	names := schemes.Names()
	if got := schema.Defs["scheme"].Enum; !slices.Equal(sorted(got), sorted(names)) {
		t.Errorf("the report schema's schemes %v are not the list's %v", got, names)
	}
	seen := map[string]bool{}
	colors := map[string]string{}
	for _, s := range schemes.All {
		switch {
		case s.Name == "" || seen[s.Name]:
			t.Errorf("scheme %q: no name, or the name twice", s.Name)
		case strings.TrimSpace(s.Doc) == "":
			t.Errorf("scheme %s has no doc", s.Name)
		case s.Params == nil || s.Params.Scheme() != s.Name:
			t.Errorf("scheme %s: its params are not the scheme's", s.Name)
		case (s.Detect == nil) != s.ByAudit:
			t.Errorf("scheme %s: a detector (%v), or the audit makes its findings (%v), not both", s.Name, s.Detect != nil, s.ByAudit)
		case !s.ByAudit && (s.Codegen == nil || s.Codegen.Emit == nil || s.Codegen.Templates == nil):
			t.Errorf("scheme %s has no code generator", s.Name)
		case !s.ByAudit && s.Plots == nil:
			t.Errorf("scheme %s has no plots", s.Name)
		case s.Color == "" || colors[s.Color] != "":
			t.Errorf("scheme %s: no colour, or %s's", s.Name, colors[s.Color])
		}
		if s.Codegen != nil {
			for _, lang := range []string{"go", "c"} {
				if m, _ := fs.Glob(s.Codegen.Templates, "templates/"+lang+"/*.tmpl"); len(m) == 0 {
					t.Errorf("scheme %s has no %s templates", s.Name, lang)
				}
			}
		}
		seen[s.Name] = true
		colors[s.Color] = s.Name
		if schemes.Lookup(s.Name) != s {
			t.Errorf("Lookup(%s) is another scheme", s.Name)
		}
		def, ok := schema.Defs[s.Name]
		if !ok {
			t.Errorf("the report schema has no params of %s", s.Name)
			continue
		}
		for k := range s.Params.Map() {
			if _, ok := def.Properties[k]; !ok {
				t.Errorf("%s's params print %q, which the report schema does not describe", s.Name, k)
			}
		}
	}
	if schemes.Lookup("no such scheme") != nil {
		t.Error("Lookup of an unknown name")
	}
}

// TestRewritesAndExtensionsAreWhole: rewrite passes have unique --passes
// names, a help text and a valid pipeline; no --method is two schemes'.
func TestRewritesAndExtensionsAreWhole(t *testing.T) {
	if _, err := passes.Order(passes.Analyzers(schemes.Rewriters()...)...); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range schemes.Rewrites() {
		if r.Name == "" || seen[r.Name] || strings.TrimSpace(r.Help) == "" || r.Pass == nil || schemes.Rewriter(r.Name) != r.Pass {
			t.Errorf("rewrite %q: a name given once, a help and a pass that Rewriter finds by it", r.Name)
		}
		seen[r.Name] = true
	}
	owner := map[string]string{}
	for _, s := range schemes.All {
		if s.Extend == nil {
			continue
		}
		if s.Extend.Plan == nil {
			t.Errorf("%s's extension has no plan", s.Name)
		}
		for _, m := range s.Extend.Methods {
			if o, ok := owner[m]; ok {
				t.Errorf("--method %s is %s's and %s's", m, o, s.Name)
			}
			owner[m] = s.Name
		}
	}
	if len(owner) == 0 {
		t.Error("no scheme takes a --method")
	}
}

func sorted(s []string) []string { return slices.Sorted(maps.Keys(setOf(s))) }

func setOf(s []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return m
}
