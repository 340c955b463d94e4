package testmodels_test

import (
	"math"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestDeployFormsCacheConsistent checks the KV caches of the decoder
// forms in onnxpe alone: a prompt of 6 tokens gives the same last logits
// as a prompt of its first 5 followed by one decoding step that reads the
// caches the prompt left. In float16 (GenAI's fp16 builds) the bound is
// float16's, not float32's 1e-5 (see below).
func TestDeployFormsCacheConsistent(t *testing.T) {
	type cacheCase struct {
		form  testmodels.DeployForm
		dtype graph.DataType
	}
	var cases []cacheCase
	for _, form := range []testmodels.DeployForm{testmodels.FormGenAIGQA, testmodels.FormGenAIInt4, testmodels.FormRotaryMHA, testmodels.FormStaticCache24} {
		cases = append(cases, cacheCase{form, graph.Float})
	}
	// GenAI's fp16 builds (GroupQueryAttention, and MatMulNBits with
	// float16 scales).
	cases = append(cases, cacheCase{testmodels.FormGenAIGQA, graph.Float16}, cacheCase{testmodels.FormGenAIInt4, graph.Float16})
	for _, cc := range cases {
		form := cc.form
		name := string(form)
		if cc.dtype != graph.Float {
			name += "_" + cc.dtype.String()
		}
		cfg := testmodels.DefaultDeploy
		cfg.DType = cc.dtype
		t.Run(name, func(t *testing.T) {
			m := testmodels.BuildDeploy(form, cfg)
			sess, err := kernels.NewSession(m, kernels.Options{})
			if err != nil {
				t.Fatal(err)
			}
			full := testmodels.DeployInputs(form, cfg, testmodels.DeployStep{Batch: 1, Seq: 6, Capacity: 8}, 1)
			want, err := sess.Run(full)
			if err != nil {
				t.Fatal(err)
			}
			// The same tokens: the first five, then the sixth.
			ids := full["input_ids"].Int64s()
			first := testmodels.DeployInputs(form, cfg, testmodels.DeployStep{Batch: 1, Seq: 5, Capacity: 8}, 1)
			first["input_ids"] = kernels.FromSlice([]int{1, 5}, append([]int64(nil), ids[:5]...))
			if form == testmodels.FormStaticCache24 {
				for k, v := range full {
					if len(v.Shape) == 4 {
						first[k] = v
					}
				}
			}
			got1, err := sess.Run(first)
			if err != nil {
				t.Fatal(err)
			}
			step := testmodels.DeployInputs(form, cfg, testmodels.DeployStep{Batch: 1, Seq: 1, Past: 5, Capacity: 8}, 2)
			step["input_ids"] = kernels.FromSlice([]int{1, 1}, []int64{ids[5]})
			for k := range step {
				switch form {
				case testmodels.FormStaticCache24:
					if len(step[k].Shape) == 4 { // key_cache.L <- updated_key_cache.L
						step[k] = got1["updated_"+k]
					}
				default:
					if len(step[k].Shape) == 4 { // past_key_values.L.key <- present.L.key
						step[k] = got1["present"+k[len("past_key_values"):]]
					}
				}
			}
			got, err := sess.Run(step)
			if err != nil {
				t.Fatal(err)
			}
			w, g := want["logits"].Float64s(), got["logits"].Float64s()
			V := cfg.Vocab
			worst, scale := 0.0, 0.0
			for i := range V {
				worst = math.Max(worst, math.Abs(w[5*V+i]-g[i]))
				scale = math.Max(scale, math.Abs(w[5*V+i]))
			}
			tol := 1e-5
			if cc.dtype == graph.Float16 {
				// The two runs compute the same function but round to
				// float16 in different places: the decoding step reads
				// the keys and values the prompt used in float32 as
				// rounded float16 caches, and float32 sums whose order
				// depends on the number of rows (one token or six) can
				// round an intermediate one float16 step apart. Each is a
				// relative perturbation of at most u = 2^-11 that the two
				// normalized layers carry to the logits as a few u of
				// their scale; the logits themselves are then rounded in
				// each run (together at most one step, eps = 2^-10 of
				// their scale). 4*eps of the largest logit allows one step
				// for that rounding and three for the perturbations
				// (measured: 0.0022 at a scale of 2.65, 0.83*eps; with
				// two key cache rows swapped, keys rotated for the wrong
				// positions, the logits are off by 0.4 to 1.9).
				tol = 4 * 0x1p-10 * scale
			}
			t.Logf("the decoding step's logits differ from the prompt's by %.3g (largest %.3g)", worst, scale)
			if math.IsNaN(worst) || worst > tol {
				t.Errorf("the decoding step's logits differ from the prompt's by %.3g (largest %.3g, allowed %.3g)", worst, scale, tol)
			}
		})
	}
}
