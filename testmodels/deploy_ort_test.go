//go:build ort

package testmodels_test

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/ortpeer"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestDifferentialDeploymentForms runs each deployment-form model (GenAI's
// GroupQueryAttention with do_rotary, its MatMulNBits int4 Llama,
// RotaryEmbedding + MultiHeadAttention, EmbedLayerNormalization +
// Attention, opset-24 Attention with TensorScatter) in onnxpe and ONNX
// Runtime 1.30 on a padded prefill and a decoding step, and compares every
// output (logits and caches).
func TestDifferentialDeploymentForms(t *testing.T) {
	if err := ortpeer.Init(""); err != nil {
		t.Fatal(err)
	}
	cfg := testmodels.DefaultDeploy
	steps := []struct {
		name string
		st   testmodels.DeployStep
	}{
		{"prefill_padded", testmodels.DeployStep{Batch: 2, Seq: 5, Lens: []int{5, 3}}},
		{"decode_past5", testmodels.DeployStep{Batch: 2, Seq: 1, Past: 5, Lens: []int{6, 4}}},
		{"decode_past11_batch1", testmodels.DeployStep{Batch: 1, Seq: 1, Past: 11}},
	}
	for _, form := range testmodels.DeployForms {
		t.Run(string(form), func(t *testing.T) {
			m := testmodels.BuildDeploy(form, cfg)
			sess, peer := bothSessions(t, m)
			for i, s := range steps {
				st := s.st
				if form == testmodels.FormEmbedLNAttention && st.Past > 0 {
					// An encoder has no decoding step: another padded batch.
					st = testmodels.DeployStep{Batch: 3, Seq: 4 + i, Lens: []int{4 + i, 2, 3}}
				}
				in := testmodels.DeployInputs(form, cfg, st, uint64(10+i))
				got, err := sess.Run(in)
				if err != nil {
					t.Fatalf("%s: onnxpe: %v", s.name, err)
				}
				want, err := peer.Run(in, nil)
				if err != nil {
					t.Fatalf("%s: ONNX Runtime: %v", s.name, err)
				}
				for _, o := range m.Graph.Outputs {
					d, scale := maxDiff(got[o.Name], want[o.Name])
					if d < 0 {
						t.Fatalf("%s: output %s: shapes %v and %v", s.name, o.Name, got[o.Name], want[o.Name])
					}
					if d > 1e-5*math.Max(1, scale) {
						t.Errorf("%s: output %s %v: max difference %.3g (largest %.3g)", s.name, o.Name, want[o.Name], d, scale)
					} else {
						t.Logf("%s: output %s %v: max difference %.3g", s.name, o.Name, want[o.Name], d)
					}
				}
			}
		})
	}
}

// maxDiff is the largest absolute difference of two tensors and the
// largest magnitude of want (-1 when the shapes differ).
func maxDiff(got, want *kernels.Tensor) (float64, float64) {
	if got == nil || want == nil || fmt.Sprint(got.Shape) != fmt.Sprint(want.Shape) {
		return -1, 0
	}
	g, w := got.Float64s(), want.Float64s()
	d, s := 0.0, 0.0
	for i := range w {
		if math.IsNaN(g[i]) != math.IsNaN(w[i]) {
			return math.Inf(1), 0
		}
		d = math.Max(d, math.Abs(g[i]-w[i]))
		s = math.Max(s, math.Abs(w[i]))
	}
	return d, s
}

