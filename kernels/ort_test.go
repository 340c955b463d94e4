//go:build ort

package kernels_test

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/conformance"
	"github.com/onnxpe/onnxpe/internal/ortpeer"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// This file compares onnxpe's executor with ONNX Runtime, the most used
// runtime, on every model of testmodels/ (on fresh seeded inputs of two
// sizes, and on ONNX Runtime's own optimised versions of each model) and
// on every conformance model.

func requireORT(t *testing.T) {
	t.Helper()
	if err := ortpeer.Init(""); err != nil {
		t.Fatal(err) // never a skip: the tag asks for ONNX Runtime
	}
}

// maxAbsDiff compares two tensors of the same shape.
func maxAbsDiff(a, b *kernels.Tensor) (float64, error) {
	if fmt.Sprint(a.Shape) != fmt.Sprint(b.Shape) {
		return 0, fmt.Errorf("shapes %v and %v differ", a.Shape, b.Shape)
	}
	av, bv := a.Float64s(), b.Float64s()
	worst := 0.0
	for i := range av {
		if math.IsNaN(av[i]) != math.IsNaN(bv[i]) {
			return math.Inf(1), nil
		}
		if d := math.Abs(av[i] - bv[i]); d > worst {
			worst = d
		}
	}
	return worst, nil
}

// tolerance is the largest absolute difference accepted for an output
// of element type dt whose largest magnitude is scale.
func tolerance(dt graph.DataType, scale float64) float64 {
	switch dt {
	case graph.Float16:
		// float16 has an 11-bit significand; both runtimes compute in
		// float32 and round per op, but not always at the same ops, so
		// a few ulps of the largest value are allowed.
		return 4 * math.Ldexp(1, -10) * math.Max(scale, 1)
	case graph.BFloat16:
		return 4 * math.Ldexp(1, -7) * math.Max(scale, 1)
	}
	return 1e-5
}

func largest(t *kernels.Tensor) float64 {
	m := 0.0
	for _, v := range t.Float64s() {
		if !math.IsInf(v, 0) && !math.IsNaN(v) {
			m = math.Max(m, math.Abs(v))
		}
	}
	return m
}

func TestDifferentialTestModels(t *testing.T) {
	requireORT(t)
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2026, 11))
	compared := 0
	for _, e := range man.Models {
		t.Run(e.Name, func(t *testing.T) {
			m, err := graph.Load(e.ModelPath())
			if err != nil {
				t.Fatal(err)
			}
			ours, err := kernels.NewSession(m, kernels.Options{})
			if err != nil {
				t.Fatal(err)
			}
			peer, err := ortpeer.NewSession(e.ModelPath(), m, ortpeer.Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			// ONNX Runtime's optimised saves of the same model, run by us.
			var optimised []*kernels.Session
			for _, lvl := range []string{"ort_basic.onnx", "ort_extended.onnx"} {
				p := filepath.Join(filepath.Dir(e.ModelPath()), lvl)
				if _, err := os.Stat(p); err != nil {
					t.Fatalf("%s is missing: run testmodels/export/ort_optimize.js", p)
				}
				om, err := graph.Load(p)
				if err != nil {
					t.Fatal(err)
				}
				sess, err := kernels.NewSession(om, kernels.Options{})
				if err != nil {
					t.Fatalf("%s: %v", lvl, err)
				}
				optimised = append(optimised, sess)
			}
			for _, sz := range []testmodels.Sizes{{Batch: 1, Seq: 7, Past: 3}, {Batch: 3, Seq: 12, Past: 5}} {
				if e.Name == "learned_vit" {
					sz.Seq = 0
				}
				in, err := e.RandomInputs(rng, sz)
				if err != nil {
					t.Fatal(err)
				}
				got, err := ours.Run(in)
				if err != nil {
					t.Fatalf("onnxpe: %v", err)
				}
				want, err := peer.Run(in, got)
				if err != nil {
					t.Fatalf("ONNX Runtime: %v", err)
				}
				for _, v := range m.Graph.Outputs {
					d, err := maxAbsDiff(got[v.Name], want[v.Name])
					if err != nil {
						t.Fatalf("%v: output %s: %v", sz, v.Name, err)
					}
					if tol := tolerance(want[v.Name].DType, largest(want[v.Name])); d > tol {
						t.Errorf("%v: output %s: max abs difference %.3g > %.3g", sz, v.Name, d, tol)
					}
					compared++
				}
				for k, sess := range optimised {
					og, err := sess.Run(in)
					if err != nil {
						t.Fatalf("onnxpe on ORT-optimised model %d: %v", k, err)
					}
					for _, v := range m.Graph.Outputs {
						d, err := maxAbsDiff(og[v.Name], want[v.Name])
						if err != nil {
							t.Fatalf("optimised %d: %v", k, err)
						}
						if tol := tolerance(want[v.Name].DType, largest(want[v.Name])); d > tol {
							t.Errorf("%v: ORT-optimised model %d: output %s: max abs difference %.3g > %.3g", sz, k, v.Name, d, tol)
						}
					}
				}
			}
		})
	}
	t.Logf("compared %d outputs over %d models", compared, len(man.Models))
}

// emptySizes are the zero-sized runs of TestDifferentialEmptyDims: a batch
// of 0, a sequence of 0 (with and without a past), and a past of 0 (a
// first decoding step).
var emptySizes = []testmodels.Sizes{{Batch: 0, Seq: 7, Past: 3}, {Batch: 2, Seq: 0, Past: 3}, {Batch: 2, Seq: 0, Past: 0}, {Batch: 2, Seq: 5, Past: 0}}

