package kernels

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/conformance"
)

var update = flag.Bool("update", false, "rewrite testdata/conformance_skips.txt")

// skipsFile lists the conformance cases that are skipped, one a line:
// folder/case, a tab, and the skip reason. TestConformance fails when the
// list changes, so a kernel that drops out (or a new skip) is noticed and
// a fixed one is recorded (go test -run TestConformance -update rewrites
// it).
const skipsFile = "testdata/conformance_skips.txt"

// conformanceSets are the folders of testdata/conformance the test runs,
// in the order it reports them: ONNX 1.12's backend tests, the backend
// tests committed in the onnx repository at 1.23.0-dev, and ONNX Runtime's
// RotaryEmbedding vectors.
var conformanceSets = []string{
	"onnx-node", "onnx-simple",
	"onnx-backend/node", "onnx-backend/simple", "onnx-backend/pytorch-converted", "onnx-backend/pytorch-operator",
	"ort-rotary",
}

// listedOps are the ops this package claims (issue 3): every case that
// uses only these must pass, and each of them that appears in some case
// must pass at least one.
var listedOps = strings.Fields(`Abs Add And ArgMax Cast CastLike Ceil Clip Concat Constant
ConstantOfShape Conv Cos CumSum Div Dropout Einsum Equal Erf Exp Expand Flatten Floor Gather
GatherElements GatherND Gelu Gemm Greater GreaterOrEqual Identity If IsInf IsNaN
LayerNormalization Less LessOrEqual Log Loop MatMul Max Min Mod Mul Neg Not Or Pow Range
Reciprocal ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum Relu Reshape ScatterElements
ScatterND Shape Sigmoid Sign Sin Size Slice Softmax Split Sqrt Squeeze Sub Tanh Tile TopK
Transpose Trilu Unsqueeze Where Xor RotaryEmbedding`)

// looserTolerance lists the cases (folder/case) compared with a looser
// rtol, each with its reason.
var looserTolerance = map[string]float64{
	// ONNX 1.12 computed the expected bfloat16 values by truncating the
	// float32 bits; ONNX 1.13+ and ONNX Runtime round to nearest even, as
	// this package does. The two differ by at most one bfloat16 ulp
	// (2^-7 relative, < 0.0079).
	"onnx-node/test_cast_FLOAT_to_BFLOAT16":              1.0 / 128,
	"onnx-node/test_castlike_FLOAT_to_BFLOAT16":          1.0 / 128,
	"onnx-node/test_castlike_FLOAT_to_BFLOAT16_expanded": 1.0 / 128,
}

// looserAtol lists the cases (folder/case) compared with a looser atol,
// each with its reason.
var looserAtol = map[string]float64{
	// ONNX's reference computed these inverse DFTs with numpy 2's FFT,
	// which keeps float32 inputs in float32: outputs that are exactly 0
	// come out as rounding noise of order eps32 times the signal's
	// magnitude (inputs up to 99, expected noise up to 2e-7); this
	// package computes transforms in float64.
	"onnx-backend/node/test_dft_inverse":         1e-5,
	"onnx-backend/node/test_dft_inverse_opset19": 1e-5,
}

// Skip reasons: the categories the conformance table counts. Each skip
// also names what is missing (the op and opset, the element type, ...).
const (
	skipOp        = "op not registered"
	skipOpset     = "opset outside the registered range"
	skipType      = "element type not supported"
	skipNonTensor = "map or sparse tensor data"
	skipKnown     = "known failure left to another issue"
)

