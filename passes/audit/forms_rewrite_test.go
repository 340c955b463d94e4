package audit_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/extend"
	"github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/schemes"
	"github.com/x448/float16"
)

// formInputs are the inputs of an exporter form for one call: batch 2, the
// first row left-padded by two tokens, past keys of length past when the
// form has a KV cache, position_ids counted from the mask (0 on padding).
func formInputs(m *graph.Model, S, past int) map[string]*kernels.Tensor {
	rng := rand.New(rand.NewPCG(uint64(S), uint64(past)))
	const B = 2
	in := map[string]*kernels.Tensor{}
	for _, v := range m.Graph.Inputs {
		switch v.Name {
		case "input_ids":
			ids := make([]int64, B*S)
			for i := range ids {
				ids[i] = rng.Int64N(50)
			}
			in[v.Name] = kernels.FromSlice([]int{B, S}, ids)
		case "attention_mask":
			in[v.Name] = kernels.FromSlice([]int{B, S}, formMask(S, past))
		case "position_ids":
			mask := formMask(S, past)
			pos := make([]int64, B*S)
			for b := 0; b < B; b++ {
				c := int64(past)
				for s := 0; s < S; s++ {
					if mask[b*S+s] == 1 {
						pos[b*S+s] = c
						c++
					}
				}
			}
			if v.Type.ElemType() == graph.Int32 {
				p32 := make([]int32, len(pos))
				for i, p := range pos {
					p32[i] = int32(p)
				}
				in[v.Name] = kernels.FromSlice([]int{B, S}, p32)
			} else {
				in[v.Name] = kernels.FromSlice([]int{B, S}, pos)
			}
		case "past_key", "past_value":
			dims, _ := v.Type.Shape()
			h, d := int(dims[1].Value), int(dims[3].Value)
			x := make([]float32, B*h*past*d)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			in[v.Name] = kernels.FromSlice([]int{B, h, past, d}, x)
		default:
			panic(fmt.Sprintf("exporter form input %q has no synthesis", v.Name))
		}
	}
	return in
}

// formMask is the attention mask of formInputs: row 0 left-padded by two
// tokens when there is no cache, every token real otherwise.
func formMask(S, past int) []int64 {
	mask := make([]int64, 2*S)
	for i := range mask {
		mask[i] = 1
	}
	if past == 0 && S > 2 {
		mask[0], mask[1] = 0, 0
	}
	return mask
}

func runForm(m *graph.Model, in map[string]*kernels.Tensor) ([]float64, error) {
	s, err := kernels.NewSession(m, kernels.Options{Threads: 1})
	if err != nil {
		return nil, err
	}
	out, err := s.Run(in)
	if err != nil {
		return nil, err
	}
	if len(out) != 1 {
		return nil, fmt.Errorf("%d outputs", len(out))
	}
	for _, o := range out {
		return o.Float64s(), nil
	}
	return nil, nil
}

// formsLeft are the exporter forms the default rewrite leaves as they
// are (each prints its reason); every other form must be rewritten.
var formsLeft = map[string]bool{
	// already folded: constants and the positions' own subgraph
	"alibi_runtime_slopes_12_heads": true, "alibi_runtime_slopes_6_heads_where": true,
	"alibi_runtime_slopes_8_heads_keys": true, "alibi_symmetric_int_abs": true,
	// already a stored table read at its positions
	"learned_roberta_positions_from_ids": true, "learned_slice_expand": true,
	"sinusoidal_fp16_table_cast": true, "sinusoidal_tf2onnx_sliced_table": true,
	"learned_transposed_gather_axis1_offset": true, "learned_transposed_slice_axis1": true,
	// a one-hot MatMul gives zero rows past the table; a Slice refuses
	"learned_onehot_matmul": true, "learned_transposed_onehot_matmul": true,
}

