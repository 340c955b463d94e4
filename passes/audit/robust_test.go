package audit_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/testmodels"
)

// reencode saves and reloads a model (a clean IR after edits).
func reencode(t *testing.T, m *graph.Model) *graph.Model {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out, err := graph.Decode(b, m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func allGraphs(m *graph.Model) []*graph.Graph {
	var out []*graph.Graph
	var walk func(g *graph.Graph)
	walk = func(g *graph.Graph) {
		out = append(out, g)
		for _, n := range g.Nodes() {
			for _, sg := range n.Subgraphs() {
				walk(sg)
			}
		}
	}
	walk(m.Graph)
	for _, f := range m.Functions {
		walk(f.Body)
	}
	return out
}

func displayName(n *graph.Node) string {
	if n.Name != "" {
		return n.Name
	}
	if len(n.Outputs()) > 0 {
		return n.Output(0).Name
	}
	return ""
}

// renameAll gives every node and value a random name; it returns the map
// from old to new node names (as reports print them).
func renameAll(t *testing.T, m *graph.Model, seed uint64) (*graph.Model, map[string]string) {
	rng := rand.New(rand.NewPCG(seed, 7))
	used := map[string]bool{}
	fresh := func(prefix string) string {
		for {
			s := fmt.Sprintf("%s%08x", prefix, rng.Uint32())
			if !used[s] {
				used[s] = true
				return s
			}
		}
	}
	names := map[string]string{}
	for _, g := range allGraphs(m) {
		renamed := map[*graph.Value]bool{}
		rename := func(v *graph.Value) {
			if v != nil && v.Name != "" && !renamed[v] {
				renamed[v] = true
				v.Name = fresh("v")
			}
		}
		for _, v := range g.Inputs {
			rename(v)
		}
		for _, v := range g.Initializers {
			rename(v)
		}
		for _, n := range g.Nodes() {
			old := displayName(n)
			for _, o := range n.Outputs() {
				rename(o)
			}
			n.Name = fresh("n")
			names[old] = n.Name
		}
	}
	return reencode(t, m), names
}

// toConstants turns every initializer into a Constant node.
func toConstants(t *testing.T, m *graph.Model) *graph.Model {
	for _, g := range allGraphs(m) {
		var keep []*graph.Value
		for _, v := range g.Initializers {
			if v.IsGraphInput() || v.IsGraphOutput() || len(g.Nodes()) == 0 {
				keep = append(keep, v)
				continue
			}
			c := g.NewNode("Constant", "", nil, 1, graph.TensorAttr("value", v.Const))
			g.InsertBefore(g.Nodes()[0], c)
			v.ReplaceAllUsesWith(c.Output(0))
		}
		g.Initializers = keep
	}
	return reencode(t, m)
}

var layerKey = regexp.MustCompile(`(?:^|[/.])(layers|layer|h|block|blocks)[._](\d+)(?:[/.]|$)`)

// layerPrefixes name the layers of models whose node names number only
// some of them: the complex-order Transformer (the authors' code) builds
// its first layer as the module encoder_layer and its others in
// encoder.layers.
var layerPrefixes = map[string][]string{"complex_order": {"/encoder_layer/", "/encoder/layers.0/"}}

// wrapLayers moves the nodes of every layer (named like /layers.3/...)
// into a model-local function called once per layer. It returns false
// when the model's node names do not show layers or a layer cannot be cut
// out (it holds subgraphs, or its nodes are not contiguous in dataflow).
func wrapLayers(t *testing.T, name string, m *graph.Model) (*graph.Model, bool) {
	g := m.Graph
	groups := map[string][]*graph.Node{}
	var order []string
	// A layer is named by the path up to its index; only the outermost
	// layers are wrapped (FLOATER's dynamics have layers of their own).
	key := func(n *graph.Node) string {
		loc := layerKey.FindStringIndex(n.Name)
		if loc == nil {
			return ""
		}
		return n.Name[:loc[1]]
	}
	depth := -1
	for _, n := range g.Nodes() {
		if k := key(n); k != "" && (depth < 0 || strings.Count(k, "/") < depth) {
			depth = strings.Count(k, "/")
		}
	}
	outer := func(k string) bool { return strings.Count(k, "/") == depth }
	if ps := layerPrefixes[name]; ps != nil {
		key = func(n *graph.Node) string {
			for _, p := range ps {
				if strings.HasPrefix(n.Name, p) {
					return p
				}
			}
			return ""
		}
		outer = func(string) bool { return true }
	}
	for _, n := range g.Nodes() {
		k := key(n)
		if k == "" || n.OpType == "Constant" || !outer(k) {
			continue
		}
		if len(n.Subgraphs()) > 0 {
			return nil, false
		}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], n)
	}
	if len(order) < 2 {
		return nil, false
	}
	const dom = "onnxpe.test.layers"
	m.SetOpsetVersion(dom, 1)
	for li, k := range order {
		nodes := groups[k]
		in := map[*graph.Node]bool{}
		for _, n := range nodes {
			in[n] = true
		}
		var ins, outs []*graph.Value
		for _, n := range nodes {
			for _, v := range n.Inputs() {
				if v != nil && !in[v.Producer()] && !slices.Contains(ins, v) {
					ins = append(ins, v)
				}
			}
			for _, o := range n.Outputs() {
				if o.Name == "" {
					continue
				}
				used := o.IsGraphOutput()
				for _, u := range o.Uses() {
					if !in[u.Node] {
						used = true
					}
				}
				if used {
					outs = append(outs, o)
				}
			}
		}
		f := m.AddFunction(dom, fmt.Sprintf("layer_%d", li))
		for _, o := range m.Opsets() {
			if o.Domain != dom {
				f.SetOpsetVersion(o.Domain, o.Version)
			}
		}
		vmap := map[*graph.Value]*graph.Value{}
		for _, v := range ins {
			vmap[v] = f.Body.AddInput(v.Name, nil)
		}
		for _, n := range nodes {
			var bins []*graph.Value
			for _, v := range n.Inputs() {
				bins = append(bins, vmap[v])
			}
			nn := f.Body.NewNode(n.OpType, n.Domain, bins, len(n.Outputs()), n.Attrs...)
			f.Body.Append(nn)
			for i, o := range n.Outputs() {
				vmap[o] = nn.Output(i)
			}
		}
		for _, o := range outs {
			f.Body.AddOutput(vmap[o])
		}
		call := g.NewNode(f.Name, dom, ins, len(outs))
		g.InsertBefore(nodes[0], call)
		for i, o := range outs {
			o.ReplaceAllUsesWith(call.Output(i))
		}
		for i := len(nodes) - 1; i >= 0; i-- {
			if err := g.Remove(nodes[i]); err != nil {
				t.Fatalf("layer %s: %v", k, err)
			}
		}
	}
	if err := g.TopoSort(); err != nil {
		return nil, false
	}
	return reencode(t, m), true
}