// excludedOps are the ops of ONNX's backend tests the executor does not
// implement, by group (the groups issue 12 leaves out: training, the
// string-processing ops and ImageDecoder); a case that needs one is
// skipped with its group as the reason. A skip for any other reason
// fails TestConformance: every other case must pass.
var excludedOps = map[string]string{
	"ai.onnx.preview.training.Adagrad":  skipTrainingOp,
	"ai.onnx.preview.training.Adam":     skipTrainingOp,
	"ai.onnx.preview.training.Momentum": skipTrainingOp,
	"ai.onnx.preview.training.Gradient": skipTrainingOp,
	"StringNormalizer":                  skipStringOp,
	"StringSplit":                       skipStringOp,
	"StringConcat":                      skipStringOp,
	"RegexFullMatch":                    skipStringOp,
	"TfIdfVectorizer":                   skipStringOp,
	"ImageDecoder":                      skipImageDecoder,
}

const (
	skipTrainingOp   = "excluded: training op"
	skipStringOp     = "excluded: string-processing op"
	skipImageDecoder = "excluded: ImageDecoder"
)

// knownFailures lists the cases of supported ops that fail because of a
// defect another issue is fixing, each with that issue. They are counted
// and printed as skips and pinned in skipsFile: when the fix lands, the
// case passes, TestConformance reports it as no longer skipped, and the
// entry here is removed.
var knownFailures = map[string]string{}

type caseResult struct {
	status string // "pass", "fail", "skip"
	reason string // for a skip, one of the skip* categories
	detail string // for a skip, what is missing
	ops    []string
	// random marks a passed case of a random op, compared by property
	// (see randomOps), with how.
	random string
}

// randomOps are the ops whose outputs are random draws. ONNX's backend
// tests made the expected values of their cases with numpy's global
// random state, not with the node's seed (onnx/backend/test/case/node/
// bernoulli.py: "may not produce the same values in different
// implementations even if a seed is specified"), so no runtime can
// reproduce them: a case using one of these ops is compared by element
// type, shape and support (outputs of 0s and 1s must be 0s and 1s), and a
// case whose random nodes all have a seed must give the same outputs on
// two runs. The cases are counted as passed and listed with how they
// were compared.
var randomOps = map[string]bool{
	"Bernoulli": true, "RandomUniform": true, "RandomUniformLike": true,
	"RandomNormal": true, "RandomNormalLike": true, "Multinomial": true,
}

// inconsistentShapes lists cases (folder/case) whose test data contradicts
// the input shapes their model declares: ONNX 1.12 generated the CastLike
// bfloat16 cases with a one-element "like" input but declares it [3, 4].
// The executor checks declared shapes, so these cases run with the check
// off.
var inconsistentShapes = map[string]bool{
	"onnx-node/test_castlike_BFLOAT16_to_FLOAT":          true,
	"onnx-node/test_castlike_BFLOAT16_to_FLOAT_expanded": true,
	"onnx-node/test_castlike_FLOAT_to_BFLOAT16":          true,
	"onnx-node/test_castlike_FLOAT_to_BFLOAT16_expanded": true,
}