// ortCrashes are the runs of TestDifferentialEmptyDims that end the
// process inside ONNX Runtime 1.30, by model and sizes: they are not run
// in ONNX Runtime. onnxpe must still run them, or refuse them with the
// error given (the model cannot run at that size).
var ortCrashes = map[string]struct{ why, refuse string }{
	// Its Einsum bhld,lrd->bhlr with l = 0 divides an integer by zero
	// (a one-node model with these shapes does the same).
	"relative_bert_key {Batch:2 Seq:0 Past:3}": {why: "ONNX Runtime's Einsum dies of SIGFPE on an empty l"},
	"relative_bert_key {Batch:2 Seq:0 Past:0}": {why: "ONNX Runtime's Einsum dies of SIGFPE on an empty l"},
	// Transformer-XL's and XLNet's einsums over [len, batch, heads, d]
	// with len = 0 end the process the same way; their relative shifts
	// reshape with a size of 0, which Reshape reads as "copy the input's".
	"relative_transfo_xl {Batch:2 Seq:0 Past:3}": {why: "ONNX Runtime's Einsum dies of SIGFPE on an empty sequence",
		refuse: "cannot reshape [0 1 2 2] to [1 0 2 2]"},
	"relative_xlnet {Batch:2 Seq:0 Past:3}": {why: "ONNX Runtime's Einsum dies of SIGFPE on an empty sequence",
		refuse: "cannot reshape [2 2 0 0] to [2 2 0 -1]"},
}

// TestDifferentialEmptyDims runs every corpus model (and ONNX Runtime's
// optimised saves of it) at batch 0, sequence 0 and past 0 in onnxpe and
// ONNX Runtime. Where ONNX Runtime runs a size, onnxpe must run it too and
// agree; where ONNX Runtime refuses it, the refusal is counted and
// printed with ONNX Runtime's reason (onnxpe's result is then unchecked).
func TestDifferentialEmptyDims(t *testing.T) {
	requireORT(t)
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2026, 13))
	var compared, runs int
	var refused []string
	for _, e := range man.Models {
		t.Run(e.Name, func(t *testing.T) {
			m, err := graph.Load(e.ModelPath())
			if err != nil {
				t.Fatal(err)
			}
			peer, err := ortpeer.NewSession(e.ModelPath(), m, ortpeer.Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			paths := []string{e.ModelPath()}
			for _, lvl := range []string{"ort_basic.onnx", "ort_extended.onnx"} {
				paths = append(paths, filepath.Join(filepath.Dir(e.ModelPath()), lvl))
			}
			var sessions []*kernels.Session
			for _, p := range paths {
				om, err := graph.Load(p)
				if err != nil {
					t.Fatal(err)
				}
				s, err := kernels.NewSession(om, kernels.Options{})
				if err != nil {
					t.Fatalf("%s: %v", filepath.Base(p), err)
				}
				sessions = append(sessions, s)
			}
			seen := map[string]bool{}
			for _, sz := range emptySizes {
				if e.Name == "learned_vit" {
					sz.Seq = 0 // fixed 17 tokens: only the batch varies
				}
				in, err := e.RandomInputs(rng, sz)
				if err != nil {
					t.Fatal(err)
				}
				key := shapesKey(in)
				if seen[key] {
					continue // the model has no past (or no sequence) input
				}
				seen[key] = true
				runs++
				got, oerr := sessions[0].Run(in)
				like := got
				if oerr != nil && peer.NeedsShapes() {
					// ONNX Runtime is given the declared output shapes.
					if like, err = e.OutputsLike(sz); err != nil {
						t.Fatal(err)
					}
				}
				if cr, ok := ortCrashes[fmt.Sprintf("%s %+v", e.Name, sz)]; ok {
					refused = append(refused, fmt.Sprintf("%s %s: not run: %s (onnxpe: %v)", e.Name, key, cr.why, errString(oerr)))
					switch {
					case cr.refuse == "" && oerr != nil:
						t.Errorf("%v: onnxpe: %v", sz, oerr)
					case cr.refuse != "" && (oerr == nil || !strings.Contains(oerr.Error(), cr.refuse)):
						t.Errorf("%v: onnxpe: %v, want the error %q", sz, oerr, cr.refuse)
					}
					continue
				}
				want, werr := peer.Run(in, like)
				switch {
				case werr != nil && oerr == nil && peer.NeedsShapes():
					// ONNX Runtime was given onnxpe's output shapes: its
					// error may be a shape onnxpe got wrong.
					t.Errorf("%v: ONNX Runtime with onnxpe's output shapes: %v", sz, werr)
					continue
				case werr != nil:
					refused = append(refused, fmt.Sprintf("%s %s: %s (onnxpe: %v)", e.Name, key, ortReason(werr), errString(oerr)))
					continue
				case oerr != nil:
					t.Errorf("%v: onnxpe fails where ONNX Runtime runs: %v", sz, oerr)
					continue
				}
				for k, s := range sessions {
					if k > 0 {
						if got, err = s.Run(in); err != nil {
							t.Errorf("%v: onnxpe on %s: %v", sz, filepath.Base(paths[k]), err)
							continue
						}
					}
					for _, v := range m.Graph.Outputs {
						d, err := maxAbsDiff(got[v.Name], want[v.Name])
						if err != nil {
							t.Errorf("%v: %s: output %s: %v", sz, filepath.Base(paths[k]), v.Name, err)
							continue
						}
						if tol := tolerance(want[v.Name].DType, largest(want[v.Name])); d > tol {
							t.Errorf("%v: %s: output %s: max abs difference %.3g > %.3g", sz, filepath.Base(paths[k]), v.Name, d, tol)
						}
						compared++
					}
				}
			}
		})
	}
	for _, r := range refused {
		t.Logf("ONNX Runtime refuses %s", r)
	}
	t.Logf("empty dimensions: %d runs, %d refused by ONNX Runtime, %d outputs compared", runs, len(refused), compared)
}