// reportJSON is a report as JSON values, with node names mapped (nil map:
// nodes dropped).
func reportJSON(t *testing.T, r *passes.Report, names map[string]string, dropNodes bool) string {
	t.Helper()
	r.Model = ""
	for _, f := range r.Findings {
		switch {
		case dropNodes:
			f.Nodes = nil
		case names != nil:
			for i, n := range f.Nodes {
				if m, ok := names[n]; ok {
					f.Nodes[i] = m
				}
			}
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAuditIsRobustToExportNoise audits every corpus model again after
// renaming all nodes and values at random, after turning initializers
// into Constant nodes, and after wrapping every layer in a model-local
// function: the reports must not change (nodes compared through the
// renaming; left out for the wrapped model, whose nodes are the calls).
func TestAuditIsRobustToExportNoise(t *testing.T) {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	type model struct {
		name string
		load func() *graph.Model
	}
	var models []model
	for _, e := range man.Models {
		models = append(models, model{e.Name, func() *graph.Model {
			m, err := graph.Load(e.ModelPath())
			if err != nil {
				t.Fatal(err)
			}
			return m
		}})
	}
	for _, s := range append(testmodels.Synthetics(), testmodels.AxialSynthetics()...) {
		models = append(models, model{s.Name, s.Build})
	}
	wrapped, unwrapped := 0, []string{}
	for i, mo := range models {
		t.Run(mo.name, func(t *testing.T) {
			auditOf := func(m *graph.Model) *passes.Report {
				r, _, err := audit.AuditModel(m, mo.name, passes.Options{})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			base := auditOf(mo.load())
			want := reportJSON(t, base, nil, false)
			rm, names := renameAll(t, mo.load(), uint64(i))
			if got := reportJSON(t, auditOf(rm), invert(names), false); got != want {
				t.Errorf("renamed model:\n got %s\nwant %s", got, want)
			}
			cm := toConstants(t, mo.load())
			for _, v := range cm.Graph.Initializers {
				if !v.IsGraphInput() {
					t.Fatalf("initializer %s left after the conversion to Constant nodes", v.Name)
				}
			}
			if got := reportJSON(t, auditOf(cm), nil, false); got != want {
				t.Errorf("initializers as Constant nodes:\n got %s\nwant %s", got, want)
			}
			wm, ok := wrapLayers(t, mo.name, mo.load())
			if !ok {
				unwrapped = append(unwrapped, mo.name)
				return
			}
			wrapped++
			if len(wm.Functions) < 2 {
				t.Fatalf("%d functions after wrapping the layers", len(wm.Functions))
			}
			if got, want := reportJSON(t, auditOf(wm), nil, true), reportJSON(t, auditOf(mo.load()), nil, true); got != want {
				t.Errorf("layers wrapped in functions:\n got %s\nwant %s", got, want)
			}
		})
	}
	t.Logf("layers wrapped in functions in %d models; not wrapped (no layer names, or layers holding subgraphs): %v", wrapped, unwrapped)
	if wrapped < 20 {
		t.Errorf("only %d models had their layers wrapped", wrapped)
	}
}

func invert(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}