// TestConformance runs every case of conformanceSets. A case whose ops
// (at the model's opset) are all registered and whose values have
// supported types must pass; any other case is a skip, counted and
// printed by reason, and the set of skips must match skipsFile. It logs
// one count line per set and per ONNX release, which make test's summary
// prints.
func TestConformance(t *testing.T) {
	conformanceDir := conformance.Require(t)
	passedByOp := map[string]int{}
	seenOp := map[string]bool{}
	skipped := map[string]string{} // folder/case -> reason: detail
	groups := map[string]*tally{}
	for _, folder := range conformanceSets {
		dir := filepath.Join(conformanceDir, folder)
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		set := &tally{}
		var random []string
		skips := map[string][]string{} // reason -> "case (detail)"
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			name := folder + "/" + e.Name()
			r := runCase(filepath.Join(dir, e.Name()), name)
			for _, op := range r.ops {
				seenOp[op] = true
			}
			if issue, ok := knownFailures[name]; ok && r.status == "fail" {
				t.Logf("%s: fails, left to %s: %s", name, issue, r.reason)
				r.status, r.reason, r.detail = "skip", skipKnown, issue
			}
			set.add(r.status, r.reason)
			switch r.status {
			case "pass":
				for _, op := range r.ops {
					passedByOp[op]++
				}
				if r.random != "" {
					random = append(random, fmt.Sprintf("%s (%s)", e.Name(), r.random))
				}
			case "fail":
				t.Errorf("%s: %s", name, r.reason)
			default:
				skips[r.reason] = append(skips[r.reason], fmt.Sprintf("%s (%s)", e.Name(), r.detail))
				skipped[name] = r.reason + ": " + r.detail
				if !strings.HasPrefix(r.reason, "excluded: ") && releaseOf(folder) != "" {
					t.Errorf("%s: skipped (%s: %s), outside the excluded groups", name, r.reason, r.detail)
				}
			}
		}
		if len(random) > 0 {
			t.Logf("%s: %d cases of random ops passed by property, not by value (ONNX's expected values come from numpy's global random state): %s", folder, len(random), strings.Join(random, " "))
		}
		for _, r := range set.sortedReasons() {
			t.Logf("%s: %d cases skipped, %s: %s", folder, len(skips[r]), r, strings.Join(skips[r], " "))
		}
		t.Logf("%s: %s", folder, set)
		if g := releaseOf(folder); g != "" {
			if groups[g] == nil {
				groups[g] = &tally{}
			}
			groups[g].merge(set)
		}
	}
	for _, g := range []string{release112, release123} {
		if groups[g] != nil {
			t.Logf("%s: %s", g, groups[g])
		}
	}
	checkSkips(t, skipped)
	for _, op := range listedOps {
		switch {
		case !seenOp[op]:
			t.Logf("op %s: no conformance case (covered by unit tests)", op)
		case passedByOp[op] == 0:
			t.Errorf("op %s: no passing conformance case", op)
		}
	}
	// Every registered op that some case uses must pass one of them.
	covered := 0
	for _, op := range Ops() {
		if seenOp[op] {
			covered++
			if passedByOp[op] == 0 {
				t.Errorf("registered op %s: no passing conformance case", op)
			}
		}
	}
	t.Logf("%d of the %d registered ops have conformance cases, each passing at least one", covered, len(Ops()))
}

// The two releases of ONNX's backend tests the conformance data holds.
const (
	release112 = "ONNX 1.12 backend tests (onnx-node, onnx-simple)"
	release123 = "ONNX 1.23.0-dev backend tests (onnx-backend/*)"
)

func releaseOf(folder string) string {
	switch {
	case strings.HasPrefix(folder, "onnx-backend/"):
		return release123
	case strings.HasPrefix(folder, "onnx-"):
		return release112
	}
	return ""
}

// tally counts the cases of a set by status and the skips by reason.
type tally struct {
	pass, fail, skip int
	reasons          map[string]int
}

func (c *tally) add(status, reason string) {
	switch status {
	case "pass":
		c.pass++
	case "fail":
		c.fail++
	default:
		c.skip++
		if c.reasons == nil {
			c.reasons = map[string]int{}
		}
		c.reasons[reason]++
	}
}

func (c *tally) merge(o *tally) {
	c.pass += o.pass
	c.fail += o.fail
	c.skip += o.skip
	for r, n := range o.reasons {
		if c.reasons == nil {
			c.reasons = map[string]int{}
		}
		c.reasons[r] += n
	}
}

// sortedReasons lists the skip reasons, most frequent first.
func (c *tally) sortedReasons() []string {
	rs := make([]string, 0, len(c.reasons))
	for r := range c.reasons {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool {
		a, b := c.reasons[rs[i]], c.reasons[rs[j]]
		return a > b || a == b && rs[i] < rs[j]
	})
	return rs
}

