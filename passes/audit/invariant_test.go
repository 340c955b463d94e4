package audit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/metamorph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/testmodels"
)

// invModel is one model of TestAuditIsInvariant: a corpus export, a real
// model, a Hugging Face export or a Go-built synthetic model.
type invModel struct {
	set, name string
	load      func(t *testing.T) *graph.Model
	// inputs are reference inputs (nil: none; the transforms that need
	// inputs make some of pinned shapes).
	inputs func(m *graph.Model) (map[string]*kernels.Tensor, error)
	// ort maps a level (basic, extended, all) to its saved file, or to
	// the reason there is none ("!" prefixed).
	ort map[string]string
	// prefixes name the layers of models whose node names number only
	// some of them (the complex-order Transformer, the authors' code,
	// builds its first layer as the module encoder_layer and its others
	// in encoder.layers).
	prefixes []string
}

var ortLevels = []string{"basic", "extended", "all"}

// ortSaves reads passes/testdata/ortsaves/<set>/ort_saves.json and maps
// each model's levels to files (checked against their SHA-256) or
// reasons. lower gives a model's file of a level kept elsewhere (the
// corpus's basic and extended saves beside its models), "" for none.
func ortSaves(t *testing.T, set string, lower func(name, level string) string) map[string]map[string]string {
	t.Helper()
	dir := filepath.Join(testmodels.RealModelsDir(), "..", "ortsaves", set)
	b, err := os.ReadFile(filepath.Join(dir, "ort_saves.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Models map[string]map[string]struct {
			Bytes  int64  `json:"bytes"`
			SHA256 string `json:"sha256"`
			SameAs string `json:"same_as"`
			Error  string `json:"error"`
		} `json:"models"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for name, levels := range rec.Models {
		out[name] = map[string]string{}
		for level, r := range levels {
			if r.Error != "" {
				out[name][level] = "!ONNX Runtime does not load the model: " + r.Error
				continue
			}
			path := filepath.Join(dir, name, "ort_"+level+".onnx")
			if r.SameAs != "" {
				path = filepath.Join(dir, name, "ort_"+r.SameAs+".onnx")
				if _, err := os.Stat(path); err != nil && lower != nil {
					path = lower(name, r.SameAs)
				}
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%s %s: %v", name, level, err)
			}
			if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != r.SHA256 {
				t.Fatalf("%s: not the save ort_saves.json records for %s %s", path, name, level)
			}
			out[name][level] = path
		}
	}
	return out
}

// invModels lists every model of the test: the corpus, the real models,
// the Hugging Face exports and the Go-built synthetic models.
func invModels(t *testing.T) []invModel {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	loadFile := func(path string) func(t *testing.T) *graph.Model {
		return func(t *testing.T) *graph.Model {
			m, err := graph.LoadWith(path, graph.LoadOptions{AllowMissingExternal: true})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	var out []invModel
	corpusDir := map[string]string{}
	for _, e := range man.Models {
		corpusDir[e.Name] = filepath.Dir(e.ModelPath())
	}
	corpusAll := ortSaves(t, "corpus", func(name, level string) string {
		return filepath.Join(corpusDir[name], "ort_"+level+".onnx")
	})
	for _, e := range man.Models {
		dir := filepath.Dir(e.ModelPath())
		ort := map[string]string{
			"basic":    filepath.Join(dir, "ort_basic.onnx"),
			"extended": filepath.Join(dir, "ort_extended.onnx"),
			"all":      corpusAll[e.Name]["all"],
		}
		var prefixes []string
		if e.Name == "complex_order" {
			prefixes = []string{"/encoder_layer/", "/encoder/layers.0/"}
		}
		td := e.TestDataDir()
		out = append(out, invModel{set: "corpus", name: e.Name, load: loadFile(e.ModelPath()), ort: ort, prefixes: prefixes,
			inputs: func(m *graph.Model) (map[string]*kernels.Tensor, error) { return kernels.ReadInputs(td, m) }})
	}
	real := ortSaves(t, "realmodels", nil)
	dirs, err := testmodels.RealModelFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dirs {
		name := filepath.Base(filepath.Dir(p))
		out = append(out, invModel{set: "real", name: name, load: loadFile(p), ort: real[name]})
	}
	hf := ortSaves(t, "hfmodels", nil)
	for _, h := range hfModels(t) {
		io := filepath.Join(testmodels.HFModelsDir(), "_ortio", h.Name+".in.json")
		out = append(out, invModel{set: "hf", name: h.Name, load: loadFile(filepath.Join(h.Dir, "model.onnx")), ort: hf[h.Name],
			inputs: func(m *graph.Model) (map[string]*kernels.Tensor, error) {
				in, err := readORTIO(io)
				if err != nil {
					return nil, err
				}
				feeds := map[string]*kernels.Tensor{}
				for _, v := range kernels.FeedInputs(m) {
					feeds[v.Name] = in[v.Name]
				}
				return feeds, nil
			}})
	}
	for _, s := range append(testmodels.Synthetics(), testmodels.AxialSynthetics()...) {
		build := s.Build
		out = append(out, invModel{set: "go", name: s.Name, load: func(*testing.T) *graph.Model { return build() },
			ort: map[string]string{"basic": "!Go-built: no ONNX Runtime save", "extended": "!Go-built: no ONNX Runtime save", "all": "!Go-built: no ONNX Runtime save"}})
	}
	return out
}

// cmpRule says how a transform's report is compared with the original's:
// what differences the transform allows.
type cmpRule struct {
	// names maps the transform's node names back to the original's (nil:
	// as they are); dropNodes leaves nodes out; sortNodes compares them as
	// sets (another order of the graph may list them in another order);
	// subsetNodes accepts a part of the original's (nodes folded away).
	names map[string]string
	// values maps value names back (in notes and subgraph names).
	values                           map[string]string
	dropNodes, sortNodes, subsetNode bool
	// stored accepts a finding turning from computed to stored (computed
	// true to false, max_positions from null to a number); fused accepts
	// fused false to true; dropNotes leaves the notes out.
	stored, fused, dropNotes bool
}

// invTransform is one transformation: apply returns the transformed
// model and how to compare, or an error wrapping
// metamorph.ErrNotApplicable.
type invTransform struct {
	name    string
	allowed string // the differences it allows, for the table's legend
	apply   func(t *testing.T, mo invModel, seed uint64, base *passes.Report) (*graph.Model, cmpRule, error)
	// verify runs the transformed model beside the original on reference
	// inputs (the transformation must keep what the model computes).
	verify bool
}

// invOpset is the opset the opset transform upgrades to.
const invOpset = 21

var invTransforms = []invTransform{
	{name: "rename", allowed: "none (node names mapped back)", verify: true,
		apply: func(t *testing.T, mo invModel, seed uint64, _ *passes.Report) (*graph.Model, cmpRule, error) {
			m, names, values, err := metamorph.Rename(mo.load(t), seed)
			return m, cmpRule{names: invert(names), values: invert(values)}, err
		}},
	{name: "shuffle", allowed: "the order of the nodes listed", verify: true,
		apply: func(t *testing.T, mo invModel, seed uint64, _ *passes.Report) (*graph.Model, cmpRule, error) {
			m, _, err := metamorph.Shuffle(mo.load(t), seed)
			return m, cmpRule{sortNodes: true}, err
		}},
	{name: "einsum", allowed: "none", verify: true,
		apply: func(t *testing.T, mo invModel, _ uint64, _ *passes.Report) (*graph.Model, cmpRule, error) {
			m, _, err := metamorph.MatMulToEinsum(mo.load(t))
			return m, cmpRule{}, err
		}},
	{name: "opset", allowed: "none", verify: true,
		apply: func(t *testing.T, mo invModel, _ uint64, _ *passes.Report) (*graph.Model, cmpRule, error) {
			m, err := metamorph.UpgradeOpset(mo.load(t), invOpset)
			return m, cmpRule{}, err
		}},
	{name: "external", allowed: "none", verify: true,
		apply: func(t *testing.T, mo invModel, _ uint64, _ *passes.Report) (*graph.Model, cmpRule, error) {
			m := mo.load(t)
			for _, g := range metamorph.Graphs(m) {
				for _, v := range g.Initializers {
					if v.Const != nil && v.Const.IsExternal() && v.Const.External().Missing() {
						return nil, cmpRule{}, fmt.Errorf("%w: the model's external weights are absent", metamorph.ErrNotApplicable)
					}
				}
			}
			out, _, err := metamorph.ExternalData(m, t.TempDir())
			return out, cmpRule{}, err
		}},
	{name: "if", allowed: "nodes (the branch's may be named by the If)", verify: true,
		apply: func(t *testing.T, mo invModel, _ uint64, _ *passes.Report) (*graph.Model, cmpRule, error) {
			m, err := metamorph.WrapInIf(mo.load(t))
			return m, cmpRule{dropNodes: true}, err
		}},
	{name: "inline", allowed: "none (inlined nodes mapped to their calls; of a model without functions, its outlined layers inlined again: nodes then left out)", verify: true,
		apply: func(t *testing.T, mo invModel, _ uint64, _ *passes.Report) (*graph.Model, cmpRule, error) {
			m := mo.load(t)
			rule := cmpRule{}
			if len(m.Functions) == 0 {
				var err error
				if m, _, err = metamorph.OutlineLayers(m, mo.prefixes); err != nil {
					return nil, rule, err
				}
				rule.dropNodes = true
			}
			m, _, origin, err := metamorph.InlineFunctions(m)
			rule.names = origin
			return m, rule, err
		}},
	{name: "outline", allowed: "nodes (the calls replace them)", verify: true,
		apply: func(t *testing.T, mo invModel, _ uint64, _ *passes.Report) (*graph.Model, cmpRule, error) {
			m, _, err := metamorph.OutlineLayers(mo.load(t), mo.prefixes)
			return m, cmpRule{dropNodes: true}, err
		}},
	{name: "constants", allowed: "none", verify: true,
		apply: func(t *testing.T, mo invModel, _ uint64, _ *passes.Report) (*graph.Model, cmpRule, error) {
			m, _, err := metamorph.ToConstants(mo.load(t))
			return m, cmpRule{}, err
		}},
	{name: "fold", allowed: "computed -> stored (computed false; max_positions and grid set, the inputs' shapes being pinned; position_source gone), folded nodes gone", verify: true,
		apply: foldTransform},
	{name: "ort_basic", allowed: "nodes; fused false -> true; notes", apply: ortTransform("basic")},
	{name: "ort_extended", allowed: "nodes; fused false -> true; notes", apply: ortTransform("extended")},
	{name: "ort_all", allowed: "nodes; fused false -> true; notes", apply: ortTransform("all")},
}

func ortTransform(level string) func(t *testing.T, mo invModel, _ uint64, _ *passes.Report) (*graph.Model, cmpRule, error) {
	return func(t *testing.T, mo invModel, _ uint64, _ *passes.Report) (*graph.Model, cmpRule, error) {
		path := mo.ort[level]
		if path == "" {
			t.Fatalf("no ONNX Runtime %s save recorded for %s", level, mo.name)
		}
		if why, ok := strings.CutPrefix(path, "!"); ok {
			return nil, cmpRule{}, fmt.Errorf("%w: %s", metamorph.ErrNotApplicable, why)
		}
		m, err := graph.LoadWith(path, graph.LoadOptions{AllowMissingExternal: true})
		return m, cmpRule{dropNodes: true, fused: true, dropNotes: true}, err
	}
}

// invPinDefault is the size of a dynamic dimension the fold transform
// pins when the model has no reference inputs.
const invPinDefault = 8

// foldTransform pins the model's inputs to static shapes (its reference
// inputs' or invPinDefault) and folds the nodes its findings name into
// stored tables.
func foldTransform(t *testing.T, mo invModel, _ uint64, base *passes.Report) (*graph.Model, cmpRule, error) {
	m := mo.load(t)
	var nodes []string
	for _, f := range base.Findings {
		if f.Subgraph == "" {
			nodes = append(nodes, f.Nodes...)
		}
	}
	if len(nodes) == 0 {
		return nil, cmpRule{}, fmt.Errorf("%w: no finding names nodes of the main graph", metamorph.ErrNotApplicable)
	}
	var in map[string]*kernels.Tensor
	var shapes map[string][]int
	if mo.inputs != nil {
		var err error
		if in, err = mo.inputs(m); err != nil {
			t.Fatal(err)
		}
		shapes = map[string][]int{}
		for name, v := range in {
			shapes[name] = v.Shape
		}
		pinned, err := metamorph.PinShapes(m, nil, invPinDefault)
		if err != nil {
			return nil, cmpRule{}, fmt.Errorf("%w: %v", metamorph.ErrNotApplicable, err)
		}
		for _, v := range kernels.FeedInputs(m) {
			d := make([]int64, len(shapes[v.Name]))
			for i, s := range shapes[v.Name] {
				d[i] = int64(s)
			}
			if len(d) != len(pinned[v.Name]) {
				t.Fatalf("input %s: reference shape %v for rank %d", v.Name, shapes[v.Name], len(pinned[v.Name]))
			}
			v.Type = graph.TensorType(v.Type.ElemType(), graph.Dims(d...))
		}
	} else {
		var err error
		if shapes, err = metamorph.PinShapes(m, nil, invPinDefault); err != nil {
			return nil, cmpRule{}, fmt.Errorf("%w: %v", metamorph.ErrNotApplicable, err)
		}
		if in, err = metamorph.SampleInputs(m, shapes, 1); err != nil {
			return nil, cmpRule{}, fmt.Errorf("%w: %v", metamorph.ErrNotApplicable, err)
		}
	}
	out, _, _, err := metamorph.FoldValues(m, nodes, in)
	if err != nil && !errors.Is(err, metamorph.ErrNotApplicable) {
		err = fmt.Errorf("%w: the executor does not fold the values: %v", metamorph.ErrNotApplicable, err)
	}
	return out, cmpRule{subsetNode: true, stored: true}, err
}

// invAllowed are differences a transform makes to what the file holds,
// not audit errors: model -> transform -> the differences, with the
// reason. They are left out before the comparison with invExpected (and
// printed).
var invAllowed = map[string]map[string][]string{
	// Folded at its pinned length (24 tokens) the decoder's T5 bias is a
	// stored [1, heads, 24, 24] table, which holds the distances below 24
	// only: 32 buckets with max_distance 111..140 and 33 with 126..161
	// group them alike, so the file no longer fixes either.
	"t5_decoder": {"fold": {
		"t5_relative_bias#0: max_distance 128 -> null",
		"t5_relative_bias#0: num_buckets 32 -> null",
		`t5_relative_bias#0: notes [] -> ["num_buckets: the stored bias holds relative positions up to 23, which 32-33 partition as its values do" "max_distance: with num_buckets open, values from 111 to 161"]`,
	}},
	// Folded at its pinned length, XLNet's relative sinusoid is a stored
	// table of the distances klen .. -qlen+1 of that length (24 tokens for
	// the corpus's test inputs, 10 for the Hugging Face export's): a clamp
	// at or beyond them would not change a row, so the file no longer says
	// there is none (clamp_len stays null, with a note saying so).
	"relative_xlnet": {"fold": {
		`relative_sinusoidal#0: notes [] -> ["clamp_len: the stored sinusoid holds the distances 24 .. -23 of 24 keys and 24 queries only; a clamp beyond them would not show in it"]`,
	}},
	"hf-xlnet-relative-sinusoidal": {"fold": {
		`relative_sinusoidal#0: notes [] -> ["clamp_len: the stored sinusoid holds the distances 10 .. -9 of 10 keys and 10 queries only; a clamp beyond them would not show in it"]`,
	}},
	"hf-t5-relative-bias":             {"fold": hfT5Folded},
	"hf-mt5-relative-bias-logits":     {"fold": hfT5Folded},
	"hf-umt5-relative-bias-per-layer": {"fold": hfT5Folded},
	// ONNX Runtime folds the unrolled integration into the table of its
	// states (the manifest's ort_truth), as the fold transform does: the
	// solver and step are no longer in the file (the fold keeps the notes,
	// which say so).
	"floater_unrolled": {
		"fold": {`floater#0: form "unrolled" -> "table"`, `floater#0: solver "rk4_3_8" -> null`, "floater#0: step 0.01 -> null",
			`floater#0: notes [] -> ["solver, step: the states are a stored table (the integration was folded before the model was saved)"]`},
		"ort_basic":    {`floater#0: form "unrolled" -> "table"`, `floater#0: solver "rk4_3_8" -> null`, "floater#0: step 0.01 -> null"},
		"ort_extended": {`floater#0: form "unrolled" -> "table"`, `floater#0: solver "rk4_3_8" -> null`, "floater#0: step 0.01 -> null"},
		"ort_all":      {`floater#0: form "unrolled" -> "table"`, `floater#0: solver "rk4_3_8" -> null`, "floater#0: step 0.01 -> null"},
	},
}

