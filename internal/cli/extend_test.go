package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/onnxpe/onnxpe/verify"
)

// ortRuns says whether the checks run ONNX Runtime in this test binary
// (the ort build with a library): the runs_at_n check must then say so.
func ortRuns() bool { return verify.ORTAvailable() && os.Getenv("ONNXPE_ORT_LIB") != "" }

// extendCase is one extension to make and check.
type extendCase struct {
	model string   // a corpus model, or a Go-built one (synthetic, deploy form)
	to    int      // N
	args  []string // --method and the rest
}

func (c extendCase) String() string {
	return strings.TrimSpace(fmt.Sprintf("%s to %d %s", c.model, c.to, strings.Join(c.args, " ")))
}

// modelFile is the path of a corpus model, or a Go-built model saved in
// dir.
func modelFile(t *testing.T, dir, name string) string {
	t.Helper()
	if p := corpusModel(name); fileExists(p) {
		return p
	}
	if p := filepath.Join(dir, name+".onnx"); fileExists(p) {
		return p // saved by the test
	}
	var m *graph.Model
	for _, s := range testmodels.Synthetics() {
		if s.Name == name {
			m = s.Build()
		}
	}
	for _, f := range testmodels.DeployForms {
		if string(f) == name {
			m = testmodels.BuildDeploy(f, testmodels.DefaultDeploy)
		}
	}
	if m == nil {
		t.Fatalf("no model %s", name)
	}
	p := filepath.Join(dir, name+".onnx")
	if !fileExists(p) {
		if err := m.Save(p, graph.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// extendOK runs onnxpe extend, which must pass its checks and write the
// output; it returns the report and the output's path.
func extendOK(t *testing.T, dir string, c extendCase) (*extendReport, string) {
	t.Helper()
	in := modelFile(t, dir, c.model)
	out := filepath.Join(dir, strings.ReplaceAll(c.String(), " ", "_")+".onnx")
	args := append([]string{"extend", in, "-o", out, "--to", strconv.Itoa(c.to), "--json", "--threads", "1"}, c.args...)
	code, js, errOut := runCLI(t, args...)
	var rep extendReport
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("%s: exit %d, no JSON report: %s %s", c, code, errOut, js)
	}
	if code != 0 || !rep.Written || !fileExists(out) {
		t.Fatalf("%s: exit %d, written %v: %s %s", c, code, rep.Written, rep.Summary, errOut)
	}
	for _, ch := range rep.Checks {
		if ch.Status != checkPass {
			t.Fatalf("%s: check %s %s: %s", c, ch.Name, ch.Status, ch.Summary)
		}
	}
	names := checkNames(&rep)
	last := rep.Checks[len(rep.Checks)-1]
	if last.Name != "runs_at_n" || !strings.Contains(last.Summary, fmt.Sprintf("(%d positions)", c.to)) {
		t.Fatalf("%s: checks %v, last %s", c, names, last.Summary)
	}
	if ortRuns() != strings.Contains(last.Summary, "ONNX Runtime ran them too and agrees") {
		t.Fatalf("%s: ONNX Runtime available %v, the check says: %s", c, ortRuns(), last.Summary)
	}
	if !ortRuns() && !strings.Contains(last.Summary, "ONNX Runtime check not run") {
		t.Fatalf("%s: the check does not say ONNX Runtime was not run: %s", c, last.Summary)
	}
	if rep.Extension.NewMax != c.to {
		t.Fatalf("%s: new max %d", c, rep.Extension.NewMax)
	}
	return &rep, out
}

func checkNames(r *extendReport) []string {
	var s []string
	for _, ch := range r.Checks {
		s = append(s, ch.Name)
	}
	return s
}

// ropeCase is a RoPE model of the corpus and how to extend it 4x: its
// original maximum (the rows of its tables; 32 given with
// --original-max-positions for RoPE computed in the graph, whose trained
// length the graph does not hold, and for rope_yarn and rope_llama3, whose
// rules name 4096 and 8192: 4x those is more than the shared machine runs
// in a test), the flags that says so, and its base.
type ropeCase struct {
	model string
	orig  int
	base  float64
	flags []string
	// stored: the cos/sin are stored tables (the output keeps tables of N
	// rows but for dynamic-ntk, which computes them for every call).
	stored bool
}

var ropeCorpus = []ropeCase{
	{model: "rope_llama", orig: 32, base: 10000, flags: []string{"--original-max-positions", "32"}},
	{model: "rope_llama_opset14", orig: 32, base: 10000, flags: []string{"--original-max-positions", "32"}},
	{model: "rope_llama_fp16", orig: 32, base: 10000, flags: []string{"--original-max-positions", "32"}},
	{model: "rope_qwen2", orig: 32, base: 1e6, flags: []string{"--original-max-positions", "32"}},
	{model: "rope_kvcache", orig: 32, base: 10000, flags: []string{"--original-max-positions", "32"}},
	// Rotary dim 8 of base 500000: from 32, llama3's bands and YaRN's ramp
	// put no frequency between kept and divided, and 32, 64 and 128 give
	// the same model; from 256 one falls between, which fixes the length.
	{model: "llama4_nope", orig: 256, base: 500000, flags: []string{"--original-max-positions", "256"}},
	{model: "rope_yarn", orig: 32, base: 10000, flags: []string{"--original-max-positions", "32", "--replace-scaling", "replace"}},
	{model: "rope_llama3", orig: 32, base: 500000, flags: []string{"--original-max-positions", "32", "--replace-scaling", "replace"}},
	{model: "rope_ntk", orig: 16, base: 10000, flags: []string{"--replace-scaling", "replace"}},
	{model: "rope_linear", orig: 128, base: 10000, flags: []string{"--replace-scaling", "replace"}, stored: true},
	{model: "rope_mrope", orig: 32, base: 1e6, flags: []string{"--original-max-positions", "32"}},
	{model: "rope_gptj", orig: 64, base: 10000, stored: true},
	{model: "rope_neox", orig: 64, base: 10000, stored: true},
}

// wantRule is what the audit of a model extended 4x from orig with method
// must report, written out from the rules' published defaults (null where
// the graph does not fix a param).
func wantRule(method string, orig int) map[string]any {
	switch method {
	case "linear":
		return map[string]any{"scaling": "linear", "factor": 4.0}
	case "ntk":
		return map[string]any{"scaling": "ntk", "factor": 4.0, "dynamic": false}
	case "dynamic-ntk":
		return map[string]any{"scaling": "ntk", "factor": 4.0, "dynamic": true, "original_max_positions": float64(orig)}
	case "yarn":
		return map[string]any{"scaling": "yarn", "factor": 4.0, "original_max_positions": float64(orig), "beta_fast": 32.0, "beta_slow": 1.0,
			"attention_factor": 0.1*math.Log(4) + 1}
	case "llama3":
		// The rule reads the three only through orig/low and orig/high: the
		// audit leaves them null (its read-back checks the wavelengths).
		return map[string]any{"scaling": "llama3", "factor": 4.0, "original_max_positions": nil, "low_freq_factor": nil, "high_freq_factor": nil}
	}
	panic(method)
}

// auditRoPE audits a file and returns the params of its RoPE finding(s).
func auditRoPE(t *testing.T, path string) []map[string]any {
	t.Helper()
	code, out, errOut := runCLI(t, "audit", path, "--json")
	if code != 0 {
		t.Fatalf("audit %s: exit %d: %s", path, code, errOut)
	}
	var a auditJSON
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatal(err)
	}
	var ps []map[string]any
	for _, f := range a.Findings {
		if f.Scheme == "rope" {
			ps = append(ps, f.Params)
		}
	}
	return ps
}

// checkAudit checks that the extended model audits to the rule with its
// exact parameters and the model's base.
func checkAudit(t *testing.T, c extendCase, out string, method string, orig int, base float64, table bool) {
	t.Helper()
	ps := auditRoPE(t, out)
	if len(ps) == 0 {
		t.Fatalf("%s: the output has no RoPE", c)
	}
	for _, p := range ps {
		want := wantRule(method, orig)
		want["base"] = base
		if table {
			want["max_positions"] = float64(c.to)
		}
		if method == "yarn" && p["original_max_positions"] == nil {
			// YaRN's ramp depends on the length only through length/beta:
			// the audit leaves the length and betas null when other
			// settings give the same ramp, which must be the rule's.
			yarnRampIs(t, c, p, orig, base)
			delete(want, "original_max_positions")
			delete(want, "beta_fast")
			delete(want, "beta_slow")
		}
		if got, ok := p["original_max_positions"].(float64); ok && want["original_max_positions"] != nil && got != float64(orig) {
			// With few rotary pairs, lengths YaRN's ramp or llama3's bands
			// cannot tell apart give the same model: accept another when it
			// gives the same frequencies.
			rd := int(p["rotary_dim"].(float64))
			u := rope.Rule{Method: method, Factor: 4, Orig: orig, Low: 1, High: 4, BetaFast: 32, BetaSlow: 1}
			v := u
			v.Orig = int(got)
			a, _ := rope.ReferenceRoPE(u, base, rd, 0)
			b, _ := rope.ReferenceRoPE(v, base, rd, 0)
			if !slices.Equal(a, b) {
				t.Fatalf("%s: the audit reports original_max_positions %v, want %d (params %v)", c, got, orig, p)
			}
			t.Logf("%s: the audit reads original_max_positions %v for %d: the same frequencies with rotary dim %d", c, got, orig, rd)
			want["original_max_positions"] = got
		}
		for k, v := range want {
			got := p[k]
			if f, ok := v.(float64); ok {
				g, ok := got.(float64)
				if !ok || math.Abs(g-f) > 1e-9*math.Abs(f) {
					t.Fatalf("%s: the audit reports %s = %v, want %v (params %v)", c, k, got, v, p)
				}
				continue
			}
			if got != v {
				t.Fatalf("%s: the audit reports %s = %v, want %v (params %v)", c, k, got, v, p)
			}
		}
	}
}

// yarnRampIs checks that the correction range an audit reports with a
// null original length gives, over the rotary pairs, the ramp of Hugging
// Face's find_correction_range for orig and the published betas (32, 1),
// and that the betas are null too.
func yarnRampIs(t *testing.T, c extendCase, p map[string]any, orig int, base float64) {
	t.Helper()
	cr, _ := p["correction_range"].([]any)
	if p["beta_fast"] != nil || p["beta_slow"] != nil || len(cr) != 2 {
		t.Fatalf("%s: original_max_positions null with betas %v, %v and correction_range %v", c, p["beta_fast"], p["beta_slow"], p["correction_range"])
	}
	rd := p["rotary_dim"].(float64)
	find := func(rot float64) float64 { return rd * math.Log(float64(orig)/(rot*2*math.Pi)) / (2 * math.Log(base)) }
	ramp := func(k, lo, hi float64) float64 {
		if lo == hi {
			hi += 0.001
		}
		return min(max((k-lo)/(hi-lo), 0), 1)
	}
	lo, hi := max(math.Floor(find(32)), 0), min(math.Ceil(find(1)), rd-1)
	for k := 0.0; k < rd/2; k++ {
		if got := ramp(k, cr[0].(float64), cr[1].(float64)); math.Abs(got-ramp(k, lo, hi)) > 1e-9 {
			t.Fatalf("%s: the correction range %v ramps pair %g by %g, the rule's [%g, %g] by %g", c, cr, k, got, lo, hi, ramp(k, lo, hi))
		}
	}
}

// extendRefused runs onnxpe extend, which must exit 2 with one line
// naming the reason and write nothing.
func extendRefused(t *testing.T, dir string, c extendCase, reason string) {
	t.Helper()
	in := modelFile(t, dir, c.model)
	out := filepath.Join(dir, "refused.onnx")
	args := append([]string{"extend", in, "-o", out, "--to", strconv.Itoa(c.to)}, c.args...)
	code, stdout, errOut := runCLI(t, args...)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != 2 || len(lines) != 1 || !strings.Contains(errOut, reason) || stdout != "" {
		t.Fatalf("%s: exit %d, want 2 with one line saying %q: %q %q", c, code, reason, errOut, stdout)
	}
	if fileExists(out) {
		t.Fatalf("%s: refused, but wrote %s", c, out)
	}
}

// ropeMatrix extends every RoPE model of the corpus 4x with every method
// (or, with only, those named) and checks the output's audit.
func ropeMatrix(t *testing.T, only map[string][]string) int {
	dir := t.TempDir()
	n := 0
	for _, rc := range ropeCorpus {
		for _, method := range rewrite.RoPEMethods {
			if only != nil && !slices.Contains(only[rc.model], method) {
				continue
			}
			c := extendCase{model: rc.model, to: 4 * rc.orig, args: append([]string{"--method", method}, rc.flags...)}
			t.Run(rc.model+"/"+method, func(t *testing.T) {
				rep, out := extendOK(t, dir, c)
				if !slices.Equal(checkNames(rep), []string{"reference", "audit", "runs_at_n"}) {
					t.Fatalf("checks %v", checkNames(rep))
				}
				// Dynamic NTK computes the cos/sin for every call: no
				// stored table is left.
				checkAudit(t, c, out, method, rc.orig, rc.base, rc.stored && method != rewrite.MethodDynamicNTK)
			})
			n++
		}
	}
	return n
}

// TestExtendRoPE: a representative part of the RoPE matrix (each method
// on a computed RoPE, each form once); TestExtendRoPEORT runs all of it
// with ONNX Runtime.
func TestExtendRoPE(t *testing.T) {
	n := ropeMatrix(t, map[string][]string{
		"rope_llama": rewrite.RoPEMethods,
		"rope_gptj":  {"linear", "dynamic-ntk"},
		"rope_yarn":  {"llama3"},
		"rope_ntk":   {"dynamic-ntk"},
	})
	if n != 9 {
		t.Fatalf("%d cases", n)
	}
}

// learnedCase extends a learned table of n positions 4x and checks the
// acceptance: the first n positions bit for bit, outputs at lengths up to
// n exactly equal, 4n runs. The table keeps its positions on axis
// (0 for [positions, dim], 1 stored transposed) from row offset.
func learnedCase(t *testing.T, dir, model string, n, axis, offset int) {
	c := extendCase{model: model, to: 4 * n, args: []string{"--method", "hierarchical"}}
	rep, out := extendOK(t, dir, c)
	if !slices.Equal(checkNames(rep), []string{"unchanged", "runs_at_n"}) || !strings.Contains(rep.Checks[0].Summary, "exactly equal") {
		t.Fatalf("%s: checks %v: %s", c, checkNames(rep), rep.Checks[0].Summary)
	}
	orig, err := graph.Load(modelFile(t, dir, model))
	if err != nil {
		t.Fatal(err)
	}
	ext, err := graph.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	// The table the audit names, bit for bit at its trained positions,
	// in the model's layout.
	table := rep.Extension.Items[0].Edits[0].Where
	a, b := orig.Graph.Lookup(table), ext.Graph.Lookup(table)
	if a == nil || b == nil || a.Const == nil || b.Const == nil {
		t.Fatalf("%s: table %q not found", c, table)
	}
	ra, _ := a.Const.RawBytes()
	rb, _ := b.Const.RawBytes()
	want := slices.Clone(a.Const.Dims())
	if int(want[axis]) != offset+n {
		t.Fatalf("%s: table %q %v: not %d positions from %d on axis %d", c, table, want, n, offset, axis)
	}
	want[axis] = int64(offset + 4*n)
	outer := 1
	for _, d := range want[:axis] {
		outer *= int(d)
	}
	ob := len(ra) / outer                    // bytes per block before the positions' axis
	nb := ob / (offset + n) * (offset + 4*n) // the same, enlarged
	same := slices.Equal(b.Const.Dims(), want) && len(rb) == outer*nb
	for o := 0; o < outer && same; o++ {
		same = slices.Equal(ra[o*ob:(o+1)*ob], rb[o*nb:o*nb+ob])
	}
	if !same {
		t.Fatalf("%s: the first %d positions of %s are not the trained table bit for bit (dims %v, want %v)", c, n, table, b.Const.Dims(), want)
	}
	// Outputs at lengths up to n, compared exactly by this test too.
	zero := 0.0
	vr, err := verify.Compare(t.Context(), orig, ext, verify.Options{Seqs: []int{1, 7, n}, Policy: verify.Policy{Rtol: &zero, Atol: &zero}, Threads: 1})
	if err != nil || !vr.Equal {
		t.Fatalf("%s: outputs at lengths 1, 7, %d: %v %+v", c, n, err, vr)
	}
	for _, s := range vr.Sets {
		for _, o := range s.Outputs {
			if o.MaxAbsErr != 0 || o.Compared == 0 {
				t.Fatalf("%s: set %s output %s differs by %g (%d compared)", c, s.Name, o.Name, o.MaxAbsErr, o.Compared)
			}
		}
	}
}

// TestExtendLearned: learned_gpt2 and learned_bert extended to 4x their
// table (TestExtendLearnedORT with ONNX Runtime), and the Go-built tables
// stored transposed ([dim, positions], read by Gather on axis 1, from 0
// and from RoBERTa's offset 2), written back transposed.
func TestExtendLearned(t *testing.T) {
	dir := t.TempDir()
	for _, m := range []string{"learned_gpt2", "learned_bert"} {
		t.Run(m, func(t *testing.T) { learnedCase(t, dir, m, 64, 0, 0) })
	}
	for _, c := range transposedTables {
		t.Run(c.model, func(t *testing.T) {
			saveTransposed(t, dir, c)
			learnedCase(t, dir, c.model, c.n, 1, c.offset)
		})
	}
}

// transposedTable is a model of testmodels.LearnedTransposed: its table
// of rows columns holds n positions from column offset (RoBERTa's
// positions counted from the ids when fromIDs).
type transposedTable struct {
	model     string
	rows      int64
	fromIDs   bool
	n, offset int
}

var transposedTables = []transposedTable{
	{"learned_transposed", 72, false, 72, 0},
	{"learned_transposed_offset", 66, true, 64, 2},
}

// saveTransposed saves c's model in dir, where modelFile finds it.
func saveTransposed(t *testing.T, dir string, c transposedTable) {
	t.Helper()
	p := filepath.Join(dir, c.model+".onnx")
	if fileExists(p) {
		return
	}
	m, _ := testmodels.LearnedTransposed(c.rows, c.fromIDs)
	if err := m.Save(p, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
}

// tableCases are the sinusoidal, ALiBi and T5 models (and the other
// schemes computed for any position) with their maximum
// (the rows of their tables; 128, verify's default long sequence, for
// those computed for any position).
var tableCases = []struct {
	model string
	max   int
	// changed: the model has a table or constant to enlarge.
	changed bool
}{
	{"sinusoidal_interleaved", 256, true},
	{"sinusoidal_marian", 64, true},
	{"sinusoidal_fairseq", 128, true},
	{"sinusoidal_interleaved_computed", 128, false},
	{"sinusoidal_interleaved_scatter", 128, false},
	{"sinusoidal_concat", 128, false},
	{"alibi_mpt", 32, true},
	{"alibi_bloom", 128, false},
	{"t5_encoder", 128, false},
	{"t5_decoder", 128, false},
	// The rest of the family: computed for any position.
	{"relative_transfo_xl", 128, false},
	{"relative_xlnet", 128, false},
	{"disentangled_deberta", 128, false},
	{"disentangled_deberta_unshared", 128, false},
	{"complex_order", 128, false},
}

func tableMatrix(t *testing.T, only []string) int {
	dir := t.TempDir()
	n := 0
	for _, tc := range tableCases {
		if only != nil && !slices.Contains(only, tc.model) {
			continue
		}
		n++
		t.Run(tc.model, func(t *testing.T) {
			rep, _ := extendOK(t, dir, extendCase{model: tc.model, to: 4 * tc.max})
			if rep.Changed != tc.changed || !slices.Equal(checkNames(rep), []string{"unchanged", "runs_at_n"}) {
				t.Fatalf("changed %v, checks %v", rep.Changed, checkNames(rep))
			}
			if tc.changed && (rep.Extension.OldMax == nil || *rep.Extension.OldMax != tc.max) {
				t.Fatalf("old max %v", rep.Extension.OldMax)
			}
		})
	}
	return n
}

// TestExtendTables: sinusoidal tables, ALiBi and T5 (a part;
// TestExtendTablesORT runs all with ONNX Runtime).
func TestExtendTables(t *testing.T) {
	if n := tableMatrix(t, []string{"sinusoidal_fairseq", "alibi_mpt", "t5_decoder"}); n != 3 {
		t.Fatalf("%d cases", n)
	}
}

// TestExtendRequests: bad requests exit 2 with one line and write nothing.
func TestExtendRequests(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		extendCase
		why string
	}{
		{extendCase{"learned_gpt2", 64, nil}, "not longer than"},
		{extendCase{"learned_gpt2", 32, nil}, "not longer than"},
		{extendCase{"learned_gpt2", 256, []string{"--method", "yarn"}}, "has no RoPE"},
		{extendCase{"rope_llama", 256, []string{"--method", "hierarchical"}}, "does not fit RoPE"},
		{extendCase{"rope_llama", 256, []string{"--method", "linear", "--original-max-positions", "64", "--factor", "1"}}, "larger than 1"},
		{extendCase{"rope_llama", 256, []string{"--method", "linear"}}, "--original-max-positions"},
		{extendCase{"rope_yarn", 1 << 16, []string{"--method", "linear"}}, "--replace-scaling"},
		{extendCase{"rope_gptj", 256, []string{"--method", "bogus"}}, "unknown --method"},
		{extendCase{"learned_gpt2", 256, []string{"--alpha", "1.5"}}, "--alpha"},
		{extendCase{"rope_axial_vit", 256, []string{"--method", "linear"}}, "patch grid"},
		{extendCase{"floater_unrolled", 128, nil}, "integrated over 32 positions"},
		{extendCase{"floater_loop", 128, nil}, "integrated over 32 positions"},
	} {
		extendRefused(t, dir, c.extendCase, c.why)
	}
	// Usage.
	if code, _, errOut := runCLI(t, "extend", corpusModel("learned_gpt2"), "--to", "256"); code != 2 || !strings.Contains(errOut, "-o OUT") {
		t.Fatalf("no -o: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "extend", corpusModel("learned_gpt2"), "-o", filepath.Join(dir, "x.onnx")); code != 2 || !strings.Contains(errOut, "--to N") {
		t.Fatalf("no --to: exit %d %s", code, errOut)
	}
}

// TestExtendDryRun prints the plan and writes nothing.
func TestExtendDryRun(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "o.onnx")
	code, js, errOut := runCLI(t, "extend", corpusModel("rope_gptj"), "-o", out, "--to", "256", "--method", "yarn", "--dry-run", "--json")
	var rep extendReport
	if err := json.Unmarshal([]byte(js), &rep); err != nil || code != 0 {
		t.Fatalf("exit %d %v: %s", code, err, errOut)
	}
	if rep.Written || !rep.DryRun || len(rep.Checks) != 0 || fileExists(out) || *rep.Extension.OldMax != 64 {
		t.Fatalf("%+v", rep)
	}
	it := rep.Extension.Items[0]
	if it.Method != "yarn" || it.Form != "stored" || it.Params["factor"] != 4.0 || len(it.Edits) == 0 {
		t.Fatalf("plan %+v", it)
	}
	code, text, _ := runCLI(t, "extend", corpusModel("rope_gptj"), "--to", "256", "--method", "yarn", "--dry-run")
	if code != 0 || !strings.Contains(text, "64 -> 256 positions") || !strings.Contains(text, "plan only") {
		t.Fatalf("exit %d:\n%s", code, text)
	}
}

// TestExtendCheckFailureWritesNothing: an extension that breaks a check
// is not written and exits 1.
func TestExtendCheckFailureWritesNothing(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		model, check string
		args         []string
	}{
		{"learned_gpt2", "unchanged", nil},
		{"rope_gptj", "reference", []string{"--method", "linear"}},
	} {
		out := filepath.Join(dir, c.model+".onnx")
		var stdout, stderr strings.Builder
		opts := &extendOptions{IO: &IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr}, In: corpusModel(c.model), Out: out, Seed: 1, Threads: 1}
		opts.Ext = rewrite.ExtendOptions{To: 256}
		if len(c.args) > 0 {
			opts.Ext.Method = c.args[1]
		}
		// Perturb the first row of the enlarged table (or cos/sin cache).
		opts.tamper = func(m *graph.Model) {
			for _, v := range m.Graph.Initializers {
				d := v.Const.Dims()
				if len(d) >= 2 && d[len(d)-2] == 256 && v.Const.DataType() == graph.Float {
					f, _ := v.Const.Float64s()
					f[1] += 0.25
					nt, _ := graph.TensorFromFloat64(v.Name, graph.Float, d, f)
					v.Const = nt
					return
				}
			}
			t.Fatal("no table to perturb")
		}
		err := extendRun(opts)
		if exitCode(err) != 1 || fileExists(out) || !strings.Contains(stdout.String(), "check "+c.check) || !strings.Contains(err.Error(), "nothing written") {
			t.Fatalf("%s: %v (exit %d), wrote %v:\n%s", c.model, err, exitCode(err), fileExists(out), stdout.String())
		}
	}
}

