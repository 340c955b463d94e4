package testmodels

import (
	"fmt"
	"path/filepath"

	"github.com/onnxpe/onnxpe/graph"
)

// Class 2, generation: the decoder a generation op runs, in a file whose
// opset imports leave out the op's domain.

func generationForms(built func(func() *graph.Model) func(string) (*graph.Model, error)) []GeneralityForm {
	return []GeneralityForm{
		{
			Name: "learned_beamsearch_eln_decoder_no_ms_import", Class: 2,
			Note: "GPT-2 as ONNX Runtime's convert_generation.py writes it for beam search: one com.microsoft BeamSearch node " +
				"(model_type 0, eos and pad token ids, no_repeat_ngram_size, early_stopping) over input_ids, max_length, " +
				"min_length, num_beams, num_return_sequences, length_penalty and repetition_penalty, whose decoder attribute is " +
				"the optimized GPT-2 past decoder (input_ids, position_ids [batch_size, seq_len], attention_mask [batch_size, " +
				"total_seq_len], past_0, past_1): EmbedLayerNormalization (wte [96, 32], wpe [64, 32], position_ids) whose " +
				"embedding_sum is the residual, two com.microsoft Attention layers (unidirectional, 2 heads, the mask and the " +
				"past [2, batch, 2, past, 16] as inputs), the logits through the transposed wte; the decoder's initializers " +
				"moved to the main graph (move_initializers). The model's opset imports are the decoder model's, and here " +
				"leave out com.microsoft (ai.onnx 17 only); the file is saved and loaded back",
			Build: func(dir string) (*graph.Model, error) { return saveLoad(beamSearchGPT2(), dir) },
			Truth: Truth{
				Schemes: []string{"learned_absolute"},
				Layers:  layerSchemes("learned_absolute", "learned_absolute"),
				Findings: []FindingTruth{{Scheme: "learned_absolute", Layers: []int{0, 1}, Fused: true, Params: map[string]any{
					"max_positions": 64.0, "dim": 32.0, "position_offset": 0.0}}},
			},
		},
	}
}