// ortReason shortens an error of ONNX Runtime to the failing node and
// its message, without source paths.
func ortReason(err error) string {
	s := err.Error()
	node := ""
	if i := strings.Index(s, "while running "); i >= 0 {
		node = s[i+len("while running "):]
		if j := strings.Index(node, " Status Message:"); j >= 0 {
			node = node[:j]
		}
	}
	msg := s
	if i := strings.LastIndex(s, " was false. "); i >= 0 {
		msg = s[i+len(" was false. "):]
	} else if i := strings.LastIndex(s, "Status Message: "); i >= 0 {
		msg = s[i+len("Status Message: "):]
	}
	return strings.TrimSpace(node + " " + msg)
}

func errString(err error) string {
	if err == nil {
		return "runs it"
	}
	return err.Error()
}

// shapesKey prints the input shapes of a run, sorted by name.
func shapesKey(in map[string]*kernels.Tensor) string {
	names := make([]string, 0, len(in))
	for n := range in {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s%v", n, shapeString(in[n].Shape))
	}
	return b.String()
}

func shapeString(s []int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// ortSkipsFile pins the conformance cases TestDifferentialConformance does
// not compare value by value, with the reason (case<TAB>reason: detail); a
// case that fails for any other reason is a failure, and a change of the
// set fails too (go test -tags ort -run TestDifferentialConformance
// -update-ort rewrites it after a review).
const ortSkipsFile = "testdata/ort_conformance_skips.txt"

var updateORT = flag.Bool("update-ort", false, "rewrite "+ortSkipsFile)

// The reasons a conformance case is not compared with ONNX Runtime value
// by value.
const (
	ortSkipOnnxpe   = "onnxpe skips it (TestConformance)"
	ortSkipFeed     = "inputs the ONNX Runtime binding cannot feed"
	ortSkipNoInputs = "no inputs (the ONNX Runtime binding cannot run a model without inputs)"
	ortSkipRefuses  = "ONNX Runtime 1.30 refuses the model"
	ortSkipFails    = "ONNX Runtime 1.30 fails to run it"
	ortSkipDiffers  = "ONNX Runtime 1.30 differs from ONNX's expected outputs, which onnxpe matches"
	ortSkipRandom   = "random op: compared by element type, shape and support"
)

// ortDiffers are the cases where ONNX Runtime 1.30 disagrees with ONNX's
// own expected outputs, with what was measured: the test checks that
// onnxpe matches the expected outputs instead (TestConformance checks it
// too).
var ortDiffers = map[string]string{
	"onnx-node/test_maxunpool_export_with_output_shape":                                       "output y differs by up to 8 (MaxUnpool with output_shape: ONNX's reference pads the unpooled tensor to output_shape, ONNX Runtime unpools into it at the pooled indices; onnx/onnx#2398, onnxruntime#2193)",
	"onnx-backend/node/test_maxunpool_export_with_output_shape":                               "output y differs by up to 8 (MaxUnpool with output_shape: ONNX's reference pads the unpooled tensor to output_shape, ONNX Runtime unpools into it at the pooled indices; onnx/onnx#2398, onnxruntime#2193)",
	"onnx-node/test_resize_downsample_scales_cubic_align_corners":                             "output Y differs by up to 1.05 (cubic downsampling with align_corners: ONNX's reference takes length_resized as length·scale (2.4), ONNX Runtime as the output size (2); onnx/onnx#2462 calls the reference intended)",
	"onnx-backend/node/test_resize_downsample_scales_cubic_align_corners":                     "output Y differs by up to 1.05 (cubic downsampling with align_corners: ONNX's reference takes length_resized as length·scale (2.4), ONNX Runtime as the output size (2); onnx/onnx#2462 calls the reference intended)",
	"onnx-node/test_resize_downsample_scales_linear_align_corners":                            "output Y differs by up to 0.857 (linear downsampling with align_corners: ONNX's reference takes length_resized as length·scale (2.4), ONNX Runtime as the output size (2); onnx/onnx#2462 calls the reference intended)",
	"onnx-backend/node/test_resize_downsample_scales_linear_align_corners":                    "output Y differs by up to 0.857 (linear downsampling with align_corners: ONNX's reference takes length_resized as length·scale (2.4), ONNX Runtime as the output size (2); onnx/onnx#2462 calls the reference intended)",
	"onnx-backend/node/test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal": "output qk_matmul_output is finite where ONNX's expected output is -inf (causal mask)",
	"onnx-backend/node/test_attention_4d_with_past_and_present_qk_matmul_bias_4d_mask_causal": "output qk_matmul_output is finite where ONNX's expected output is -inf (causal mask)",
}

// TestDifferentialConformance runs every conformance case in onnxpe and
// in ONNX Runtime and compares the outputs. The cases it cannot compare
// value by value are pinned in ortSkipsFile with their reason; any other
// outcome (onnxpe fails, ONNX Runtime fails unexpectedly, an output is
// missing or differs) fails the test.
func TestDifferentialConformance(t *testing.T) {
	requireORT(t)
	root := conformance.Require(t)
	cases := append(conformance.Models(t), conformance.BackendModels(t)...)
	if len(cases) < 2500 {
		t.Fatalf("found %d conformance models", len(cases))
	}
	onnxpeSkips := readPinned(t, "testdata/conformance_skips.txt")
	skipped := map[string]string{} // case -> reason: detail
	counts := map[string]int{}
	var passed, failed int
	for _, p := range cases {
		dir := filepath.Dir(p)
		name, _ := filepath.Rel(root, dir)
		name = filepath.ToSlash(name)
		skip := func(reason, detail string) {
			skipped[name] = reason + ": " + detail
			counts[reason]++
		}
		fail := func(format string, args ...any) {
			t.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
			failed++
		}
		if why, ok := onnxpeSkips[name]; ok {
			skip(ortSkipOnnxpe, why)
			continue
		}
		m, err := graph.Load(p)
		if err != nil {
			fail("%v", err)
			continue
		}
		if kind := unfeedable(m); kind != "" {
			skip(ortSkipFeed, kind)
			continue
		}
		in, err := kernels.ReadInputs(filepath.Join(dir, "test_data_set_0"), m)
		if err != nil {
			fail("onnxpe cannot read the inputs: %v", err)
			continue
		}
		bfloat16Inputs(m, in)
		// ONNX 1.12's CastLike bfloat16 cases feed a "like" input of
		// another shape than their model declares (TestConformance too
		// runs them without the check).
		opts := kernels.Options{IgnoreDeclaredShapes: strings.HasPrefix(name, "onnx-node/test_castlike_") && strings.Contains(name, "BFLOAT16")}
		ours, err := kernels.NewSession(m, opts)
		if err != nil {
			fail("onnxpe: %v", err)
			continue
		}
		got, err := ours.Run(in)
		if err != nil {
			fail("onnxpe: %v", err)
			continue
		}
		if len(kernels.FeedInputs(m)) == 0 {
			skip(ortSkipNoInputs, "")
			continue
		}
		peer, err := ortpeer.NewSession(p, m, ortpeer.Options{Threads: 1})
		if err != nil {
			skip(ortSkipRefuses, ortDetail(err))
			continue
		}
		want, err := peer.Run(in, got)
		peer.Close()
		switch {
		case err != nil && (strings.HasPrefix(err.Error(), "ortpeer: input ") || strings.HasPrefix(err.Error(), "ortpeer: output ")):
			// The binding could not convert a value (not ONNX Runtime).
			skip(ortSkipFeed, ortDetail(err))
			continue
		case err != nil:
			skip(ortSkipFails, ortDetail(err))
			continue
		}
		random := hasRandomOp(m)
		var diffs []string
		for _, v := range m.Graph.Outputs {
			g, w := got[v.Name], want[v.Name]
			if g == nil || w == nil {
				diffs = append(diffs, fmt.Sprintf("output %s: onnxpe gives %v, ONNX Runtime %v", v.Name, g, w))
				continue
			}
			if random {
				if g.String() != w.String() {
					diffs = append(diffs, fmt.Sprintf("output %s: onnxpe gives %v, ONNX Runtime %v", v.Name, g, w))
				}
				continue
			}
			d, err := maxAbsDiff(g, w)
			// Conformance values reach the thousands, where one float32
			// ulp is about 1e-4, and reductions over many elements sum in
			// a different order in ONNX Runtime (SIMD partial sums): allow
			// 1e-4 of the largest value beside the 1e-5 floor.
			tol := 1e-5 + 1e-4*largest(w)
			if w.DType == graph.Float16 || w.DType == graph.BFloat16 {
				tol = tolerance(w.DType, largest(w))
			}
			if err != nil || d > tol {
				diffs = append(diffs, fmt.Sprintf("output %s: difference %.3g (tolerance %.3g) %v", v.Name, d, tol, err))
			}
		}
		if random && len(diffs) == 0 {
			// Draws differ between runtimes: each must put its values
			// where the op does.
			for rt, out := range map[string]map[string]*kernels.Tensor{"onnxpe": got, "ONNX Runtime": want} {
				if msg := randomSupport(t, m, dir, in, out); msg != "" {
					diffs = append(diffs, rt+": "+msg)
				}
			}
		}
		switch why, known := ortDiffers[name]; {
		case len(diffs) == 0 && random:
			skip(ortSkipRandom, "")
		case len(diffs) == 0:
			passed++
		case known:
			// onnxpe must give ONNX's expected outputs where ONNX Runtime
			// does not.
			exp, err := kernels.ReadOutputs(filepath.Join(dir, "test_data_set_0"), m)
			if err != nil {
				fail("%v", err)
				continue
			}
			for _, v := range m.Graph.Outputs {
				if d, err := maxAbsDiff(got[v.Name], exp[v.Name]); err != nil || d > 1e-4*math.Max(1, largest(exp[v.Name])) {
					fail("ONNX Runtime differs and so does onnxpe from ONNX's expected output %s: %.3g %v", v.Name, d, err)
				}
			}
			skip(ortSkipDiffers, why)
		default:
			fail("%s", strings.Join(diffs, "; "))
		}
	}
	checkPinned(t, skipped)
	var reasons []string
	total := 0
	for r, n := range counts {
		reasons = append(reasons, fmt.Sprintf("%d %s", n, r))
		total += n
	}
	sort.Strings(reasons)
	t.Logf("conformance vs ONNX Runtime: %d passed, %d failed, %d not compared value by value (%s)", passed, failed, total, strings.Join(reasons, "; "))
}

// bfloat16Inputs reinterprets the uint16 inputs the model declares
// bfloat16: ONNX 1.12 wrote bfloat16 test data as uint16 bit patterns.
func bfloat16Inputs(m *graph.Model, in map[string]*kernels.Tensor) {
	for _, v := range kernels.FeedInputs(m) {
		t := in[v.Name]
		if t == nil || t.DType != graph.Uint16 || v.Type.ElemType() != graph.BFloat16 {
			continue
		}
		u := kernels.Data[uint16](t)
		b := make([]graph.BF16, len(u))
		for i, x := range u {
			b[i] = graph.BF16(x)
		}
		in[v.Name] = kernels.FromSlice(t.Shape, b)
	}
}

// unfeedable says what kind of input of m the ONNX Runtime binding cannot
// feed, or of output it cannot read ("" when there is none): sequences and
// optionals (onnxpe's binding passes tensors only), strings among the
// inputs, and the 4-bit and 2-bit types (which ONNX Runtime packs two or
// four to a byte and onnxpe holds one to a byte).
func unfeedable(m *graph.Model) string {
	for i, v := range slices.Concat(kernels.FeedInputs(m), m.Graph.Outputs) {
		switch dt := v.Type.ElemType(); {
		case v.Type == nil:
		case !v.Type.IsTensor():
			return v.Type.Kind()
		case dt == graph.String && i < len(kernels.FeedInputs(m)):
			return "string tensor"
		case dt == graph.Int4 || dt == graph.Uint4 || dt == graph.Int2 || dt == graph.Uint2 || dt == graph.Float4E2M1:
			return "4-bit or 2-bit tensor (" + dt.String() + ")"
		}
	}
	return ""
}

// hasRandomOp reports whether m draws random numbers (its conformance
// values come from numpy's random state, which no runtime reproduces).
func hasRandomOp(m *graph.Model) bool {
	random := false
	m.Graph.Walk(func(n *graph.Node) {
		switch n.OpType {
		case "Bernoulli", "RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike", "Multinomial":
			random = true
		case "Dropout":
			// In training mode (a training_mode input) Dropout draws a mask.
			random = random || len(n.Inputs()) > 2 && n.Input(2) != nil
		}
	})
	return random
}

// randomSupport checks the outputs of a random case in one runtime by
// where the op puts its values: an output whose expected values (ONNX's
// test data) are all 0s and 1s (Bernoulli, its expansion through
// RandomUniformLike) must be 0s and 1s; training-mode Dropout's output is,
// element by element, 0 or x/(1-ratio), exactly x when the ratio is 0,
// and its mask is true where the element was kept. Any other random
// output is an error: it needs a property here.
func randomSupport(t *testing.T, m *graph.Model, dir string, in, out map[string]*kernels.Tensor) string {
	t.Helper()
	exp, err := kernels.ReadOutputs(filepath.Join(dir, "test_data_set_0"), m)
	if err != nil {
		return err.Error()
	}
	valueOf := func(v *graph.Value) *kernels.Tensor {
		if v == nil {
			return nil
		}
		if x := in[v.Name]; x != nil {
			return x
		}
		if v.Const != nil {
			x, _ := kernels.FromGraph(v.Const)
			return x
		}
		return nil
	}
	for _, v := range m.Graph.Outputs {
		o, e := out[v.Name], exp[v.Name]
		if o == nil || e == nil {
			return fmt.Sprintf("output %s missing", v.Name)
		}
		binary := !slices.ContainsFunc(e.Float64s(), func(x float64) bool { return x != 0 && x != 1 })
		if binary {
			if i := slices.IndexFunc(o.Float64s(), func(x float64) bool { return x != 0 && x != 1 }); i >= 0 {
				return fmt.Sprintf("output %s: element %d is %v, not 0 or 1", v.Name, i, o.Float64s()[i])
			}
			continue
		}
		n := v.Producer()
		if n == nil || n.OpType != "Dropout" || v != n.Output(0) {
			return fmt.Sprintf("output %s: no property to check it by (extend randomSupport)", v.Name)
		}
		x := valueOf(n.Input(0))
		ratio := 0.5
		if r := valueOf(n.Input(1)); r != nil {
			ratio = r.Float64s()[0]
		} else if n.Input(1) != nil {
			return fmt.Sprintf("output %s: the ratio of %s is computed", v.Name, n.OpType)
		}
		if x == nil {
			return fmt.Sprintf("output %s: the input of %s is computed", v.Name, n.OpType)
		}
		var mask []float64
		if len(n.Outputs()) > 1 && out[n.Output(1).Name] != nil {
			mask = out[n.Output(1).Name].Float64s()
		}
		xs, ys := x.Float64s(), o.Float64s()
		for i, y := range ys {
			kept := math.Abs(y-xs[i]/(1-ratio)) <= 1e-6*math.Max(1, math.Abs(xs[i]/(1-ratio)))
			switch {
			case ratio == 0 && y != xs[i]:
				return fmt.Sprintf("output %s: element %d is %v, not the input %v (ratio 0)", v.Name, i, y, xs[i])
			case y != 0 && !kept:
				return fmt.Sprintf("output %s: element %d is %v, neither 0 nor %v/(1-%v)", v.Name, i, y, xs[i], ratio)
			case mask != nil && xs[i] != 0 && (mask[i] != 0) != (y != 0):
				return fmt.Sprintf("output %s: element %d is %v where the mask says %v", v.Name, i, y, mask[i] != 0)
			}
		}
	}
	return ""
}

// ortPaths are file paths in ONNX Runtime's errors (the model's, its
// sources').
var ortPaths = regexp.MustCompile(`/[^ :]*/(model\.onnx|[a-z_]+\.(h|cc))`)

// ortDetail is an error of ONNX Runtime without file paths.
func ortDetail(err error) string {
	s := ortReason(err)
	if i := strings.Index(s, ".onnx: "); i >= 0 {
		s = s[i+len(".onnx: "):]
	}
	s = ortPaths.ReplaceAllString(s, "$1")
	if len(s) > 160 {
		s = s[:160]
	}
	return strings.Join(strings.Fields(s), " ")
}

// readPinned reads a case<TAB>reason file.
func readPinned(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		name, why, _ := strings.Cut(line, "\t")
		out[name] = why
	}
	return out
}