// TestExtendCompose: a rule composed with the model's own (linear 4 on
// rope_linear's linear 2) is applied to its scaled frequencies; no
// published formula describes the result, so the reference check says it
// was not run, and the audit reads linear 8.
func TestExtendCompose(t *testing.T) {
	dir := t.TempDir()
	in := corpusModel("rope_linear")
	out := filepath.Join(dir, "o.onnx")
	code, js, errOut := runCLI(t, "extend", in, "-o", out, "--to", "512", "--method", "linear", "--replace-scaling", "compose", "--json", "--threads", "1")
	var rep extendReport
	if err := json.Unmarshal([]byte(js), &rep); err != nil || code != 0 || !rep.Written {
		t.Fatalf("exit %d %v: %s %s", code, err, errOut, js)
	}
	status := map[string]*extendCheck{}
	for _, ch := range rep.Checks {
		status[ch.Name] = ch
	}
	if status["reference"].Status != checkNotRun || !strings.Contains(status["reference"].Summary, "composed") || status["runs_at_n"].Status != checkPass {
		t.Fatalf("checks %+v %+v", status["reference"], status["runs_at_n"])
	}
	ps := auditRoPE(t, out)
	if len(ps) != 1 || ps[0]["scaling"] != "linear" || ps[0]["factor"] != 8.0 || ps[0]["max_positions"] != 512.0 {
		t.Fatalf("audit %v", ps)
	}
}