// TestExporterFormsRewrite rewrites every exporter form with the default
// passes and runs the rewritten model against the original with the
// executor: prompts with padding, a long prompt (past some forms' tables)
// and decode steps after a KV cache. A form either is rewritten and
// computes what the original does wherever the original runs, or is left
// as it was with a reason (printed, and counted).
func TestExporterFormsRewrite(t *testing.T) {
	var left []string
	rewritten := 0
	names := map[string]bool{}
	for _, f := range exporterForms() {
		names[f.Name] = true
		t.Run(f.Name, func(t *testing.T) {
			orig := schemetest.BuildExporterForm(f)
			r, _, err := audit.RewriteModel(schemetest.BuildExporterForm(f), passes.Options{}, schemes.Rewriters()...)
			if err != nil {
				t.Fatal(err)
			}
			// Why a form is left: a pass's reason for a finding it
			// skips, or its note that the encoding is already in the
			// form it would write.
			var skipped []string
			for _, ch := range r.Changes {
				skipped = append(skipped, ch.Skipped...)
				if len(ch.Added)+len(ch.Removed) == 0 {
					skipped = append(skipped, ch.Notes...)
				}
			}
			if r.Changed() == formsLeft[f.Name] {
				t.Errorf("rewritten %v, want %v (%s)", r.Changed(), !formsLeft[f.Name], strings.Join(skipped, "; "))
			}
			if !r.Changed() {
				if len(skipped) == 0 {
					t.Fatalf("not rewritten and no reason given")
				}
				t.Logf("not rewritten: %s", strings.Join(skipped, "; "))
				left = append(left, f.Name+": "+strings.Join(skipped, "; "))
				return
			}
			rewritten++
			if compareForm(t, orig, r.M) == 0 {
				t.Errorf("no set ran on the original")
			}
		})
	}
	for n := range formsLeft {
		if !names[n] {
			t.Errorf("formsLeft names %s, which is no exporter form", n)
		}
	}
	sort.Strings(left)
	t.Logf("%d forms rewritten and equal to the original, %d left as they were:\n%s", rewritten, len(left), strings.Join(left, "\n"))
}

// formSets are the calls an exporter form and its rewrite are run on:
// prompts with padding, a long prompt (past some forms' tables) and decode
// steps after a KV cache (for forms that have one).
var formSets = []struct{ S, past int }{{5, 0}, {12, 0}, {80, 0}, {1, 7}, {3, 7}, {4, 40}}

// compareForm runs rewritten against orig on formSets and reports every
// set where they differ; it returns the number of sets the original ran.
func compareForm(t *testing.T, orig, rewritten *graph.Model) int {
	t.Helper()
	ran := 0
	for _, set := range formSets {
		hasPast := false
		for _, v := range orig.Graph.Inputs {
			hasPast = hasPast || v.Name == "past_key"
		}
		if set.past > 0 && !hasPast {
			continue
		}
		in := formInputs(orig, set.S, set.past)
		want, err := runForm(orig, in)
		if err != nil {
			t.Logf("S %d past %d: the original refuses the set (%v)", set.S, set.past, err)
			continue
		}
		got, err := runForm(rewritten, formInputs(orig, set.S, set.past))
		if err != nil {
			t.Errorf("S %d past %d: the original runs, the rewritten model does not: %v", set.S, set.past, err)
			continue
		}
		if len(got) != len(want) {
			t.Errorf("S %d past %d: %d values, want %d", set.S, set.past, len(got), len(want))
			continue
		}
		worst, at := 0.0, 0
		for i := range want {
			if d := math.Abs(got[i]-want[i]) / (1 + math.Abs(want[i])); d > worst || math.IsNaN(d) {
				worst, at = d, i
			}
		}
		if worst > 1e-4 || math.IsNaN(worst) {
			t.Errorf("S %d past %d: value %d is %g, the original's %g", set.S, set.past, at, got[at], want[at])
		}
		ran++
	}
	return ran
}