// beamSearchGPT2 builds the BeamSearch model.
func beamSearchGPT2() *graph.Model {
	const d, heads, hd, vocab, rows, layers = 32, 2, 16, 96, 64, 2
	b := newGen("onnxruntime.transformers", 84, graph.Opset{Domain: "", Version: 17})
	dec := &gen{m: b.m, g: b.g.NewSubgraph("gpt2 decoder"), rng: b.rng}
	ids := dec.input("input_ids", graph.Int32, sym("batch_size"), sym("seq_len"))
	pos := dec.input("position_ids", graph.Int32, sym("batch_size"), sym("seq_len"))
	mask := dec.input("attention_mask", graph.Int32, sym("batch_size"), sym("total_seq_len"))
	wte := b.wScaled("transformer.wte.weight", 0.5, vocab, d)
	wpe := b.wScaled("transformer.wpe.weight", 0.5, rows, d)
	eln := dec.g.NewNode("EmbedLayerNormalization", "com.microsoft",
		[]*graph.Value{ids, nil, wte, wpe, nil, b.gain("transformer.h.0.ln_1.weight", d), b.wScaled("transformer.h.0.ln_1.bias", 0.02, d), nil, pos}, 3,
		graph.FloatAttr("epsilon", 1e-5))
	dec.g.Append(eln)
	h, x := eln.Outputs()[0], eln.Outputs()[2]
	for l := 0; l < layers; l++ {
		pre := fmt.Sprintf("transformer.h.%d.", l)
		past := dec.input(fmt.Sprintf("past_%d", l), graph.Float, fixed(2), sym("batch_size"), fixed(heads), sym("past_seq_len"), fixed(hd))
		if l > 0 {
			h = b.layerNormIn(dec, x, pre+"ln_1", d)
		}
		att := dec.g.NewNode("Attention", "com.microsoft",
			[]*graph.Value{h, b.w(pre+"attn.c_attn.weight", d, 3*d), b.wScaled(pre+"attn.c_attn.bias", 0.02, 3*d), mask, past}, 2,
			graph.IntAttr("num_heads", heads), graph.IntAttr("unidirectional", 1))
		dec.g.Append(att)
		x = dec.op("Add", nil, x, dec.op("Add", nil, dec.op("MatMul", nil, att.Outputs()[0], b.w(pre+"attn.c_proj.weight", d, d)), b.wScaled(pre+"attn.c_proj.bias", 0.02, d)))
		m := b.layerNormIn(dec, x, pre+"ln_2", d)
		fc := dec.op("Add", nil, dec.op("MatMul", nil, m, b.w(pre+"mlp.c_fc.weight", d, 4*d)), b.wScaled(pre+"mlp.c_fc.bias", 0.02, 4*d))
		fc = dec.op("Mul", nil, fc, dec.op("Sigmoid", nil, dec.op("Mul", nil, fc, b.f0(1.702))))
		x = dec.op("Add", nil, x, dec.op("Add", nil, dec.op("MatMul", nil, fc, b.w(pre+"mlp.c_proj.weight", 4*d, d)), b.wScaled(pre+"mlp.c_proj.bias", 0.02, d)))
		dec.output(att.Outputs()[1], fmt.Sprintf("present_%d", l), graph.Float, fixed(2), sym("batch_size"), fixed(heads), sym("total_seq_len"), fixed(hd))
	}
	logits := dec.op("MatMul", nil, b.layerNormIn(dec, x, "transformer.ln_f", d), dec.op("Transpose", permAttr(1, 0), wte))
	dec.output(logits, "logits", graph.Float, sym("batch_size"), sym("seq_len"), fixed(vocab))
	dec.g.Outputs = append(dec.g.Outputs[len(dec.g.Outputs)-1:], dec.g.Outputs[:len(dec.g.Outputs)-1]...)

	in := []*graph.Value{b.input("input_ids", graph.Int32, sym("batch_size"), sym("sequence_length"))}
	for _, n := range []string{"max_length", "min_length", "num_beams", "num_return_sequences"} {
		in = append(in, b.input(n, graph.Int32, fixed(1)))
	}
	in = append(in, b.input("length_penalty", graph.Float, fixed(1)), b.input("repetition_penalty", graph.Float, fixed(1)), nil, nil, nil)
	bs := b.g.NewNode("BeamSearch", "com.microsoft", in, 1,
		graph.IntAttr("eos_token_id", 2), graph.IntAttr("pad_token_id", 2), graph.IntAttr("no_repeat_ngram_size", 0),
		graph.IntAttr("early_stopping", 0), graph.IntAttr("model_type", 0), graph.GraphAttr("decoder", dec.g))
	bs.Name = "BeamSearch_gpt2"
	b.g.Append(bs)
	b.output(bs.Outputs()[0], "sequences", graph.Int32, sym("batch_size"), sym("num_return_sequences"), sym("max_length"))
	return b.m
}

// saveLoad saves m into dir and loads it back: the audit reads the file,
// with the repairs Load records.
func saveLoad(m *graph.Model, dir string) (*graph.Model, error) {
	p := filepath.Join(dir, "model.onnx")
	if err := m.Save(p, graph.SaveOptions{}); err != nil {
		return nil, err
	}
	return graph.Load(p)
}

// layerNormIn is LayerNormalization in graph in.g with b's (the main
// graph's) weights.
func (b *gen) layerNormIn(in *gen, x *graph.Value, name string, d int64) *graph.Value {
	return in.op("LayerNormalization", []*graph.Attr{graph.IntAttr("axis", -1), graph.FloatAttr("epsilon", 1e-5)},
		x, b.gain(name+".weight", d), b.wScaled(name+".bias", 0.02, d))
}