// TestExtendAuditCheckFails: frequencies that are not the rule's fail the
// reference and the audit checks.
func TestExtendAuditCheckFails(t *testing.T) {
	var stdout, stderr strings.Builder
	out := filepath.Join(t.TempDir(), "o.onnx")
	opts := &extendOptions{IO: &IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr}, In: corpusModel("rope_llama"), Out: out, Seed: 1, Threads: 1, JSON: true}
	opts.Ext = rewrite.ExtendOptions{To: 128, Method: "linear", OriginalMax: 32}
	opts.tamper = func(m *graph.Model) {
		for _, v := range m.Graph.Initializers {
			if d := v.Const.Dims(); slices.Equal(d, []int64{1, 8, 1}) && v.Const.DataType() == graph.Float {
				f, _ := v.Const.Float64s()
				for i := range f {
					f[i] *= 0.75 // linear 5.33 instead of 4
				}
				nt, _ := graph.TensorFromFloat64(v.Name, graph.Float, d, f)
				v.Const = nt
				return
			}
		}
		t.Fatal("no frequencies to perturb")
	}
	err := extendRun(opts)
	var rep extendReport
	if jerr := json.Unmarshal([]byte(stdout.String()), &rep); jerr != nil || exitCode(err) != 1 || fileExists(out) {
		t.Fatalf("%v %v:\n%s", err, jerr, stdout.String())
	}
	status := map[string]string{}
	for _, ch := range rep.Checks {
		status[ch.Name] = ch.Status
		if ch.Name == "audit" && !strings.Contains(ch.Summary, "factor 5.333333 (expected 4)") {
			t.Fatalf("audit check: %s", ch.Summary)
		}
	}
	if status["reference"] != checkFail || status["audit"] != checkFail || status["runs_at_n"] != checkPass {
		t.Fatalf("statuses %v", status)
	}
}