// hfT5Folded is what folding takes from the T5 exports of hfmodels: at
// the reference inputs' lengths (9 encoder, 6 decoder tokens) the stored
// biases hold distances below 9 and 6, each with its own value, which
// any large enough bucket count gives with any max_distance; the
// decoder's is stored with its causal mask, which hides the keys after
// the query, whose bias tells the directions apart.
var hfT5Folded = []string{
	"t5_relative_bias#0: max_distance 128 -> null",
	"t5_relative_bias#0: num_buckets 32 -> null",
	`t5_relative_bias#0: notes [] -> ["buckets: every relative position the stored bias holds has a value of its own, so no bucketing shows in the graph: T5's bias with enough buckets gives it, as would a learned bias per distance" "num_buckets: the stored bias holds relative positions up to 8, which every even count from 18 on partition as its values do" "max_distance: with num_buckets open, any value (with enough buckets every distance held is exact)"]`,
	"t5_relative_bias#1: bidirectional false -> null",
	"t5_relative_bias#1: max_distance 128 -> null",
	"t5_relative_bias#1: num_buckets 32 -> null",
	`t5_relative_bias#1: notes [] -> ["buckets: every relative position the stored bias holds has a value of its own, so no bucketing shows in the graph: T5's bias with enough buckets gives it, as would a learned bias per distance" "bidirectional: the stored bias masks every key after its query (a causal mask stored with it), and the bias of those keys is what tells T5's directions apart: both reproduce it" "num_buckets: the stored bias holds relative positions up to 5, which every count from 6 on (causal) or every even count from 12 on (bidirectional) partition as its values do" "max_distance: with num_buckets open, any value (with enough buckets every distance held is exact)"]`,
}