// TestExtendTransposedTables: a learned table stored transposed ([dim,
// positions], read by Gather on axis 1 at Range(0, S) or at RoBERTa's
// positions from the ids, multiplied with a one-hot of the positions on
// the contracted axis, or sliced on axis 1 to the sequence) is extended
// to 144 positions by the hierarchical rule and written back [dim,
// offset + 144], and so is the [positions, dim] table of BERT's one-hot
// product (learned_onehot_matmul): the trained positions of every dim are
// the table's bit for bit, position p >= n is α·u_(p div n) + (1-α)·u_(p
// mod n) with u_i = (row_i - α·row_0)/(1-α) (rows of positions, computed
// here from the original table), the model's output on a batch of 7 and
// of n tokens is the original's bit for bit, and the extended model runs
// 144 tokens (the one-hots' depth follows the table). Extend refused the
// transposed tables before, and gave the one-hot forms a model that did
// not run (the depth stayed n).
func TestExtendTransposedTables(t *testing.T) {
	const N = 144
	n := 0
	for _, f := range exporterForms() {
		transposed := strings.HasPrefix(f.Name, "learned_transposed_")
		if !transposed && f.Name != "learned_onehot_matmul" {
			continue
		}
		n++
		t.Run(f.Name, func(t *testing.T) {
			m := schemetest.BuildExporterForm(f)
			x, err := extend.ExtendModel(m, rewrite.ExtendOptions{To: N})
			if err != nil {
				t.Fatal(err)
			}
			if len(x.Report.Items) != 1 || len(x.Report.Items[0].Edits) == 0 {
				t.Fatalf("items %+v", x.Report.Items)
			}
			name := x.Report.Items[0].Edits[0].Where
			t.Logf("%s: %s", name, x.Report.Items[0].Edits[0].What)
			a, b := m.Graph.Lookup(name), x.M.Graph.Lookup(name)
			if a == nil || b == nil || a.Const == nil || b.Const == nil {
				t.Fatalf("table %q not found", name)
			}
			off := 0
			if o, ok := f.Want["position_offset"].(int); ok {
				off = o
			}
			// Position c of dim d of a table of cols positions, stored
			// [D, cols] or [cols, D].
			old, now := a.Const.Dims(), b.Const.Dims()
			D, P := int(old[0]), int(old[1])
			want := []int64{int64(D), int64(off + N)}
			at := func(v []float64, cols, d, c int) float64 { return v[d*cols+c] }
			if !transposed {
				D, P = P, D
				want = []int64{int64(off + N), int64(D)}
				at = func(v []float64, _, d, c int) float64 { return v[c*D+d] }
			}
			pn := P - off // trained positions
			if !slices.Equal(now, want) {
				t.Fatalf("dims %v to %v, want %v", old, now, want)
			}
			av, err := a.Const.Float64s()
			if err != nil {
				t.Fatal(err)
			}
			bv, err := b.Const.Float64s()
			if err != nil {
				t.Fatal(err)
			}
			for d := range D {
				for c := range P {
					if math.Float32bits(float32(at(av, P, d, c))) != math.Float32bits(float32(at(bv, off+N, d, c))) {
						t.Fatalf("dim %d column %d: %v, trained %v", d, c, at(bv, off+N, d, c), at(av, P, d, c))
					}
				}
			}
			const alpha = rewrite.DefaultAlpha
			u := func(d, i int) float64 { return (at(av, P, d, off+i) - alpha*at(av, P, d, off)) / (1 - alpha) }
			for _, p := range []int{pn, pn + 5, N - 1} {
				for d := range D {
					want := float32(alpha*u(d, p/pn) + (1-alpha)*u(d, p%pn))
					if got := float32(at(bv, off+N, d, off+p)); math.Abs(float64(got-want)) > 1e-6*(1+math.Abs(float64(want))) {
						t.Fatalf("position %d dim %d: %v, the rule %v", p, d, got, want)
					}
				}
			}
			for _, S := range []int{7, pn} {
				in := formInputs(m, S, 0)
				want, err := runForm(m, in)
				if err != nil {
					t.Fatalf("original, %d tokens: %v", S, err)
				}
				got, err := runForm(x.M, in)
				if err != nil {
					t.Fatalf("extended, %d tokens: %v", S, err)
				}
				for i := range want {
					if math.Float32bits(float32(got[i])) != math.Float32bits(float32(want[i])) {
						t.Fatalf("%d tokens: value %d is %v, the original's %v", S, i, got[i], want[i])
					}
				}
			}
			got, err := runForm(x.M, formInputs(m, N, 0))
			if err != nil {
				t.Fatalf("extended, %d tokens: %v", N, err)
			}
			for i, v := range got {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("%d tokens: value %d is %v", N, i, v)
				}
			}
		})
	}
	if n != 5 {
		t.Fatalf("%d forms extended, want the 4 transposed ones and learned_onehot_matmul", n)
	}
}