// TestExtendAgainstLlamaBuilder: the Go-built Llama forms (computed,
// stored tables shared by the layers, fused RotaryEmbedding of both
// domains) extended with the static rules equal the same model built by
// testmodels' Llama builder with the rule's frequencies (and YaRN's
// attention factor) and caches of N positions: the same weights, the rule
// applied by the builder.
func TestExtendAgainstLlamaBuilder(t *testing.T) {
	dir := t.TempDir()
	forms := map[string]testmodels.LlamaConfig{}
	for _, s := range []struct {
		name string
		edit func(*testmodels.LlamaConfig)
	}{
		{"llama_opset18", func(c *testmodels.LlamaConfig) { c.Opset = 18 }},
		{"llama_cache_shared", func(c *testmodels.LlamaConfig) { c.Opset, c.RoPE = 20, testmodels.RopeCacheTable }},
		{"llama_fused_ms", func(c *testmodels.LlamaConfig) { c.RoPE = testmodels.RopeFusedMS }},
		{"llama_fused_onnx", func(c *testmodels.LlamaConfig) { c.Opset, c.RoPE = 23, testmodels.RopeFusedONNX }},
	} {
		cfg := testmodels.DefaultLlama
		s.edit(&cfg)
		forms[s.name] = cfg
	}
	cases := []struct {
		model, method string
	}{
		{"llama_opset18", "ntk"}, {"llama_cache_shared", "llama3"}, {"llama_fused_ms", "yarn"}, {"llama_fused_onnx", "linear"},
	}
	for _, c := range cases {
		t.Run(c.model+"/"+c.method, func(t *testing.T) {
			cfg := forms[c.model]
			orig, to := 128, 512
			args := []string{"--method", c.method}
			if cfg.RoPE == testmodels.RopeComputed {
				orig, to = 32, 128
				args = append(args, "--original-max-positions", "32")
			}
			_, out := extendOK(t, dir, extendCase{model: c.model, to: to, args: args})
			hd := cfg.Hidden / cfg.Heads
			u := rope.Rule{Method: c.method, Factor: 4, Orig: orig, Low: 1, High: 4, BetaFast: 32, BetaSlow: 1}
			inv, amp := rope.ReferenceRoPE(u, cfg.RopeBase, hd, 0)
			ref := cfg
			ref.InvFreq, ref.RopeScale, ref.MaxPositions = inv, amp, to
			refModel := testmodels.Llama(ref)
			ext, err := graph.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			vr, err := verify.Compare(t.Context(), ext, refModel, verify.Options{Hints: verify.Hints{MaxPositions: to}, Threads: 1})
			if err != nil || !vr.Equal {
				t.Fatalf("the extended model and the builder's: %v %+v", err, vr)
			}
			long := false
			for _, s := range vr.Sets {
				long = long || s.Spec != nil && s.Spec.Seq == to
			}
			if !long {
				t.Fatalf("no set at %d positions: %+v", to, vr.Sets)
			}
		})
	}
}

