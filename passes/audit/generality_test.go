package audit_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/testmodels"
)

// generalityFailures are the generality forms the audit gets wrong today,
// each with its wrong answer as generalityDiffs prints it: the lead's work
// list for issue 21. The test fails when an entry stops failing (remove
// it), when its answer changes (write the new one), and when a form not
// listed fails.
var generalityFailures = map[string]string{}

// TestGeneralityForms audits each form of testmodels.GeneralityForms (the
// forms of issue 21's four classes, written as other exporters write them)
// and compares the report with its truth: schemes, each layer's scheme,
// the certain params of every expected finding, and null with a note for
// the params the graph does not fix.
func TestGeneralityForms(t *testing.T) {
	s := schema(t)
	forms := testmodels.GeneralityForms()
	names := map[string]bool{}
	failing := 0
	for _, f := range forms {
		names[f.Name] = true
		t.Run(f.Name, func(t *testing.T) {
			m, err := f.Build(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			r, _, err := audit.AuditModel(m, f.Name, passes.Options{})
			if err != nil {
				t.Fatal(err)
			}
			validate(t, s, r)
			got := strings.Join(generalityDiffs(f.Truth, f.Null, r), "; ")
			for _, alt := range f.Alternatives {
				if got != "" && len(generalityDiffs(alt, nil, r)) == 0 {
					got = ""
				}
			}
			want, listed := generalityFailures[f.Name]
			switch {
			case got == "" && listed:
				t.Errorf("now audits to its truth: remove it from generalityFailures (it said %q)", want)
			case got != "" && !listed:
				t.Errorf("class %d: %s", f.Class, got)
			case got != want:
				t.Errorf("the wrong answer changed: now %q, generalityFailures says %q", got, want)
			}
			if got != "" {
				failing++
			}
		})
	}
	for name := range generalityFailures {
		if !names[name] {
			t.Errorf("generalityFailures lists %s, which is not a generality form", name)
		}
	}
	t.Logf("%d generality forms, %d in the table of expected failures, %d failing", len(forms), len(generalityFailures), failing)
}

// generalityDiffs lists how report r differs from truth: the sorted
// schemes, each truth layer's scheme and the number of layers, and for
// every truth finding the report's finding of its scheme over its layers,
// with each certain param and each param of null (per scheme) reported
// null with a note naming it. No differences is an empty list.
func generalityDiffs(truth testmodels.Truth, null map[string][]string, r *passes.Report) []string {
	var out []string
	if fmt.Sprint(r.Schemes) != fmt.Sprint(truth.Schemes) {
		out = append(out, fmt.Sprintf("schemes %v, want %v", r.Schemes, truth.Schemes))
	}
	if len(r.Layers) != len(truth.Layers) {
		out = append(out, fmt.Sprintf("%d layers, want %d", len(r.Layers), len(truth.Layers)))
	}
	for _, l := range truth.Layers {
		got := "none"
		for _, rl := range r.Layers {
			if rl.Index == l.Index {
				got = rl.Scheme
			}
		}
		if got != l.Scheme {
			out = append(out, fmt.Sprintf("layer %d %s, want %s", l.Index, got, l.Scheme))
		}
	}
	for _, tf := range truth.Findings {
		var f *passes.Finding
		for _, rf := range r.Findings {
			if rf.Scheme == tf.Scheme && slices.Equal(rf.Layers, tf.Layers) {
				f = rf
			}
		}
		if f == nil {
			out = append(out, fmt.Sprintf("no %s finding over layers %v", tf.Scheme, tf.Layers))
			continue
		}
		gp := schemetest.JSONParams(f)
		keys := make([]string, 0, len(tf.Params))
		for k := range tf.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			g, ok := gp[k]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s %v: %s missing", tf.Scheme, tf.Layers, k))
			case !schemetest.Agree(tf.Params[k], g):
				out = append(out, fmt.Sprintf("%s %v: %s %s, want %s", tf.Scheme, tf.Layers, k, short(g), short(tf.Params[k])))
			}
		}
		for _, k := range null[tf.Scheme] {
			g, ok := gp[k]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s %v: %s missing, want null", tf.Scheme, tf.Layers, k))
			case g != nil:
				out = append(out, fmt.Sprintf("%s %v: %s %s, want null", tf.Scheme, tf.Layers, k, short(g)))
			case !slices.ContainsFunc(f.Notes, func(n string) bool { return strings.Contains(n, k) }):
				out = append(out, fmt.Sprintf("%s %v: %s null without a note", tf.Scheme, tf.Layers, k))
			}
		}
	}
	return out
}

// short prints a param value briefly: numbers to 6 digits, lists of more
// than 4 by their first 3 and length.
func short(v any) string {
	switch x := v.(type) {
	case float64:
		return fmt.Sprintf("%.6g", x)
	case []any:
		if len(x) > 4 {
			return fmt.Sprintf("[%s %s %s ... (%d)]", short(x[0]), short(x[1]), short(x[2]), len(x))
		}
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = short(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}
