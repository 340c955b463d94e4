package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/onnxpe/onnxpe/verify"
)

var updateREADME = flag.Bool("update-readme", false, "rewrite the README's report fields from the JSON Schemas")

// documentedSchemas are the report schemas the README documents field by
// field, in its order.
var documentedSchemas = []struct {
	path, title string
	doc         []byte
}{
	{"passes/report.schema.json", "The audit report", passes.ReportSchema},
	{"verify/report.schema.json", "The verify report", verify.ReportSchema},
	{"verify/precision.schema.json", "The precision report", verify.PrecisionSchema},
}

// schemaProperties calls f for every property of the schema node, with
// its path (as JSON pointers, for messages), except the properties of
// if/then/else, which restate the constraints of properties declared
// beside them.
func schemaProperties(node any, path string, f func(path, name string, prop map[string]any)) {
	switch n := node.(type) {
	case map[string]any:
		for _, k := range sortedKeys(n) {
			v := n[k]
			switch k {
			case "if", "then", "else":
				continue
			case "properties":
				props, _ := v.(map[string]any)
				for _, name := range sortedKeys(props) {
					p, _ := props[name].(map[string]any)
					f(path, name, p)
					schemaProperties(p, path+"/properties/"+name, f)
				}
			default:
				schemaProperties(v, path+"/"+k, f)
			}
		}
	case []any:
		for i, v := range n {
			schemaProperties(v, fmt.Sprintf("%s/%d", path, i), f)
		}
	}
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestReportSchemasDescribeEveryProperty: every property of the audit,
// verify and precision report schemas has a description (what it means,
// its unit, when it is null): a field added without one fails here.
func TestReportSchemasDescribeEveryProperty(t *testing.T) {
	for _, s := range documentedSchemas {
		var doc any
		if err := json.Unmarshal(s.doc, &doc); err != nil {
			t.Fatalf("%s: %v", s.path, err)
		}
		n := 0
		schemaProperties(doc, "#", func(path, name string, prop map[string]any) {
			n++
			if d, _ := prop["description"].(string); strings.TrimSpace(d) == "" {
				t.Errorf("%s: %s/properties/%s has no description", s.path, path, name)
			}
		})
		if n < 15 {
			t.Errorf("%s: only %d properties found", s.path, n)
		}
		t.Logf("%s: %d properties", s.path, n)
	}
}

const (
	reportFieldsBegin = "<!-- report fields: generated from the JSON Schemas by go test ./internal/cli -run TestREADMEReportFields -update-readme; do not edit -->\n"
	reportFieldsEnd   = "<!-- end of the report fields -->\n"
)

// TestREADMEReportFields: the README's report fields are the schemas'
// descriptions, generated from them (-update-readme rewrites them), so
// the two cannot drift.
func TestREADMEReportFields(t *testing.T) {
	readme := filepath.Join(filepath.Dir(testmodels.Dir()), "README.md")
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i, j := strings.Index(text, reportFieldsBegin), strings.Index(text, reportFieldsEnd)
	if i < 0 || j < i {
		t.Fatalf("the README has no generated report fields (between %q and %q)", strings.TrimSpace(reportFieldsBegin), strings.TrimSpace(reportFieldsEnd))
	}
	want := reportFieldsMarkdown(t)
	got := text[i+len(reportFieldsBegin) : j]
	if got == want {
		return
	}
	if *updateREADME {
		if err := os.WriteFile(readme, []byte(text[:i+len(reportFieldsBegin)]+want+text[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the report fields of %s", readme)
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for k := 0; k < len(gl) || k < len(wl); k++ {
		if k >= len(gl) || k >= len(wl) || gl[k] != wl[k] {
			g, w := "(end)", "(end)"
			if k < len(gl) {
				g = gl[k]
			}
			if k < len(wl) {
				w = wl[k]
			}
			t.Fatalf("the README's report fields differ from the schemas at their line %d:\nREADME:  %s\nschemas: %s\n(go test ./internal/cli -run TestREADMEReportFields -update-readme rewrites them)", k+1, g, w)
		}
	}
}

// reportFieldsMarkdown writes the schemas' properties as markdown tables:
// for each schema its description, a table of its fields in the order
// the schema declares them (nested ones after their parent, by their
// path: findings[].layers), and the params of each scheme.
func reportFieldsMarkdown(t *testing.T) string {
	var out bytes.Buffer
	for _, s := range documentedSchemas {
		v, err := decodeOrdered(json.NewDecoder(bytes.NewReader(s.doc)))
		if err != nil {
			t.Fatalf("%s: %v", s.path, err)
		}
		doc := v.(*ordered)
		defs, _ := doc.get("$defs").(*ordered)
		fmt.Fprintf(&out, "\n#### %s (`%s`)\n\n%s\n\n", s.title, s.path, doc.get("description"))
		fmt.Fprintln(&out, "| field | type | meaning |")
		fmt.Fprintln(&out, "|---|---|---|")
		writeFields(&out, doc, "", defs, map[string]bool{})
		if sc, ok := defs.get("scheme").(*ordered); ok {
			for _, v := range sc.get("enum").([]any) {
				def, ok := defs.get(v.(string)).(*ordered)
				if !ok {
					continue
				}
				fmt.Fprintf(&out, "\n`params` of `%s`:\n\n", v)
				fmt.Fprintln(&out, "| param | type | meaning |")
				fmt.Fprintln(&out, "|---|---|---|")
				writeFields(&out, def, "", defs, map[string]bool{})
			}
		}
	}
	out.WriteString("\n")
	return out.String()
}

// ordered is a JSON object with its keys in the order written.
type ordered struct {
	keys []string
	m    map[string]any
}

func (o *ordered) get(k string) any {
	if o == nil {
		return nil
	}
	return o.m[k]
}

// decodeOrdered decodes one JSON value, objects as *ordered.
func decodeOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &ordered{m: map[string]any{}}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			o.keys = append(o.keys, k.(string))
			o.m[k.(string)] = v
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		var l []any
		for dec.More() {
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		_, err := dec.Token()
		return l, err
	}
	return tok, nil
}

// writeFields writes a row per property of node, each followed by the
// rows of the objects it holds (through $ref, items,
// additionalProperties, a oneOf branch) under its path.
func writeFields(out *bytes.Buffer, node *ordered, prefix string, defs *ordered, seen map[string]bool) {
	props, _ := node.get("properties").(*ordered)
	if props == nil {
		return
	}
	for _, name := range props.keys {
		p, _ := props.get(name).(*ordered)
		d, _ := p.get("description").(string)
		fmt.Fprintf(out, "| `%s` | %s | %s |\n", prefix+name, cell(schemaType(p, defs)), cell(d))
		for _, sub := range nested(p, defs) {
			if !seen[sub.key] || sub.key == "" {
				seen[sub.key] = true
				writeFields(out, sub.obj, prefix+name+sub.suffix, defs, seen)
				delete(seen, sub.key)
			}
		}
	}
}

type nestedObj struct {
	obj    *ordered
	suffix string // "." for an object, "[]." for the items of an array, ".TYPE." for additionalProperties
	key    string // the $defs name it came from ("" for an inline object)
}

// nested are the objects with properties a property holds: itself
// (inline or through $ref), its items, its additionalProperties, the
// object branch of a oneOf.
func nested(p *ordered, defs *ordered) []nestedObj {
	var out []nestedObj
	deref := func(n *ordered) (*ordered, string) {
		if r, ok := n.get("$ref").(string); ok {
			name := strings.TrimPrefix(r, "#/$defs/")
			d, _ := defs.get(name).(*ordered)
			return d, name
		}
		return n, ""
	}
	add := func(n any, suffix string) {
		if o, ok := n.(*ordered); ok {
			if d, name := deref(o); d != nil && d.get("properties") != nil {
				out = append(out, nestedObj{d, suffix, name})
			}
		}
	}
	add(p, ".")
	add(p.get("items"), "[].")
	add(p.get("additionalProperties"), ".TYPE.")
	if one, ok := p.get("oneOf").([]any); ok {
		for _, b := range one {
			add(b, ".")
		}
	}
	return out
}

// schemaType says a property's type in a few words.
func schemaType(p *ordered, defs *ordered) string {
	if r, ok := p.get("$ref").(string); ok {
		name := strings.TrimPrefix(r, "#/$defs/")
		d, _ := defs.get(name).(*ordered)
		switch {
		case name == "scheme":
			return "scheme"
		case d == nil:
			return name
		case d.get("properties") != nil:
			return "object"
		}
		return schemaType(d, defs)
	}
	if e, ok := p.get("enum").([]any); ok {
		var vs []string
		for _, v := range e {
			if v == nil {
				vs = append(vs, "null")
			} else {
				vs = append(vs, fmt.Sprint(v))
			}
		}
		return strings.Join(vs, " | ")
	}
	if c, ok := p.m["const"]; ok {
		return fmt.Sprint(c)
	}
	if one, ok := p.get("oneOf").([]any); ok {
		var ts []string
		for _, b := range one {
			ts = append(ts, schemaType(b.(*ordered), defs))
		}
		return strings.Join(ts, " or ")
	}
	var types []string
	switch t := p.get("type").(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			types = append(types, x.(string))
		}
	}
	for i, t := range types {
		if it, ok := p.get("items").(*ordered); ok && t == "array" {
			types[i] = "array of " + schemaType(it, defs)
		}
	}
	if len(types) == 0 {
		return "any"
	}
	return strings.Join(types, " or ")
}

// cell escapes a table cell's pipes.
func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
