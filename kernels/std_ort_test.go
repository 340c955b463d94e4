//go:build ort

package kernels_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// Differential tests against ONNX Runtime 1.30 for the standard ops whose
// attributes ONNX's backend tests leave mostly untested: the recurrent
// layers in every direction and layout, with sequence_lens, clip, initial
// states, peepholes and other activations.

func TestDifferentialRecurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 1))
	const seq, batch, in, hid = 5, 3, 4, 6
	lens := i32([]int{batch}, 5, 2, 4)
	for _, op := range []string{"RNN", "GRU", "LSTM"} {
		gates := map[string]int{"RNN": 1, "GRU": 3, "LSTM": 4}[op]
		for _, dir := range []string{"forward", "reverse", "bidirectional"} {
			// ONNX Runtime refuses layout 1 (batch first): TestRecurrentLayouts
			// checks it against layout 0.
			for _, layout := range []int64{0} {
				for _, variant := range []string{"plain", "lens+clip+init", "activations"} {
					dirs := 1
					if dir == "bidirectional" {
						dirs = 2
					}
					xShape := []int{seq, batch, in}
					stShape := []int{dirs, batch, hid}
					if layout == 1 {
						xShape = []int{batch, seq, in}
						stShape = []int{batch, dirs, hid}
					}
					attrs := attrsOf("direction", dir, "hidden_size", hid, "layout", int(layout))
					ins := []*kernels.Tensor{rnd(rng, 1, xShape...), rnd(rng, 0.5, dirs, gates*hid, in), rnd(rng, 0.5, dirs, gates*hid, hid), rnd(rng, 0.3, dirs, 2*gates*hid)}
					if variant != "plain" {
						ins = append(ins, lens, rnd(rng, 0.5, stShape...))
						if op == "LSTM" {
							ins = append(ins, rnd(rng, 0.5, stShape...), rnd(rng, 0.3, dirs, 3*hid))
						}
					}
					switch {
					case variant == "lens+clip+init":
						attrs = append(attrs, attrsOf("clip", 0.7)...)
						if op == "GRU" {
							attrs = append(attrs, attrsOf("linear_before_reset", 1)...)
						}
					case variant == "activations":
						acts := map[string][]string{"RNN": {"Relu"}, "GRU": {"HardSigmoid", "Softsign"}, "LSTM": {"HardSigmoid", "Elu", "ScaledTanh"}}[op]
						var all []string
						for range dirs {
							all = append(all, acts...)
						}
						attrs = append(attrs, graph.StringsAttr("activations", all...))
						if op == "LSTM" {
							// HardSigmoid, Elu, ScaledTanh take 1+1+1 alphas
							// and 1+0+1 betas per direction.
							var al, be []float32
							for range dirs {
								al = append(al, 0.3, 0.9, 1.2)
								be = append(be, 0.4, 0.8)
							}
							attrs = append(attrs, graph.FloatsAttr("activation_alpha", al...), graph.FloatsAttr("activation_beta", be...))
						}
					}
					nout := 2
					if op == "LSTM" {
						nout = 3
					}
					outs := make([]bool, nout)
					for i := range outs {
						outs[i] = true
					}
					name := fmt.Sprintf("%s/%s/layout%d/%s", op, dir, layout, variant)
					t.Run(name, func(t *testing.T) {
						diffCase(t, opCase{name: name, op: op, opset: 22, attrs: attrs, ins: ins, outs: outs})
					})
				}
			}
		}
	}
}
