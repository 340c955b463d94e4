package extend

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
	"github.com/onnxpe/onnxpe/testmodels"
)

func tensorOf(t *testing.T, dt graph.DataType, dims []int64, data any) *graph.Tensor {
	t.Helper()
	x, err := graph.NewTensor("c", dt, dims, data)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestContinueConst: causal masks, 0, 1, 2, ... buffers and linear
// constants are continued with their rule; others are refused.
func TestContinueConst(t *testing.T) {
	tril := func(n int) []bool {
		v := make([]bool, n*n)
		for i := 0; i < n; i++ {
			for j := 0; j <= i; j++ {
				v[i*n+j] = true
			}
		}
		return v
	}
	got, what, err := continueConst(tensorOf(t, graph.Bool, []int64{1, 1, 4, 4}, tril(4)), []int{2, 3}, 4, 6, false)
	if err != nil || !strings.Contains(what, "i - j") {
		t.Fatalf("%v %s", err, what)
	}
	b, _ := got.Data()
	if !slices.Equal(b.([]bool), tril(6)) || !slices.Equal(got.Dims(), []int64{1, 1, 6, 6}) {
		t.Fatalf("mask %v %v", got.Dims(), b)
	}
	got, what, err = continueConst(tensorOf(t, graph.Int64, []int64{1, 4}, []int64{0, 1, 2, 3}), []int{1}, 4, 7, false)
	if err != nil || !strings.Contains(what, "0, 1, 2") {
		t.Fatalf("%v %s", err, what)
	}
	ints, _ := got.Int64s()
	if !slices.Equal(ints, []int64{0, 1, 2, 3, 4, 5, 6}) {
		t.Fatalf("arange %v", ints)
	}
	// MPT's ALiBi: slope·(j - (n-1)) per head, read from the end.
	got, _, err = continueConst(tensorOf(t, graph.Float, []int64{2, 1, 4}, []float32{-1.5, -1, -0.5, 0, -0.75, -0.5, -0.25, 0}), []int{2}, 4, 6, true)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := got.Float64s()
	if !slices.Equal(f, []float64{-2.5, -2, -1.5, -1, -0.5, 0, -1.25, -1, -0.75, -0.5, -0.25, 0}) {
		t.Fatalf("linear %v", f)
	}
	if _, _, err := continueConst(tensorOf(t, graph.Float, []int64{4}, []float32{1, 5, 2, 0}), []int{0}, 4, 6, false); err == nil {
		t.Fatal("continued a constant that follows no rule")
	}
}

func loadEntry(t *testing.T, name string) *graph.Model {
	t.Helper()
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range man.Models {
		if e.Name == name {
			m, err := graph.Load(e.ModelPath())
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	for _, s := range testmodels.Synthetics() {
		if s.Name == name {
			return s.Build()
		}
	}
	t.Fatalf("no model %s", name)
	return nil
}

// TestExtendRefusals: requests the model does not allow are ErrExtend,
// with the reason.
func TestExtendRefusals(t *testing.T) {
	cases := []struct {
		model string
		opts  rewrite.ExtendOptions
		want  string
	}{
		{"learned_gpt2", rewrite.ExtendOptions{To: 64}, "not longer than"},
		{"learned_gpt2", rewrite.ExtendOptions{To: 32}, "not longer than"},
		{"learned_gpt2", rewrite.ExtendOptions{To: 64*64 + 1}, "at most n²"},
		{"learned_gpt2", rewrite.ExtendOptions{To: 256, Method: rewrite.MethodYaRN}, "has no RoPE"},
		{"learned_gpt2", rewrite.ExtendOptions{To: 256, Alpha: 0.5}, "differ from 0.5"},
		{"rope_llama", rewrite.ExtendOptions{To: 256, Method: rewrite.MethodHierarchical}, "does not fit RoPE"},
		{"rope_llama", rewrite.ExtendOptions{To: 256}, "give --method"},
		{"rope_llama", rewrite.ExtendOptions{To: 256, Method: rewrite.MethodLinear}, "give --original-max-positions"},
		{"rope_llama", rewrite.ExtendOptions{To: 256, Method: rewrite.MethodLinear, OriginalMax: 64, Factor: 1}, "larger than 1"},
		{"rope_llama", rewrite.ExtendOptions{To: 256, Method: rewrite.MethodLinear, OriginalMax: 64, Factor: 0.5}, "larger than 1"},
		{"rope_llama", rewrite.ExtendOptions{To: 64, Method: rewrite.MethodLinear, OriginalMax: 64}, "not longer than"},
		{"rope_llama", rewrite.ExtendOptions{To: 256, Method: rewrite.MethodLinear, OriginalMax: 64, BetaFast: 16}, "parameters of --method yarn"},
		{"rope_yarn", rewrite.ExtendOptions{To: 65536, Method: rewrite.MethodLinear}, "already has scaling yarn"},
		{"sinusoidal_marian", rewrite.ExtendOptions{To: 256, Method: rewrite.MethodHierarchical}, "learned position tables"},
		{"alibi_mpt", rewrite.ExtendOptions{To: 16}, "not longer than"},
	}
	for _, c := range cases {
		_, err := ExtendModel(loadEntry(t, c.model), c.opts)
		if !errors.Is(err, rewrite.ErrExtend) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: %v, want ErrExtend saying %q", c.model, c.opts, err, c.want)
		}
	}
}

// TestExtendLeavesTheModelAlone: the caller's model is not changed.
func TestExtendLeavesTheModelAlone(t *testing.T) {
	m := loadEntry(t, "learned_gpt2")
	before, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	x, err := ExtendModel(m, rewrite.ExtendOptions{To: 256})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := m.Marshal()
	if string(before) != string(after) {
		t.Fatal("ExtendModel changed its input")
	}
	if !x.Report.Changed() || *x.Report.OldMax != 64 || x.Report.NewMax != 256 {
		t.Fatalf("report %+v", x.Report)
	}
}

// TestDynamicNTKInHalf: a float16 model whose cos/sin are computed in
// float32 and cast to float16 (rope_llama_fp16, Hugging Face's
// .to(x.dtype)), extended with dynamic NTK from original lengths of a few
// thousand, is read back with its own rule: the audit probes it as far as
// float32 angles allow (half types once stopped at 256 + the probe, short
// of the switch, and read "none"), and the original length and factor are
// those of each extension, not one answer. A static rule stays static, and
// the model itself has no scaling.
func TestDynamicNTKInHalf(t *testing.T) {
	m := loadEntry(t, "rope_llama_fp16")
	read := func(what string, m *graph.Model) *rope.Params {
		t.Helper()
		rep, _, err := audit.AuditModel(m, what, passes.Options{})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var ps []*rope.Params
		for _, f := range rep.Findings {
			if p, ok := f.Params.(*rope.Params); ok {
				ps = append(ps, p)
			}
		}
		if len(ps) != 1 || ps[0].Scaling == nil || ps[0].Base == nil || *ps[0].Base != 10000 {
			t.Fatalf("%s: RoPE findings %v", what, rep.Findings)
		}
		return ps[0]
	}
	if p := read("rope_llama_fp16", m); *p.Scaling != "none" || p.Dynamic != nil {
		t.Fatalf("rope_llama_fp16: scaling %s, dynamic %v", *p.Scaling, p.Dynamic)
	}
	for _, c := range []struct {
		method string
		orig   int
		factor float64
	}{
		{rewrite.MethodDynamicNTK, 2048, 4},
		{rewrite.MethodDynamicNTK, 1024, 8},
		{rewrite.MethodDynamicNTK, 4096, 2},
		{rewrite.MethodNTK, 2048, 4},
	} {
		what := fmt.Sprintf("%s from %d to 8192", c.method, c.orig)
		x, err := ExtendModel(m, rewrite.ExtendOptions{To: 8192, Method: c.method, OriginalMax: c.orig})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		p := read(what, x.M)
		dynamic := c.method == rewrite.MethodDynamicNTK
		if *p.Scaling != "ntk" || p.Factor == nil || *p.Factor != c.factor || p.Dynamic == nil || *p.Dynamic != dynamic {
			t.Fatalf("%s: scaling %s, factor %v, dynamic %v", what, *p.Scaling, fmtPtr(p.Factor), fmtPtr(p.Dynamic))
		}
		if got := p.OriginalMaxPositions; dynamic && (got == nil || *got != c.orig) || !dynamic && got != nil {
			t.Fatalf("%s: original_max_positions %v", what, fmtPtr(got))
		}
	}
}

func fmtPtr[T any](p *T) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// TestDynamicNTKInHalfGoBuilt extends narrow float16 Llamas built in Go by
// dynamic NTK and reads the rule back from every form an fp16 export has:
// cos/sin computed in float32 and cast to float16, float16 tables gathered
// by position, and float16 caches of com.microsoft and ONNX
// RotaryEmbedding. Their entries are cos/sin of float32 (float64 in
// extend's caches) angles rounded once to float16, off by 2^-11 at most
// at any position, so the frequencies are measured over long spans and
// the factor is read as precisely as in float32 (to the 1e-3 it is
// snapped to). Before, a 4096-row float16 table's frequencies measured
// over 16 positions were off by up to 1.3e-4 of themselves and extend
// refused it ("column 2 holds neither the cos nor the sin of a rotary
// pair"), and factors were snapped to 2e-2 for any half model: 128 read
// as 130, 5000/4096 as 1.2. A computed RoPE without position ids (probed
// at lengths counted from 0, as float32 ones) is read the same; the
// models themselves read scaling none.
func TestDynamicNTKInHalfGoBuilt(t *testing.T) {
	if testing.Short() {
		t.Skip("five forms at lengths up to 65536 (half a minute; -short): make test runs it, TestDynamicNTKInHalf checks the corpus model")
	}
	dynamicNTKInHalf(t, graph.Float16)
}

// TestDynamicNTKInBFloat16GoBuilt is TestDynamicNTKInHalfGoBuilt for
// bfloat16 Llamas (as bf16 exports have them: a computed RoPE cast to
// bfloat16, bfloat16 tables and RotaryEmbedding caches). bfloat16 keeps
// 8 significant bits: cos/sin rounded once are off by up to 2^-9 (8 times
// float16's 2^-12 near 1), a phase error of about 2e-3 rad at any
// position that does not grow with it, so frequencies measured over the
// whole table or cache (1024 to 4096 rows, where even the lowest,
// 10000^(-7/8), turns 0.3 to 1.3 rad) stay readable: every parameter
// reads back and none has to be null — base 10000 and half_split in
// every form, the factor within 1e-3 (5000/4096 = 1.2207 reads 1.22, as
// in float16; the 2e-2 snap of half angles would read 1.2 and fail).
func TestDynamicNTKInBFloat16GoBuilt(t *testing.T) {
	if testing.Short() {
		t.Skip("five forms at lengths up to 65536 (forty seconds; -short): make test runs it")
	}
	dynamicNTKInHalf(t, graph.BFloat16)
}

// dynamicNTKInHalf builds narrow Llamas in dt in every RoPE form, audits
// each (rope, half_split, base 10000, scaling none, not dynamic), extends
// it by dynamic NTK and reads the rule back (ntk, the factor to 1e-3,
// dynamic, the original length, base 10000).
func dynamicNTKInHalf(t *testing.T, dt graph.DataType) {
	forms := append(slices.Clone(testmodels.LlamaRoPEForms),
		testmodels.LlamaRoPEForm{Name: "computed_no_position_ids", Edit: func(c *testmodels.LlamaConfig) { c.Opset, c.NoPositionIDs = 18, true }})
	for _, f := range forms {
		for _, c := range []struct{ orig, to int }{{1024, 8192}, {2048, 8192}, {4096, 8192}, {4096, 5000}, {512, 65536}} {
			what := fmt.Sprintf("%s from %d to %d", f.Name, c.orig, c.to)
			cfg := testmodels.DefaultLlama
			cfg.Layers, cfg.Hidden, cfg.Heads, cfg.KVHeads, cfg.FFN, cfg.MaxPositions = 1, 32, 2, 1, 64, c.orig
			cfg.DType = dt
			f.Edit(&cfg)
			if c.orig == 1024 { // the model itself: in dt, no scaling
				m := testmodels.Llama(cfg)
				if lt := m.Graph.Outputs[0].Type.ElemType(); lt != dt {
					t.Fatalf("%s: logits are %v, want %v", f.Name, lt, dt)
				}
				for _, v := range m.Graph.Initializers {
					if strings.HasPrefix(v.Name, "cos_cache") && v.Const.DataType() != dt {
						t.Fatalf("%s: %s is %v, want %v", f.Name, v.Name, v.Const.DataType(), dt)
					}
				}
				rep, _, err := audit.AuditModel(m, f.Name, passes.Options{})
				if err != nil {
					t.Fatalf("%s: %v", f.Name, err)
				}
				n := 0
				for _, fd := range rep.Findings {
					if p, ok := fd.Params.(*rope.Params); ok {
						n++
						if p.Scaling == nil || *p.Scaling != "none" || p.Dynamic != nil || p.Base == nil || *p.Base != 10000 || p.Layout != "half_split" {
							t.Errorf("%s: base %v, layout %v, scaling %v, dynamic %v", f.Name, fmtPtr(p.Base), p.Layout, fmtPtr(p.Scaling), fmtPtr(p.Dynamic))
						}
					}
				}
				if n != 1 {
					t.Errorf("%s: %d RoPE findings in %v", f.Name, n, rep.Findings)
				}
			}
			x, err := ExtendModel(testmodels.Llama(cfg), rewrite.ExtendOptions{To: c.to, Method: rewrite.MethodDynamicNTK, OriginalMax: c.orig})
			if err != nil {
				t.Errorf("%s: %v", what, err)
				continue
			}
			rep, _, err := audit.AuditModel(x.M, what, passes.Options{})
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			var ps []*rope.Params
			for _, fd := range rep.Findings {
				if p, ok := fd.Params.(*rope.Params); ok {
					ps = append(ps, p)
				}
			}
			if len(ps) != 1 || ps[0].Scaling == nil || ps[0].Base == nil || *ps[0].Base != 10000 {
				t.Errorf("%s: RoPE findings %v", what, rep.Findings)
				continue
			}
			p, factor := ps[0], float64(c.to)/float64(c.orig)
			if *p.Scaling != "ntk" || p.Factor == nil || math.Abs(*p.Factor/factor-1) > 1e-3 || p.Dynamic == nil || !*p.Dynamic ||
				p.OriginalMaxPositions == nil || *p.OriginalMaxPositions != c.orig {
				t.Errorf("%s: scaling %s, factor %v (want %.6g), dynamic %v, original %v", what, *p.Scaling, fmtPtr(p.Factor), factor, fmtPtr(p.Dynamic), fmtPtr(p.OriginalMaxPositions))
			} else {
				t.Logf("%v %s: factor %.7g (want %.7g)", dt, what, *p.Factor, factor)
			}
		}
	}
}