// String is the count line: "N passed, N failed, N skipped (N reason, ...)".
func (c *tally) String() string {
	s := fmt.Sprintf("%d passed, %d failed, %d skipped", c.pass, c.fail, c.skip)
	var parts []string
	for _, r := range c.sortedReasons() {
		parts = append(parts, fmt.Sprintf("%d %s", c.reasons[r], r))
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

// checkSkips compares the skipped cases and their reasons with skipsFile
// (or rewrites it with -update).
func checkSkips(t *testing.T, skipped map[string]string) {
	t.Helper()
	names := make([]string, 0, len(skipped))
	for c := range skipped {
		names = append(names, c)
	}
	sort.Strings(names)
	if *update {
		var b strings.Builder
		for _, c := range names {
			fmt.Fprintf(&b, "%s\t%s\n", c, skipped[c])
		}
		if err := os.MkdirAll(filepath.Dir(skipsFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(skipsFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(skipsFile)
	if err != nil {
		t.Fatalf("%v (run go test -run TestConformance -update to make it)", err)
	}
	want := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		c, reason, _ := strings.Cut(l, "\t")
		want[c] = reason
	}
	for _, c := range names {
		w, ok := want[c]
		switch {
		case !ok:
			t.Errorf("conformance case %s is newly skipped (%s): a regression, or refresh %s with -update if intended", c, skipped[c], skipsFile)
		case w != skipped[c]:
			t.Errorf("conformance case %s is skipped for another reason (%s; %s says %s): refresh it with -update if intended", c, skipped[c], skipsFile, w)
		}
	}
	for c := range want {
		if _, ok := skipped[c]; !ok {
			t.Errorf("conformance case %s is no longer skipped: refresh %s with go test -run TestConformance -update", c, skipsFile)
		}
	}
	t.Logf("%d cases skipped, as %s lists", len(skipped), skipsFile)
}

// runCase runs the case in dir, named folder/case.
func runCase(dir, name string) caseResult {
	rtol, atol := 1e-3, 1e-7
	if tol, ok := looserTolerance[name]; ok {
		rtol = tol
	}
	if tol, ok := looserAtol[name]; ok {
		atol = tol
	}
	return runModelCase(filepath.Join(dir, "model.onnx"), dir, rtol, atol, inconsistentShapes[name], false)
}

// runModelCase runs the model at path on every test_data_set_* in dir.
func runModelCase(path, dir string, rtol, atol float64, ignoreShapes, wholeModel bool) (r caseResult) {
	m, err := graph.Load(path)
	if err != nil {
		return caseResult{status: "fail", reason: "load: " + err.Error()}
	}
	opset := map[string]bool{}
	var missing, outside []string
	m.Walk(func(n *graph.Node) {
		name := opName(n)
		if !opset[name] {
			opset[name] = true
			r.ops = append(r.ops, name)
		}
		v := opsetFor(m, n.Domain)
		if m.Function(n.Domain, n.OpType, n.Overload) != nil || Supports(n.Domain, n.OpType, v) {
			return
		}
		if rs := registeredRanges(n.Domain, n.OpType); rs != "" {
			outside = append(outside, fmt.Sprintf("%s-%d, registered %s", name, v, rs))
		} else {
			missing = append(missing, name)
		}
	})
	sort.Strings(r.ops)
	random, seeded := false, true
	m.Walk(func(n *graph.Node) {
		if normDomain(n.Domain) == "" && randomOps[n.OpType] {
			random = true
			seeded = seeded && n.Attr("seed") != nil
		}
	})
	if len(missing) > 0 {
		sort.Strings(missing)
		missing = dedup(missing)
		r.status, r.reason, r.detail = "skip", skipOp, strings.Join(missing, ", ")
		if g := excludedOps[missing[0]]; g != "" && len(missing) == 1 {
			r.reason = g
		}
		return r
	}
	if len(outside) > 0 {
		sort.Strings(outside)
		r.status, r.reason, r.detail = "skip", skipOpset, strings.Join(dedup(outside), "; ")
		return r
	}
	for _, vs := range [][]*graph.Value{m.Graph.Inputs, m.Graph.Outputs} {
		for _, v := range vs {
			if k := innerKind(v.Type); k != "tensor" {
				r.status, r.reason, r.detail = "skip", skipNonTensor, k+" "+v.Name
				return r
			}
			if et := innerElemType(v.Type); v.Type != nil && !Supported(et) {
				r.status, r.reason, r.detail = "skip", skipType, et.String()
				return r
			}
		}
	}
	opts := Options{IgnoreDeclaredShapes: ignoreShapes}
	s, err := NewSession(m, opts)
	if err != nil {
		if errors.Is(err, ErrUnsupportedType) {
			r.status, r.reason, r.detail = "skip", skipType, "in a constant or attribute: "+err.Error()
			return r
		}
		r.status, r.reason = "fail", "session: "+err.Error()
		return r
	}
	sets, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	if len(sets) == 0 {
		r.status, r.reason = "fail", "no test data"
		return r
	}
	for _, set := range sets {
		ins := map[string]*Tensor{}
		files, _ := filepath.Glob(filepath.Join(set, "input_*.pb"))
		// The ONNX generator writes one file per graph input, in order
		// (initializers that are inputs included).
		inputs := m.Graph.Inputs
		for i := range files {
			if i >= len(inputs) {
				break
			}
			tt, err := readTestValue(filepath.Join(set, fmt.Sprintf("input_%d.pb", i)), inputs[i])
			if err != nil {
				r.status, r.reason = "fail", err.Error()
				return r
			}
			ins[inputs[i].Name] = tt
		}
		outs, err := s.Run(ins)
		if err != nil {
			r.status, r.reason = "fail", "run: "+err.Error()
			return r
		}
		for i, v := range m.Graph.Outputs {
			want, err := readTestValue(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)), v)
			if err != nil {
				r.status, r.reason = "fail", err.Error()
				return r
			}
			rt, at := rtol, atol
			if wholeModel && (want.DType == graph.Float16 || want.DType == graph.BFloat16) {
				// Half-precision outputs (see TestTestModels): PyTorch
				// rounds to float16 at other points than onnxpe.
				rt, at = max(rt, halfModelTol), max(at, halfModelTol)
			}
			msg := ""
			if random {
				msg = compareRandom(outs[v.Name], want)
			} else {
				msg = compareValues(outs[v.Name], want, rt, at)
			}
			if msg != "" {
				r.status, r.reason = "fail", fmt.Sprintf("%s: output %d (%s): %s", filepath.Base(set), i, v.Name, msg)
				return r
			}
		}
		if random && seeded {
			again, err := s.Run(ins)
			if err != nil {
				r.status, r.reason = "fail", "second run: "+err.Error()
				return r
			}
			for _, v := range m.Graph.Outputs {
				if msg := compareValues(again[v.Name], outs[v.Name], 0, 0); msg != "" {
					r.status, r.reason = "fail", fmt.Sprintf("seeded random output %s differs between two runs: %s", v.Name, msg)
					return r
				}
			}
		}
	}
	r.status = "pass"
	if random {
		r.random = "type, shape, values in {0, 1}"
		if seeded {
			r.random += ", the same on two runs"
		}
	}
	return r
}

// The tolerances of TestTestModels. Its references are PyTorch's outputs
// (testmodels/export), computed in float32 by other kernels; over every
// file of testmodels/models (84: each model and ONNX Runtime's two
// optimised saves of it) the worst difference measured on 2026-12-01 was
// 2.9e-6 on float32 outputs (alibi_bloom's logits, of magnitude up to 2)
// and 1.04e-3 on float16 ones (rope_llama_fp16's logits: about one
// float16 ulp, PyTorch computing in float32 between the ops where onnxpe
// rounds to float16). The tolerances keep a margin of about 3x and 2x.
const (
	modelTol     = 1e-5 // rtol and atol, float32 outputs
	halfModelTol = 2e-3 // rtol and atol, float16 and bfloat16 outputs
)

// TestTestModels runs every model of testmodels/models (the exported
// model and ONNX Runtime's basic and extended optimised saves of it) on
// its reference test data: it is also the check of the optimised saves.
func TestTestModels(t *testing.T) {
	dirs, _ := filepath.Glob("../testmodels/models/*")
	if len(dirs) == 0 {
		t.Fatal("no models in ../testmodels/models (the test data of this test)")
	}
	counts := map[string]int{}
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.onnx"))
		for _, f := range files {
			r := runModelCase(f, dir, modelTol, modelTol, false, true)
			counts[r.status]++
			name := filepath.Base(dir) + "/" + filepath.Base(f)
			switch r.status {
			case "fail":
				t.Errorf("%s: %s", name, r.reason)
			case "skip":
				t.Logf("%s: skipped: %s: %s", name, r.reason, r.detail)
			}
		}
	}
	t.Logf("testmodels: %d passed, %d failed, %d skipped", counts["pass"], counts["fail"], counts["skip"])
}

// registeredRanges describes the opset ranges registered for op ("" when
// none is).
func registeredRanges(domain, op string) string {
	var rs []string
	for _, e := range registry[opKey{normDomain(domain), op}] {
		if e.until >= 1<<30 {
			rs = append(rs, fmt.Sprintf("%d+", e.since))
		} else {
			rs = append(rs, fmt.Sprintf("%d-%d", e.since, e.until))
		}
	}
	sort.Strings(rs)
	return strings.Join(rs, ",")
}

func dedup(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

func opsetFor(m *graph.Model, domain string) int64 {
	if v := m.OpsetVersion(domain); v != 0 {
		return v
	}
	if normDomain(domain) == "" {
		return 23
	}
	return 1
}

// compareTensors checks |got-want| <= atol + rtol*|want| elementwise (NaN
// matches NaN, infinities must match exactly) and equal types and shapes.
func compareTensors(got, want *Tensor, rtol, atol float64) string {
	if got == nil {
		return "missing"
	}
	if got.DType != want.DType {
		return fmt.Sprintf("got %v, want %v", got, want)
	}
	if !equalShape(got.Shape, want.Shape) {
		return fmt.Sprintf("got shape %v, want %v", got.Shape, want.Shape)
	}
	g, w := got.Float64s(), want.Float64s()
	if !isFloatType(got.DType) {
		gi, wi := got.Int64s(), want.Int64s()
		for i := range gi {
			if gi[i] != wi[i] {
				return fmt.Sprintf("element %d: got %d, want %d", i, gi[i], wi[i])
			}
		}
		return ""
	}
	for i := range g {
		a, b := g[i], w[i]
		if math.IsNaN(b) {
			if !math.IsNaN(a) {
				return fmt.Sprintf("element %d: got %v, want NaN", i, a)
			}
			continue
		}
		if math.IsInf(b, 0) {
			if a != b {
				return fmt.Sprintf("element %d: got %v, want %v", i, a, b)
			}
			continue
		}
		// Written so that a NaN got against a finite want fails.
		if !(math.Abs(a-b) <= atol+rtol*math.Abs(b)) {
			return fmt.Sprintf("element %d: got %v, want %v (|diff| %.3g)", i, a, b, math.Abs(a-b))
		}
	}
	return ""
}

// innerKind is the kind of the tensors a type holds: "tensor" for
// tensors and for sequences and optionals of them (at any depth), else
// the kind that is not ("map", "sparse_tensor", ...). An undeclared type
// counts as a tensor.
func innerKind(t *graph.Type) string {
	for t != nil && (t.Kind() == "sequence" || t.Kind() == "optional") {
		t = t.Elem()
	}
	if t == nil || t.Kind() == "unknown" {
		return "tensor"
	}
	return t.Kind()
}

// innerElemType is the element type of the tensors a type holds.
func innerElemType(t *graph.Type) graph.DataType {
	for t != nil && (t.Kind() == "sequence" || t.Kind() == "optional") {
		t = t.Elem()
	}
	if t == nil {
		return graph.Undefined
	}
	return t.ElemType()
}

// readTestValue reads a test-data file for value v: a tensor, or a
// sequence or optional value as v's type declares.
func readTestValue(path string, v *graph.Value) (*Tensor, error) {
	if v.Type == nil || v.Type.IsTensor() {
		return readTestTensor(path, v)
	}
	dv, err := graph.ReadValueFile(path, v.Type)
	if err != nil {
		return nil, err
	}
	return fromDataValue(dv)
}

// fromDataValue converts test data to the executor's values.
func fromDataValue(dv *graph.DataValue) (*Tensor, error) {
	switch dv.Kind {
	case "tensor":
		return FromGraph(dv.Tensor)
	case "sequence":
		ts := make([]*Tensor, len(dv.Sequence))
		dt := dv.ElemType
		for i, e := range dv.Sequence {
			t, err := fromDataValue(e)
			if err != nil {
				return nil, err
			}
			ts[i], dt = t, t.DType
		}
		return NewSequence(dt, ts), nil
	case "optional":
		if dv.Elem == nil {
			return NewNone(graph.Undefined), nil
		}
		return fromDataValue(dv.Elem)
	}
	return nil, fmt.Errorf("test data of kind %s", dv.Kind)
}

// compareRandom compares a random op's output by property: the element
// type and shape, and, when every expected value is 0 or 1, that every
// value is.
func compareRandom(got, want *Tensor) string {
	if got == nil || got.notTensor() || want.notTensor() {
		return fmt.Sprintf("got %v, want %v", got, want)
	}
	if got.DType != want.DType || !equalShape(got.Shape, want.Shape) {
		return fmt.Sprintf("got %v, want %v", got, want)
	}
	for _, w := range want.Float64s() {
		if w != 0 && w != 1 {
			return "no property to check a random output of values other than 0 and 1 by: compare it by hand and extend compareRandom"
		}
	}
	for i, g := range got.Float64s() {
		if g != 0 && g != 1 {
			return fmt.Sprintf("element %d: got %v, want 0 or 1", i, g)
		}
	}
	return ""
}

// compareValues is compareTensors for sequences and optionals too.
func compareValues(got, want *Tensor, rtol, atol float64) string {
	switch {
	case got == nil:
		return "missing"
	case want.IsNone() || got.IsNone():
		if want.IsNone() != got.IsNone() {
			return fmt.Sprintf("got %v, want %v", got, want)
		}
		return ""
	case want.IsSequence() || got.IsSequence():
		if !want.IsSequence() || !got.IsSequence() || len(got.seq) != len(want.seq) {
			return fmt.Sprintf("got %v, want %v", got, want)
		}
		for i := range want.seq {
			if msg := compareValues(got.seq[i], want.seq[i], rtol, atol); msg != "" {
				return fmt.Sprintf("sequence element %d: %s", i, msg)
			}
		}
		return ""
	}
	return compareTensors(got, want, rtol, atol)
}

// readTestTensor reads a test-data tensor for value v. ONNX 1.12 wrote
// bfloat16 data as uint16 bit patterns (numpy has no bfloat16): when v is
// declared bfloat16, such a file is read as bfloat16.
func readTestTensor(path string, v *graph.Value) (*Tensor, error) {
	gt, err := graph.ReadTensorFile(path)
	if err != nil {
		return nil, err
	}
	if gt.DataType() == graph.Uint16 && v.Type != nil && v.Type.ElemType() == graph.BFloat16 {
		d, err := gt.Data()
		if err != nil {
			return nil, err
		}
		u := d.([]uint16)
		b := make([]graph.BF16, len(u))
		for i, x := range u {
			b[i] = graph.BF16(x)
		}
		shape := make([]int, len(gt.Dims()))
		for i, x := range gt.Dims() {
			shape[i] = int(x)
		}
		return FromSlice(shape, b), nil
	}
	t, err := FromGraph(gt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}