// checkPinned compares the cases not compared value by value with
// ortSkipsFile (by case and reason; the detail after the reason is for the
// reader), or rewrites it with -update-ort.
func checkPinned(t *testing.T, skipped map[string]string) {
	t.Helper()
	names := make([]string, 0, len(skipped))
	for n := range skipped {
		names = append(names, n)
	}
	sort.Strings(names)
	if *updateORT {
		var b strings.Builder
		for _, n := range names {
			fmt.Fprintf(&b, "%s\t%s\n", n, skipped[n])
		}
		if err := os.WriteFile(ortSkipsFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	pinned := readPinned(t, ortSkipsFile)
	reason := func(s string) string { r, _, _ := strings.Cut(s, ": "); return r }
	for _, n := range names {
		if p, ok := pinned[n]; !ok || reason(p) != reason(skipped[n]) {
			t.Errorf("%s: not compared (%s), which %s does not pin (it says %q)", n, skipped[n], ortSkipsFile, p)
		}
	}
	for n, p := range pinned {
		if _, ok := skipped[n]; !ok {
			t.Errorf("%s: %s pins it (%s) but it was compared: remove it (-update-ort)", n, ortSkipsFile, p)
		}
	}
}

// emptyDiffsFile pins the runs of TestDifferentialEmptyConformance where
// onnxpe and ONNX Runtime part ways (case input dimension<TAB>reason:
// detail), each for a reason on ONNX Runtime's side; any other difference
// fails the test, and so does a pinned one that no longer happens
// (-update-ort rewrites the file after a review).
const emptyDiffsFile = "testdata/ort_empty_differences.txt"

// The reasons a run with an empty dimension is not compared.
const (
	emptyLenient   = "ONNX Runtime accepts inputs ONNX's spec refuses; onnxpe refuses them"
	emptyShape     = "ONNX Runtime's output shape breaks ONNX's shape rule (it keeps the reduced axis of an empty tensor)"
	emptyUndefined = "ONNX leaves the result undefined"
	emptyOutShape  = "ONNX Runtime expects other float16 output shapes than ONNX's rules give (it takes the key count from attn_mask or V)"
)

// emptyUndefinedOps are the ops whose result on these empty inputs ONNX
// leaves undefined: DynamicQuantizeLinear of nothing and ArgMax/ArgMin
// over an empty axis (ONNX's reference takes numpy's min or argmax of an
// empty array, which raises; onnxpe refuses the latter) and Squeeze with
// an empty axes input (ONNX's reference squeezes nothing, ONNX Runtime
// every dimension of size 1).
var emptyUndefinedOps = map[string]bool{"DynamicQuantizeLinear": true, "Squeeze": true, "ArgMax": true, "ArgMin": true}

// emptyGarbageCases are the cases whose runs with an empty input ONNX
// Runtime 1.30 answers with values no input gives, different from run to
// run (uninitialized memory): they are counted, not compared (onnxpe's own
// answer is checked by the unit test named here).
var emptyGarbageCases = map[string]string{
	"onnx-node/test_scan_sum":         "Scan 8 over 0 iterations returns a final state of values like 4e31 where the initial state is zeros (TestScan8ZeroLength)",
	"onnx-backend/node/test_scan_sum": "Scan 8 over 0 iterations returns a final state of values like 4e31 where the initial state is zeros (TestScan8ZeroLength)",
}

// TestDifferentialEmptyConformance runs the conformance cases that ONNX
// Runtime compares value by value with one dimension of one input made 0
// (every input, every dimension), in onnxpe and in ONNX Runtime. Where
// ONNX Runtime runs the case, onnxpe must agree with it, or the run is
// pinned in emptyDiffsFile with a reason (onnxpe must then still fail
// with an error of the model, not an internal one); where ONNX Runtime
// refuses the run or crashes on it (emptyCrashes), the refusal is counted
// by op and printed.
func TestDifferentialEmptyConformance(t *testing.T) {
	requireORT(t)
	root := conformance.Require(t)
	pinned := readPinned(t, ortSkipsFile)
	cases := append(conformance.Models(t), conformance.BackendModels(t)...)
	var runs, agreed int
	refusedBy := map[string]int{}
	diffs := map[string]string{} // run -> reason: detail
	tmp := t.TempDir()
	for _, p := range cases {
		dir := filepath.Dir(p)
		name, _ := filepath.Rel(root, dir)
		name = filepath.ToSlash(name)
		if _, ok := pinned[name]; ok {
			continue
		}
		m, err := graph.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if hasRandomOp(m) {
			continue
		}
		in, err := kernels.ReadInputs(filepath.Join(dir, "test_data_set_0"), m)
		if err != nil {
			t.Fatal(err)
		}
		bfloat16Inputs(m, in)
		// The inputs and outputs are declared with symbolic dimensions,
		// which ONNX Runtime then does not check against the data.
		for _, v := range slices.Concat(m.Graph.Inputs, m.Graph.Outputs) {
			if dims, ok := v.Type.Shape(); ok && v.Type.IsTensor() {
				sym := make([]graph.Dim, len(dims))
				for i := range sym {
					sym[i] = graph.Dim{Param: fmt.Sprintf("%s_%d", v.Name, i)}
				}
				v.Type = graph.TensorType(v.Type.ElemType(), sym)
			}
		}
		mp := filepath.Join(tmp, strings.ReplaceAll(name, "/", "_")+".onnx")
		if err := m.Save(mp, graph.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		ours, err := kernels.NewSession(m, kernels.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		peer, err := ortpeer.NewSession(mp, m, ortpeer.Options{Threads: 1})
		if err != nil {
			// ONNX Runtime refuses the model once its dimensions are
			// symbolic (its shape inference needs them).
			refusedBy["(the model with symbolic dimensions) "+opsOf(m)]++
			runs++
			continue
		}
		for _, v := range kernels.FeedInputs(m) {
			x := in[v.Name]
			for ax, d := range x.Shape {
				if d == 0 {
					continue
				}
				feed := maps.Clone(in)
				feed[v.Name] = emptyAlong(x, ax)
				run := fmt.Sprintf("%s %s %d", name, v.Name, ax)
				runs++
				if emptyCrashes[run] {
					refusedBy["(crashes ONNX Runtime) "+opsOf(m)]++
					continue
				}
				got, oerr := ours.Run(feed)
				if why := emptyGarbageCases[name]; why != "" {
					if errors.Is(oerr, kernels.ErrInternal) {
						t.Errorf("%s: onnxpe: %v", run, oerr)
					}
					refusedBy["(ONNX Runtime's output is not computed from the inputs) "+opsOf(m)]++
					continue
				}
				want, werr := peer.Run(feed, got)
				switch {
				case errors.Is(oerr, kernels.ErrInternal):
					t.Errorf("%s: onnxpe: %v", run, oerr)
				case werr != nil && oerr == nil && peer.NeedsShapes() && strings.Contains(werr.Error(), "invalid dimensions for output"):
					// ONNX Runtime was given onnxpe's output shapes (a
					// float16 output): pinned runs only, reviewed.
					diffs[run] = emptyOutShape + ": " + ortDetail(werr)
				case werr != nil:
					refusedBy[opsOf(m)]++
				case oerr != nil && emptyUndefinedOps[strings.Split(opsOf(m), "+")[0]]:
					diffs[run] = emptyUndefined + ": onnxpe refuses it: " + oneLine(oerr.Error())
				case oerr != nil:
					diffs[run] = emptyLenient + ": " + oneLine(oerr.Error())
				default:
					var why []string
					for _, o := range m.Graph.Outputs {
						g, w := got[o.Name], want[o.Name]
						if g == nil || w == nil {
							why = append(why, fmt.Sprintf("output %s: onnxpe gives %v, ONNX Runtime %v", o.Name, g, w))
							continue
						}
						if fmt.Sprint(g.Shape) != fmt.Sprint(w.Shape) {
							why = append(why, fmt.Sprintf("%s: output %s is %v in onnxpe, %v in ONNX Runtime", emptyShape, o.Name, g, w))
							continue
						}
						if d, _ := maxAbsDiff(g, w); d > 1e-5+1e-4*largest(w) {
							why = append(why, fmt.Sprintf("output %s: difference %.3g", o.Name, d))
						}
					}
					switch {
					case len(why) == 0:
						agreed++
					case emptyUndefinedOps[strings.Split(opsOf(m), "+")[0]]:
						diffs[run] = emptyUndefined + ": " + strings.Join(why, "; ")
					case strings.HasPrefix(why[0], emptyShape):
						diffs[run] = why[0]
					default:
						diffs[run] = "differs: " + strings.Join(why, "; ")
					}
				}
			}
		}
		peer.Close()
	}
	checkEmptyDiffs(t, diffs)
	var refused []string
	total := 0
	for op, n := range refusedBy {
		refused = append(refused, fmt.Sprintf("%s %d", op, n))
		total += n
	}
	sort.Strings(refused)
	t.Logf("conformance with an empty dimension: %d runs, %d agree with ONNX Runtime, %d pinned differences, %d refused by ONNX Runtime (by op: %s)", runs, agreed, len(diffs), total, strings.Join(refused, ", "))
}

// checkEmptyDiffs compares the differences of the empty-dimension runs
// with emptyDiffsFile by run and reason ("differs" is never accepted), or
// rewrites the file with -update-ort.
func checkEmptyDiffs(t *testing.T, diffs map[string]string) {
	t.Helper()
	runs := slices.Sorted(maps.Keys(diffs))
	if *updateORT {
		var b strings.Builder
		for _, r := range runs {
			fmt.Fprintf(&b, "%s\t%s\n", r, diffs[r])
		}
		if err := os.WriteFile(emptyDiffsFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pinned := readPinned(t, emptyDiffsFile)
	reason := func(s string) string { r, _, _ := strings.Cut(s, ": "); return r }
	for _, r := range runs {
		switch p, ok := pinned[r]; {
		case strings.HasPrefix(diffs[r], "differs: "):
			t.Errorf("%s: %s", r, diffs[r])
		case !ok || reason(p) != reason(diffs[r]):
			t.Errorf("%s: %s, which %s does not pin (it says %q)", r, diffs[r], emptyDiffsFile, p)
		}
	}
	for r, p := range pinned {
		if _, ok := diffs[r]; !ok {
			t.Errorf("%s: %s pins it (%s), but onnxpe and ONNX Runtime now agree or ONNX Runtime refuses it: remove it (-update-ort)", r, emptyDiffsFile, p)
		}
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// emptyCrashes are the runs of TestDifferentialEmptyConformance (case,
// input, dimension) that end the process inside ONNX Runtime 1.30
// (SIGSEGV, SIGFPE or SIGABRT): they are counted as refused and not run.
var emptyCrashes = map[string]bool{
	"onnx-backend/node/test_convtranspose_1d X 2":                       true,
	"onnx-backend/node/test_convtranspose_3d X 2":                       true,
	"onnx-backend/node/test_convtranspose_3d X 3":                       true,
	"onnx-backend/node/test_convtranspose_3d X 4":                       true,
	"onnx-backend/node/test_dft x 1":                                    true,
	"onnx-backend/node/test_dft_axis x 2":                               true,
	"onnx-backend/node/test_dft_axis_opset19 x 2":                       true,
	"onnx-backend/node/test_dft_inverse x 1":                            true,
	"onnx-backend/node/test_dft_inverse_opset19 x 1":                    true,
	"onnx-backend/node/test_dft_opset19 x 1":                            true,
	"onnx-backend/node/test_dft_rfft x 1":                               true,
	"onnx-backend/node/test_dft_rfft_opset19 x 1":                       true,
	"onnx-backend/node/test_gru_defaults X 0":                           true,
	"onnx-backend/node/test_gru_defaults X 1":                           true,
	"onnx-backend/node/test_gru_seq_length X 0":                         true,
	"onnx-backend/node/test_gru_seq_length X 1":                         true,
	"onnx-backend/node/test_gru_with_initial_bias X 0":                  true,
	"onnx-backend/node/test_gru_with_initial_bias X 1":                  true,
	"onnx-backend/node/test_instancenorm_epsilon x 2":                   true,
	"onnx-backend/node/test_instancenorm_epsilon x 3":                   true,
	"onnx-backend/node/test_instancenorm_example x 2":                   true,
	"onnx-backend/node/test_instancenorm_example x 3":                   true,
	"onnx-backend/node/test_lstm_defaults X 1":                          true,
	"onnx-backend/node/test_lstm_with_initial_bias X 1":                 true,
	"onnx-backend/node/test_stft_with_window window 0":                  true,
	"onnx-backend/node/test_top_k x 0":                                  true,
	"onnx-backend/node/test_top_k_negative_axis x 0":                    true,
	"onnx-backend/node/test_top_k_same_values_2d x 0":                   true,
	"onnx-backend/node/test_top_k_smallest x 0":                         true,
	"onnx-backend/node/test_unique_sorted_with_axis X 1":                true,
	"onnx-backend/node/test_unique_sorted_with_axis_3d X 2":             true,
	"onnx-backend/pytorch-operator/test_operator_symbolic_override 0 2": true,
	"onnx-backend/pytorch-operator/test_operator_symbolic_override 0 3": true,
	"onnx-node/test_convtranspose_1d X 2":                               true,
	"onnx-node/test_convtranspose_3d X 2":                               true,
	"onnx-node/test_convtranspose_3d X 3":                               true,
	"onnx-node/test_convtranspose_3d X 4":                               true,
	"onnx-node/test_dft x 1":                                            true,
	"onnx-node/test_dft_axis x 2":                                       true,
	"onnx-node/test_dft_inverse x 1":                                    true,
	"onnx-node/test_gru_defaults X 0":                                   true,
	"onnx-node/test_gru_defaults X 1":                                   true,
	"onnx-node/test_gru_seq_length X 0":                                 true,
	"onnx-node/test_gru_seq_length X 1":                                 true,
	"onnx-node/test_gru_with_initial_bias X 0":                          true,
	"onnx-node/test_gru_with_initial_bias X 1":                          true,
	"onnx-node/test_instancenorm_epsilon x 2":                           true,
	"onnx-node/test_instancenorm_epsilon x 3":                           true,
	"onnx-node/test_instancenorm_example x 2":                           true,
	"onnx-node/test_instancenorm_example x 3":                           true,
	"onnx-node/test_lstm_defaults X 1":                                  true,
	"onnx-node/test_lstm_with_initial_bias X 1":                         true,
	"onnx-node/test_roialign_aligned_false X 2":                         true,
	"onnx-node/test_roialign_aligned_false X 3":                         true,
	"onnx-node/test_roialign_aligned_true X 2":                          true,
	"onnx-node/test_roialign_aligned_true X 3":                          true,
	"onnx-node/test_stft_with_window window 0":                          true,
	"onnx-node/test_top_k x 0":                                          true,
	"onnx-node/test_top_k_negative_axis x 0":                            true,
	"onnx-node/test_top_k_smallest x 0":                                 true,
	"onnx-node/test_unique_sorted_with_axis X 1":                        true,
	"onnx-node/test_unique_sorted_with_axis_3d X 2":                     true,
	"ort-rotary/test_msrotary_3d_i0_rd0 X 2":                            true,
	"ort-rotary/test_msrotary_3d_i1_rd0 X 2":                            true,
	"ort-rotary/test_msrotary_3d_offset_i0_rd0 X 2":                     true,
	"ort-rotary/test_msrotary_3d_offset_i1_rd0 X 2":                     true,
	"ort-rotary/test_msrotary_4d_i0_rd0 X 3":                            true,
	"ort-rotary/test_msrotary_4d_i1_rd0 X 3":                            true,
}

// emptyAlong is x with dimension ax cut to 0.
func emptyAlong(x *kernels.Tensor, ax int) *kernels.Tensor {
	shape := slices.Clone(x.Shape)
	shape[ax] = 0
	return kernels.New(x.DType, shape...)
}

// opsOf lists the op types of m's main graph, for counts.
func opsOf(m *graph.Model) string {
	seen := map[string]bool{}
	var ops []string
	for _, n := range m.Graph.Nodes() {
		if !seen[n.OpType] {
			seen[n.OpType] = true
			ops = append(ops, n.OpType)
		}
	}
	sort.Strings(ops)
	return strings.Join(ops, "+")
}