// TestDifferentialGQAChunkAfterCache holds onnxpe's GroupQueryAttention to
// ONNX Runtime's contract for several new tokens after a cache: ONNX
// Runtime 1.30 (group_query_attention_helper.h, "batch_size must be 1
// when sequence_length > 1 and past context is given") runs such a
// chunk for one sequence only, so both refuse a batch of two and both
// run, equally, the same chunk for one sequence.
func TestDifferentialGQAChunkAfterCache(t *testing.T) {
	if err := ortpeer.Init(""); err != nil {
		t.Fatal(err)
	}
	cfg := testmodels.DefaultDeploy
	m := testmodels.BuildDeploy(testmodels.FormGenAIGQA, cfg)
	sess, peer := bothSessions(t, m)
	for _, st := range []testmodels.DeployStep{{Batch: 2, Seq: 4, Past: 5}, {Batch: 2, Seq: 4, Past: 5, Lens: []int{9, 7}}} {
		in := testmodels.DeployInputs(testmodels.FormGenAIGQA, cfg, st, 3)
		_, errGo := sess.Run(in)
		_, errORT := peer.Run(in, nil)
		t.Logf("batch %d, 4 tokens after 5, lengths %v: onnxpe: %v; ONNX Runtime: %v", st.Batch, st.Lens, errGo, errORT)
		if errGo == nil || errORT == nil {
			t.Errorf("batch %d, lengths %v: onnxpe refuses: %v; ONNX Runtime refuses: %v", st.Batch, st.Lens, errGo != nil, errORT != nil)
		}
	}
	in := testmodels.DeployInputs(testmodels.FormGenAIGQA, cfg, testmodels.DeployStep{Batch: 1, Seq: 4, Past: 5}, 3)
	got, err := sess.Run(in)
	if err != nil {
		t.Fatalf("onnxpe: %v", err)
	}
	want, err := peer.Run(in, nil)
	if err != nil {
		t.Fatalf("ONNX Runtime: %v", err)
	}
	for _, o := range m.Graph.Outputs {
		if d, scale := maxDiff(got[o.Name], want[o.Name]); d < 0 || d > 1e-5*math.Max(1, scale) {
			t.Errorf("batch 1, 4 tokens after 5: output %s: max difference %.3g", o.Name, d)
		}
	}
}

// TestDifferentialHalfGenAI runs GenAI's fp16 builds (GroupQueryAttention
// with do_rotary on float16 q/k/v, past caches and cos/sin caches;
// float16 weights, norms and logits; in the int4 build every projection a
// MatMulNBits on float16 activations with float16 scales) in onnxpe and
// ONNX Runtime on a padded prefill and decoding steps. onnxpe widens each
// op's float16 inputs to float32 and rounds its outputs once; ONNX
// Runtime's CPU kernels round in other places (float16 MatMul
// accumulation, GroupQueryAttention's float16 softmax input), so outputs
// agree to a float16 step or two of their scale (2e-3 of it, float16's
// step being 2^-10 ~ 9.8e-4 of a value; measured for both builds: the
// first layer's caches equal, the rest within 0.0025 at a scale of 2.2 to
// 3.8), not to float32's 1e-5.
func TestDifferentialHalfGenAI(t *testing.T) {
	if err := ortpeer.Init(""); err != nil {
		t.Fatal(err)
	}
	for _, form := range []testmodels.DeployForm{testmodels.FormGenAIGQA, testmodels.FormGenAIInt4} {
		t.Run(string(form), func(t *testing.T) {
			cfg := testmodels.DefaultDeploy
			cfg.DType = graph.Float16
			m := testmodels.BuildDeploy(form, cfg)
			sess, peer := bothSessions(t, m)
			for i, st := range []testmodels.DeployStep{
				{Batch: 2, Seq: 5, Lens: []int{5, 3}},
				{Batch: 2, Seq: 1, Past: 5, Lens: []int{6, 4}},
				{Batch: 1, Seq: 1, Past: 11},
			} {
				in := testmodels.DeployInputs(form, cfg, st, uint64(10+i))
				got, err := sess.Run(in)
				if err != nil {
					t.Fatalf("step %d: onnxpe: %v", i, err)
				}
				want, err := peer.Run(in, got) // float16 outputs: their shapes from onnxpe's
				if err != nil {
					t.Fatalf("step %d: ONNX Runtime: %v", i, err)
				}
				for _, o := range m.Graph.Outputs {
					if got[o.Name].DType != graph.Float16 || want[o.Name].DType != graph.Float16 {
						t.Errorf("step %d: output %s is %v in onnxpe, %v in ONNX Runtime", i, o.Name, got[o.Name].DType, want[o.Name].DType)
					}
					d, scale := maxDiff(got[o.Name], want[o.Name])
					if d < 0 || d > 2e-3*math.Max(1, scale) {
						t.Errorf("step %d: output %s %v: max difference %.3g (largest %.3g)", i, o.Name, want[o.Name], d, scale)
					} else {
						t.Logf("step %d: output %s %v: max difference %.3g (largest %.3g)", i, o.Name, want[o.Name], d, scale)
					}
				}
			}
		})
	}
}

// bothSessions saves m to a temporary file and opens it in onnxpe's
// executor and in ONNX Runtime (one thread, closed when the test ends).
func bothSessions(t *testing.T, m *graph.Model) (*kernels.Session, *ortpeer.Session) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.onnx")
	if err := m.Save(path, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	sess, err := kernels.NewSession(m, kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ortpeer.NewSession(path, m, ortpeer.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	return sess, peer
}