// TestExtendRoPEAtRealLengths extends from 2048 positions to 8192, the
// lengths users ask for, one model per form: the Hugging Face export of
// Llama computing its RoPE in the graph (float32 angles: before the
// reference reproduced the graph's arithmetic, its float64 angles differed
// from the model's own by up to 2.5e-4 rad at position 8190 and the
// reference check refused yarn, ntk and llama3 — 14 logits off by up to
// 6e-6 for yarn), and narrow Go-built Llamas with cos/sin tables of 2048
// rows (gathered by position; caches of com.microsoft and ONNX
// RotaryEmbedding), one layer of two heads, so that the runs at 8192
// positions stay short. Every check passes, and the reference check
// compared positions up to 8191. dynamic-ntk on a computed RoPE, a table
// and RotaryEmbedding caches: before the audit probed fourfold lengths up
// to 100000 (and 1000) or 64 times its probe, it saw the rule change at one
// length only and read the output as LongRoPE (original_max_positions
// ~98000), and the audit check refused every dynamic-ntk extension from
// 2048 positions. dynamic-ntk on narrow float16 Llamas (cos/sin computed
// in float32 and cast to float16, as Hugging Face's fp16 exports; float16
// caches of com.microsoft and ONNX RotaryEmbedding, as ONNX Runtime
// GenAI's fp16 builds): before 4f6b3a9 the audit probed half types only up
// to 256 + its probe, never saw the rule switch of the computed form and
// read no scaling, and the audit check refused it (the corpus model
// rope_llama_fp16 showed it, at 30-70 s a run; passes'
// TestDynamicNTKInHalf still audits it).
func TestExtendRoPEAtRealLengths(t *testing.T) {
	if testing.Short() {
		t.Skip("extends Llamas to 8192 positions (a minute; -short): make test runs it, TestExtendRoPE checks the same at short lengths")
	}
	dir := t.TempDir()
	const orig, to = 2048, 8192
	narrow := func(name string, edit func(*testmodels.LlamaConfig)) {
		cfg := testmodels.DefaultLlama
		cfg.Layers, cfg.Hidden, cfg.Heads, cfg.KVHeads, cfg.FFN, cfg.MaxPositions = 1, 32, 2, 1, 64, orig
		edit(&cfg)
		if err := testmodels.Llama(cfg).Save(filepath.Join(dir, name+".onnx"), graph.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	narrow("narrow_cache_table", func(c *testmodels.LlamaConfig) { c.Opset, c.RoPE = 20, testmodels.RopeCacheTable })
	narrow("narrow_fused_ms", func(c *testmodels.LlamaConfig) { c.RoPE = testmodels.RopeFusedMS })
	narrow("narrow_fused_onnx", func(c *testmodels.LlamaConfig) { c.Opset, c.RoPE = 23, testmodels.RopeFusedONNX })
	narrow("narrow_computed", func(c *testmodels.LlamaConfig) { c.Opset = 18 })
	narrow("narrow_fp16_computed", func(c *testmodels.LlamaConfig) { c.Opset, c.DType = 18, graph.Float16 })
	narrow("narrow_fp16_fused_ms", func(c *testmodels.LlamaConfig) { c.RoPE, c.DType = testmodels.RopeFusedMS, graph.Float16 })
	narrow("narrow_fp16_fused_onnx", func(c *testmodels.LlamaConfig) {
		c.Opset, c.RoPE, c.DType = 23, testmodels.RopeFusedONNX, graph.Float16
	})
	flag := []string{"--original-max-positions", strconv.Itoa(orig)}
	for _, c := range []struct {
		model, method string
		flags         []string
		table         bool
	}{
		{"rope_llama", "yarn", flag, false},
		{"narrow_cache_table", "llama3", nil, true},
		{"narrow_fused_ms", "ntk", nil, true},
		{"narrow_fused_onnx", "linear", nil, true},
		{"narrow_computed", "dynamic-ntk", flag, false},
		{"narrow_cache_table", "dynamic-ntk", nil, false},
		{"narrow_fused_onnx", "dynamic-ntk", nil, false},
		{"narrow_fp16_computed", "dynamic-ntk", flag, false},
		{"narrow_fp16_fused_ms", "dynamic-ntk", nil, false},
		{"narrow_fp16_fused_onnx", "dynamic-ntk", nil, false},
	} {
		t.Run(c.model+"/"+c.method, func(t *testing.T) {
			ec := extendCase{model: c.model, to: to, args: append([]string{"--method", c.method}, c.flags...)}
			rep, out := extendOK(t, dir, ec)
			checkAudit(t, ec, out, c.method, orig, 10000, c.table)
			last := -1
			for _, vr := range rep.Checks[0].Verify {
				for _, s := range vr.Sets {
					switch {
					case s.Spec != nil:
						last = max(last, s.Spec.Offset+s.Spec.Past+s.Spec.Seq-1)
					case s.Name == fmt.Sprintf("last%d", to): // dynamic-ntk's sets, given to verify
						last = max(last, to-1)
					}
				}
			}
			if rep.Checks[0].Name != "reference" || last != to-1 {
				t.Fatalf("the reference check compared positions up to %d, want %d: %s", last, to-1, rep.Checks[0].Summary)
			}
		})
	}
}

// TestExtendProgressOnATerminal: on a terminal, extend says what runs —
// the planning, each check by name, the executor's sets at N, the write —
// with the time the step has taken, and clears its line before the report;
// on a pipe it draws nothing.
func TestExtendProgressOnATerminal(t *testing.T) {
	for _, term := range []bool{true, false} {
		var stdout, stderr strings.Builder
		out := filepath.Join(t.TempDir(), "o.onnx")
		opts := &extendOptions{IO: &IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr, ErrIsTerminal: term},
			In: corpusModel("rope_llama"), Out: out, Seed: 1, Threads: 1, noORT: true, quickProgress: true}
		opts.Ext = rewrite.ExtendOptions{To: 128, Method: "linear", OriginalMax: 32}
		if err := extendRun(opts); err != nil {
			t.Fatal(err)
		}
		got := stderr.String()
		if !term {
			if got != "" {
				t.Fatalf("drawn on a pipe: %q", got)
			}
			continue
		}
		for _, want := range []string{
			"\r\033[Kextend: auditing and planning (0s)",
			"\r\033[Kextend: check reference (1/3) (0s)",
			"\r\033[Kextend: check audit (2/3) (0s)",
			"\r\033[Kextend: check runs_at_n (3/3): 1/1 onnxpe's executor: seq128 (0s)",
			"\r\033[Kextend: writing " + out,
		} {
			if !strings.Contains(got, want) {
				t.Errorf("no %q in the progress:\n%q", want, got)
			}
		}
		if !strings.HasSuffix(got, "\r\033[K") || !strings.HasPrefix(stdout.String(), corpusModel("rope_llama")+": 32 -> 128 positions") {
			t.Fatalf("the line is not cleared before the report: %q\n%s", got, stdout.String())
		}
	}
}