// TestRewriteFP16CachesOffTheRotation: float16 cos/sin caches are fused
// with the model's own values when they are a rotation rounded to float16;
// caches that are not one beyond that rounding (cos²+sin² off 1 at a
// position the audit's probe does not measure, or the second dimension of
// a pair turned by other values) are refused with the reason.
func TestRewriteFP16CachesOffTheRotation(t *testing.T) {
	const rd = 16
	cases := []struct {
		name   string
		tamper func(cos, sin []float16.Float16)
		want   string
	}{
		{"amplitude_off_at_100", func(cos, sin []float16.Float16) {
			i := 100 * rd // pair 0 at position 100, both dimensions
			for _, j := range []int{i, i + rd/2} {
				cos[j] = float16.Fromfloat32(cos[j].Float32() * 1.01)
				sin[j] = float16.Fromfloat32(sin[j].Float32() * 1.01)
			}
		}, "off the rotation"},
		{"second_dimension_off_at_100", func(cos, sin []float16.Float16) {
			i := 100*rd + rd/2 + 3 // the second dimension of pair 3
			cos[i] = float16.Fromfloat32(cos[i].Float32() + 0.01)
		}, "different cos/sin"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := schemetest.ExporterForm{Name: c.name, Heads: 2, HD: 16, Opset: 18, Rope: schemetest.RopeFP16CachePastRange(c.tamper)}
			r, _, err := audit.RewriteModel(schemetest.BuildExporterForm(f), passes.Options{}, schemes.Rewriters()...)
			if err != nil {
				t.Fatal(err)
			}
			var skipped []string
			for _, ch := range r.Changes {
				skipped = append(skipped, ch.Skipped...)
			}
			if r.Changed() || !strings.Contains(strings.Join(skipped, "; "), c.want) {
				t.Fatalf("rewritten %v, skipped %q; want refused saying %q", r.Changed(), skipped, c.want)
			}
			t.Logf("refused: %s", strings.Join(skipped, "; "))
		})
	}
}

// TestExporterFormsRewriteOtherOps rewrites the KV-cache forms with the
// other fused ops the rewrite can emit (ONNX's RotaryEmbedding of opset 23
// for float16 cos/sin caches, com.microsoft RelativePositionBias for the
// T5 decoder, whose queries sit after the cache) and runs them against the
// original, decode steps included.
func TestExporterFormsRewriteOtherOps(t *testing.T) {
	opts := map[string]passes.RewriteOptions{
		"rope_fp16_cache_past_range": {RoPEOp: passes.RoPEOpONNX},
		"t5_decoder_with_cache":      {T5Op: passes.T5Microsoft},
	}
	n := 0
	for _, f := range exporterForms() {
		o, ok := opts[f.Name]
		if !ok {
			continue
		}
		n++
		t.Run(f.Name, func(t *testing.T) {
			orig := schemetest.BuildExporterForm(f)
			r, _, err := audit.RewriteModel(schemetest.BuildExporterForm(f), passes.Options{Rewrite: o}, schemes.Rewriters()...)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Changed() {
				t.Fatalf("not rewritten: %v", r.Changes)
			}
			if ran := compareForm(t, orig, r.M); ran != len(formSets) {
				t.Errorf("the original ran %d of the %d sets", ran, len(formSets))
			}
		})
	}
	if n != len(opts) {
		t.Fatalf("%d of the %d forms found", n, len(opts))
	}
}