// invExpected are today's differences of TestAuditIsInvariant: model ->
// transform -> the differences, exactly (issue 21 fixes them). The test
// fails when a listed difference disappears or a new one appears.
var invExpected = map[string]map[string][]string{}

// invMinApplied is how many models each transform must apply to (a
// transform that stops applying tests nothing).
var invMinApplied = map[string]int{
	"rename": 89, "shuffle": 83, "einsum": 51, "opset": 84, "external": 81, "if": 80, "inline": 60,
	"outline": 59, "constants": 85, "fold": 38, "ort_basic": 74, "ort_extended": 74, "ort_all": 74,
}

// TestAuditIsInvariant audits every model of the corpus, the real models,
// the Hugging Face exports and the Go-built models under every
// transformation of internal/metamorph and every ONNX Runtime level, and
// compares each report with the original's (the differences each
// transform allows are in invTransforms). Transformations that change the
// model (not ONNX Runtime's saves) are checked to keep what it computes on
// reference inputs. It prints the models x transformations table and
// every difference; the differences must be exactly invExpected's.
func TestAuditIsInvariant(t *testing.T) {
	models := invModels(t)
	if testing.Short() {
		var sub []invModel
		for i, mo := range models {
			if i%4 == 0 {
				sub = append(sub, mo)
			}
		}
		names := make([]string, len(sub))
		for i, mo := range sub {
			names[i] = mo.name
		}
		t.Logf("-short: %d of %d models (every fourth): %s", len(sub), len(models), strings.Join(names, ", "))
		models = sub
	}
	type cell struct {
		status string // ok, n/a, DIFF
		diffs  []string
		why    string
	}
	var mu sync.Mutex
	table := map[string]map[string]cell{}
	applied := map[string]int{}
	seen := map[string]bool{}
	for i, mo := range models {
		seen[mo.name] = true
		t.Run(mo.set+"/"+mo.name, func(t *testing.T) {
			t.Parallel()
			auditOf := func(m *graph.Model) (*passes.Report, error) {
				r, _, err := audit.AuditModel(m, mo.name, passes.Options{})
				return r, err
			}
			base, err := auditOf(mo.load(t))
			if err != nil {
				t.Fatal(err)
			}
			row := map[string]cell{}
			for _, tr := range invTransforms {
				m, rule, err := tr.apply(t, mo, uint64(i), base)
				if errors.Is(err, metamorph.ErrNotApplicable) {
					row[tr.name] = cell{status: "n/a", why: strings.TrimPrefix(err.Error(), metamorph.ErrNotApplicable.Error()+": ")}
					continue
				}
				if err != nil {
					t.Errorf("%s: the transformation failed: %v", tr.name, err)
					row[tr.name] = cell{status: "ERR", why: err.Error()}
					continue
				}
				if tr.verify && mo.inputs != nil {
					if err := sameOutputs(mo.load(t), m, mo.inputs); err != nil {
						t.Errorf("%s: the transformed model computes something else: %v", tr.name, err)
					}
				}
				var diffs []string
				if r, err := auditOf(m); err != nil {
					diffs = []string{"the audit failed: " + err.Error()}
				} else {
					diffs = reportDiffs(base, r, rule)
				}
				var allowedHere []string
				for _, d := range diffs {
					if slices.Contains(invAllowed[mo.name][tr.name], d) {
						allowedHere = append(allowedHere, d)
					}
				}
				if len(allowedHere) != len(invAllowed[mo.name][tr.name]) {
					t.Errorf("%s: invAllowed lists %q; the differences are %q", tr.name, invAllowed[mo.name][tr.name], diffs)
				}
				diffs = slices.DeleteFunc(diffs, func(d string) bool { return slices.Contains(allowedHere, d) })
				for _, d := range allowedHere {
					t.Logf("%s: allowed (invAllowed): %s", tr.name, d)
				}
				c := cell{status: "ok", diffs: diffs}
				if len(diffs) > 0 {
					c.status = "DIFF"
				}
				row[tr.name] = c
				want := invExpected[mo.name][tr.name]
				if !slices.Equal(diffs, want) {
					t.Errorf("%s: differences\n got %q\nwant %q (invExpected)", tr.name, diffs, want)
				}
			}
			for tr := range invExpected[mo.name] {
				if _, ok := row[tr]; !ok {
					t.Errorf("invExpected lists transform %s, which the test does not have", tr)
				}
			}
			mu.Lock()
			table[mo.name] = row
			for k, c := range row {
				if c.status != "n/a" {
					applied[k]++
				}
			}
			mu.Unlock()
		})
	}
	t.Cleanup(func() {
		for name := range invExpected {
			if !seen[name] && !testing.Short() {
				t.Errorf("invExpected lists %s, which is not a model of the test", name)
			}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%-48s", "model")
		for _, tr := range invTransforms {
			fmt.Fprintf(&b, " %-9s", strings.TrimPrefix(tr.name, "ort_"))
		}
		b.WriteString("\n")
		var diffs, nas []string
		counts := map[string]int{}
		for _, mo := range models {
			row := table[mo.name]
			fmt.Fprintf(&b, "%-48s", mo.set+"/"+mo.name)
			for _, tr := range invTransforms {
				c := row[tr.name]
				fmt.Fprintf(&b, " %-9s", c.status)
				counts[c.status]++
				for _, d := range c.diffs {
					diffs = append(diffs, fmt.Sprintf("%s / %s: %s", mo.name, tr.name, d))
				}
				if c.status == "n/a" || c.status == "ERR" {
					nas = append(nas, fmt.Sprintf("%s / %s: %s", mo.name, tr.name, c.why))
				}
			}
			b.WriteString("\n")
		}
		t.Logf("models x transformations (ort levels under basic, extended, all):\n%s", b.String())
		for _, tr := range invTransforms {
			t.Logf("%s allows: %s", tr.name, tr.allowed)
		}
		t.Logf("not applicable (%d):\n  %s", len(nas), strings.Join(nas, "\n  "))
		t.Logf("differences (%d):\n  %s", len(diffs), strings.Join(diffs, "\n  "))
		entries := 0
		for _, m := range invExpected {
			entries += len(m)
		}
		t.Logf("audit invariance over %d models x %d transformations: %d passed, %d failed, %d skipped (n/a); invExpected lists %d (issue 21)",
			len(models), len(invTransforms), counts["ok"], counts["DIFF"]+counts["ERR"], counts["n/a"], entries)
		if !testing.Short() {
			for _, tr := range invTransforms {
				if applied[tr.name] < invMinApplied[tr.name] {
					t.Errorf("%s applied to %d models, fewer than %d", tr.name, applied[tr.name], invMinApplied[tr.name])
				}
			}
		}
	})
}

// sameOutputs runs a and b on the inputs (matched by position: a
// transform may rename them) and compares every output.
func sameOutputs(a, b *graph.Model, inputs func(m *graph.Model) (map[string]*kernels.Tensor, error)) error {
	ins, err := inputs(a)
	if err != nil {
		return err
	}
	run := func(m *graph.Model, byPos []*kernels.Tensor) ([]*kernels.Tensor, error) {
		feeds := map[string]*kernels.Tensor{}
		for i, v := range kernels.FeedInputs(m) {
			if i >= len(byPos) {
				return nil, fmt.Errorf("%d inputs, %d fed", len(kernels.FeedInputs(m)), len(byPos))
			}
			feeds[v.Name] = byPos[i]
		}
		s, err := kernels.NewSession(m, kernels.Options{})
		if err != nil {
			return nil, err
		}
		out, err := s.Run(feeds)
		if err != nil {
			return nil, err
		}
		var res []*kernels.Tensor
		for _, o := range m.Graph.Outputs {
			res = append(res, out[o.Name])
		}
		return res, nil
	}
	var byPos []*kernels.Tensor
	for _, v := range kernels.FeedInputs(a) {
		byPos = append(byPos, ins[v.Name])
	}
	wa, err := run(a, byPos)
	if err != nil {
		return fmt.Errorf("the original: %w", err)
	}
	wb, err := run(b, byPos)
	if err != nil {
		return fmt.Errorf("the transformed model: %w", err)
	}
	if len(wa) != len(wb) {
		return fmt.Errorf("%d outputs, want %d", len(wb), len(wa))
	}
	for i := range wa {
		x, y := wa[i], wb[i]
		if x == nil || y == nil || !slices.Equal(x.Shape, y.Shape) {
			return fmt.Errorf("output %d: %v, want %v", i, y, x)
		}
		if x.IsSequence() || x.IsNone() {
			continue
		}
		xv, yv := x.Float64s(), y.Float64s()
		for k := range xv {
			if d := math.Abs(xv[k] - yv[k]); !(d <= 1e-4+1e-4*math.Abs(xv[k])) && !(math.IsNaN(xv[k]) && math.IsNaN(yv[k])) && xv[k] != yv[k] {
				return fmt.Errorf("output %d element %d: %g, want %g", i, k, yv[k], xv[k])
			}
		}
	}
	return nil
}

// reportDiffs lists the differences between an original report and a
// transform's, beyond what rule allows, in a stable order.
func reportDiffs(base, got *passes.Report, rule cmpRule) []string {
	var out []string
	if fmt.Sprint(base.Schemes) != fmt.Sprint(got.Schemes) {
		out = append(out, fmt.Sprintf("schemes %v -> %v", base.Schemes, got.Schemes))
	}
	if a, b := passes.SchemeRuns(base.Layers, "-"), passes.SchemeRuns(got.Layers, "-"); a != b {
		out = append(out, fmt.Sprintf("layers %q -> %q", a, b))
	}
	bySchemeOf := func(r *passes.Report) (map[string][]*passes.Finding, []string) {
		m := map[string][]*passes.Finding{}
		var order []string
		for _, f := range r.Findings {
			if _, ok := m[f.Scheme]; !ok {
				order = append(order, f.Scheme)
			}
			m[f.Scheme] = append(m[f.Scheme], f)
		}
		return m, order
	}
	bf, border := bySchemeOf(base)
	gf, gorder := bySchemeOf(got)
	schemes := border
	for _, s := range gorder {
		if !slices.Contains(schemes, s) {
			schemes = append(schemes, s)
		}
	}
	for _, s := range schemes {
		a, b := bf[s], gf[s]
		for i := 0; i < max(len(a), len(b)); i++ {
			at := fmt.Sprintf("%s#%d", s, i)
			switch {
			case i >= len(b):
				out = append(out, fmt.Sprintf("%s (layers %s) lost", at, passes.LayerRanges(a[i].Layers, "-", ",")))
				continue
			case i >= len(a):
				out = append(out, fmt.Sprintf("%s new: %s", at, findingString(b[i])))
				continue
			}
			out = append(out, findingDiffs(at, a[i], b[i], rule)...)
		}
	}
	return out
}

func findingDiffs(at string, a, b *passes.Finding, rule cmpRule) []string {
	var out []string
	if la, lb := passes.LayerRanges(a.Layers, "-", ","), passes.LayerRanges(b.Layers, "-", ","); la != lb {
		out = append(out, fmt.Sprintf("%s: layers %s -> %s", at, la, lb))
	}
	if a.Fused != b.Fused && !(rule.fused && !a.Fused) {
		out = append(out, fmt.Sprintf("%s: fused %v -> %v", at, a.Fused, b.Fused))
	}
	if mapped := mapText(b.Subgraph, rule); a.Subgraph != mapped {
		out = append(out, fmt.Sprintf("%s: subgraph %q -> %q", at, a.Subgraph, b.Subgraph))
	}
	pa, pb := schemetest.JSONParams(a), schemetest.JSONParams(b)
	var keys []string
	for k := range pa {
		keys = append(keys, k)
	}
	for k := range pb {
		if _, ok := pa[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		x, inA := pa[k]
		y, inB := pb[k]
		if inA && inB && schemetest.Agree(x, y) && schemetest.Agree(y, x) {
			continue
		}
		if rule.stored && k == "computed" && x == true && y == false {
			continue
		}
		if rule.stored && (k == "max_positions" || k == "grid") && x == nil && y != nil {
			continue // the pinned shapes fix the rows and the grid
		}
		if rule.stored && k == "position_source" && !inB {
			continue // the positions, folded, come from no input
		}
		show := func(v any, in bool) string {
			if !in {
				return "(absent)"
			}
			if l, ok := v.([]any); ok && len(l) > 8 {
				return fmt.Sprintf("%s... (%d entries)", strings.TrimSuffix(jsonString(l[:8]), "]"), len(l))
			}
			return jsonString(v)
		}
		out = append(out, fmt.Sprintf("%s: %s %s -> %s", at, k, show(x, inA), show(y, inB)))
	}
	if !rule.dropNodes {
		na, nb := a.Nodes, mapNames(b.Nodes, rule.names)
		if rule.sortNodes {
			na, nb = slices.Sorted(slices.Values(na)), slices.Sorted(slices.Values(nb))
		}
		ok := slices.Equal(na, nb)
		if rule.subsetNode {
			ok = true
			for _, n := range nb {
				if !slices.Contains(na, n) {
					ok = false
				}
			}
		}
		if !ok {
			out = append(out, fmt.Sprintf("%s: nodes %s", at, nodesDiff(na, nb)))
		}
	}
	if !rule.dropNotes {
		nb := make([]string, len(b.Notes))
		for i, n := range b.Notes {
			nb[i] = mapText(n, rule)
		}
		if !slices.Equal(a.Notes, nb) {
			out = append(out, fmt.Sprintf("%s: notes %q -> %q", at, a.Notes, nb))
		}
	}
	return out
}

// mapText puts the original node and value names back into a text (a
// note, a subgraph's name) of a renamed model's report.
func mapText(s string, rule cmpRule) string {
	for _, m := range []map[string]string{rule.names, rule.values} {
		if len(m) == 0 || s == "" {
			continue
		}
		var pairs []string
		for k, v := range m {
			if strings.Contains(s, k) {
				pairs = append(pairs, k, v)
			}
		}
		s = strings.NewReplacer(pairs...).Replace(s)
	}
	return s
}

// mapNames maps node names back to the original's, dropping repeats (the
// nodes inlined from one call map to the call).
func mapNames(ns []string, names map[string]string) []string {
	if names == nil {
		return ns
	}
	var out []string
	for _, n := range ns {
		if o, ok := names[n]; ok {
			n = o
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// nodesDiff describes two node lists' difference in a line: sizes, then
// at most three names lost and three new, or the first position where
// the order differs.
func nodesDiff(a, b []string) string {
	var lost, added []string
	for _, n := range a {
		if !slices.Contains(b, n) {
			lost = append(lost, n)
		}
	}
	for _, n := range b {
		if !slices.Contains(a, n) {
			added = append(added, n)
		}
	}
	short := func(s []string) string {
		if len(s) > 3 {
			return fmt.Sprintf("%q and %d more", s[:3], len(s)-3)
		}
		return fmt.Sprintf("%q", s)
	}
	if len(lost) == 0 && len(added) == 0 {
		for i := range a {
			if a[i] != b[i] {
				return fmt.Sprintf("%d, the same set in another order (first at %d: %q -> %q)", len(a), i, a[i], b[i])
			}
		}
	}
	return fmt.Sprintf("%d -> %d (lost %s, new %s)", len(a), len(b), short(lost), short(added))
}

func invert(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}
