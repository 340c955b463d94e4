package testmodels_test

import (
	"math"
	"testing"

	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestDeployFormsCacheConsistent checks the KV caches of the decoder
// forms in onnxpe alone: a prompt of 6 tokens gives the same last logits
// as a prompt of its first 5 followed by one decoding step that reads the
// caches the prompt left.
func TestDeployFormsCacheConsistent(t *testing.T) {
	cfg := testmodels.DefaultDeploy
	for _, form := range []testmodels.DeployForm{testmodels.FormGenAIGQA, testmodels.FormGenAIInt4, testmodels.FormRotaryMHA, testmodels.FormStaticCache24} {
		t.Run(string(form), func(t *testing.T) {
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
			worst := 0.0
			for i := range V {
				worst = math.Max(worst, math.Abs(w[5*V+i]-g[i]))
			}
			if worst > 1e-5 {
				t.Errorf("the decoding step's logits differ from the prompt's by %.3g", worst)
			}
		})
	}
}
