package kernels

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

// ONNX Runtime contrib ops of its transformer optimizer's output besides
// attention: EmbedLayerNormalization, GemmFastGelu and BiasAdd; and the
// generation loops (BeamSearch and friends), which are named and refused.

// embedLayerNorm is com.microsoft EmbedLayerNormalization: for token
// (b, s), x = word_embedding[input_ids[b,s]] + position_embedding[p] (+
// segment_embedding[segment_ids[b,s]]) with p = position_ids[b,s] (or
// position_ids[0,s] for a (1, S) position_ids, s without them); output
// is LayerNorm(x) * gamma + beta, computed in float32 in the order ONNX
// Runtime's CPU kernel uses. Outputs: output (B, S, hidden), mask_index
// (B) int32 (the number of ones in each mask row, zeros without a mask),
// embedding_sum (B, S, hidden) = x.
func embedLayerNorm(c *Call, in []*Tensor) ([]*Tensor, error) {
	ids, segIDs, word, posE, segE := in[0], optIn(in, 1), in[2], in[3], optIn(in, 4)
	gamma, beta, mask, posIDs := in[5], optIn(in, 6), optIn(in, 7), optIn(in, 8)
	if len(ids.Shape) != 2 {
		return nil, fmt.Errorf("input_ids must be 2-D, got %v", ids.Shape)
	}
	B, S := ids.Shape[0], ids.Shape[1]
	if len(word.Shape) != 2 || len(posE.Shape) != 2 || word.Shape[1] != posE.Shape[1] {
		return nil, fmt.Errorf("word_embedding %v and position_embedding %v must be 2-D with the same width", word.Shape, posE.Shape)
	}
	hid := word.Shape[1]
	if segE != nil && (len(segE.Shape) != 2 || segE.Shape[1] != hid) {
		return nil, fmt.Errorf("segment_embedding %v must be (n, %d)", segE.Shape, hid)
	}
	if gamma.Len() != hid || (beta != nil && beta.Len() != hid) {
		return nil, fmt.Errorf("gamma and beta must have %d elements", hid)
	}
	for _, t := range []*Tensor{segIDs, mask} {
		if t != nil && !equalShape(t.Shape, ids.Shape) {
			return nil, fmt.Errorf("segment_ids and mask must have the shape of input_ids %v, got %v", ids.Shape, t.Shape)
		}
	}
	if segIDs != nil && segE == nil {
		return nil, fmt.Errorf("segment_ids without segment_embedding")
	}
	var pos []int64
	posRow := 0 // 0: (1, S) position_ids shared by the batch
	if posIDs != nil {
		switch {
		case len(posIDs.Shape) == 2 && posIDs.Shape[1] == S && posIDs.Shape[0] == B:
			posRow = S
		case len(posIDs.Shape) == 2 && posIDs.Shape[1] == S && posIDs.Shape[0] == 1:
		default:
			return nil, fmt.Errorf("position_ids %v must be (%d, %d) or (1, %d)", posIDs.Shape, B, S, S)
		}
		pos = posIDs.Int64s()
	}
	idv := ids.Int64s()
	var segv []int64
	if segIDs != nil {
		segv = segIDs.Int64s()
	}
	wd, pd := Data[float32](word), Data[float32](posE)
	var sd, bd []float32
	if segE != nil {
		sd = Data[float32](segE)
	}
	if beta != nil {
		bd = Data[float32](beta)
	}
	gd := Data[float32](gamma)
	out := c.alloc(graph.Float, B, S, hid)
	sum := c.alloc(graph.Float, B, S, hid)
	od, xd := Data[float32](out), Data[float32](sum)
	eps := c.Float("epsilon", 1e-12)
	for t := range B * S {
		b, s := t/S, t%S
		w := idv[t]
		if w < 0 || w >= int64(word.Shape[0]) {
			return nil, fmt.Errorf("input_ids[%d, %d] = %d is outside the word embedding of %d rows", b, s, w, word.Shape[0])
		}
		p := int64(s)
		if pos != nil {
			p = pos[b*posRow+s]
		}
		if p < 0 || p >= int64(posE.Shape[0]) {
			return nil, fmt.Errorf("position %d of token (%d, %d) is outside the position embedding of %d rows", p, b, s, posE.Shape[0])
		}
		var sg []float32
		if segv != nil {
			if g := segv[t]; g < 0 || g >= int64(segE.Shape[0]) {
				return nil, fmt.Errorf("segment_ids[%d, %d] = %d is outside the segment embedding of %d rows", b, s, g, segE.Shape[0])
			}
			sg = sd[int(segv[t])*hid : int(segv[t]+1)*hid]
		}
		wr, pr := wd[int(w)*hid:int(w+1)*hid], pd[int(p)*hid:int(p+1)*hid]
		x, y := xd[t*hid:(t+1)*hid], od[t*hid:(t+1)*hid]
		var acc float32
		for i := range hid {
			v := wr[i] + pr[i]
			if sg != nil {
				v += sg[i]
			}
			x[i] = v
			acc += v
		}
		mean := acc / float32(hid)
		acc = 0
		for i := range hid {
			a := x[i] - mean
			y[i] = a
			acc += a * a
		}
		e := float32(math.Sqrt(float64(acc/float32(hid) + eps)))
		for i := range hid {
			v := y[i] / e * gd[i]
			if bd != nil {
				v += bd[i]
			}
			y[i] = v
		}
	}
	mi := c.zeros(graph.Int32, B)
	md := Data[int32](mi)
	if mask != nil {
		mv := mask.Int64s()
		for b := range B {
			for _, v := range mv[b*S : (b+1)*S] {
				if v == 1 {
					md[b]++
				}
			}
		}
	}
	return []*Tensor{out, mi, sum}, nil
}

// gemmFastGelu is com.microsoft GemmFastGelu: FastGelu(X.W + bias), X
// (..., K), W (K, N), bias (N).
func gemmFastGelu(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, w, bias := in[0], in[1], optIn(in, 2)
	if len(w.Shape) != 2 {
		return nil, fmt.Errorf("W must be 2-D, got %v", w.Shape)
	}
	y, err := matmulNumpy(c, x, w, 1, false, false)
	if err != nil {
		return nil, err
	}
	if bias != nil {
		if bias.Len() != w.Shape[1] {
			return nil, fmt.Errorf("bias must have %d elements, got %v", w.Shape[1], bias.Shape)
		}
		if y, err = binary(c, opAdd, y, bias.Reshaped(w.Shape[1])); err != nil {
			return nil, err
		}
	}
	return floatUnary32(geluTanhSlice, geluTanh)(c, []*Tensor{y})
}

// biasAdd is com.microsoft BiasAdd: X (B, S, C) + bias (C) + skip (B, S,
// C), added in that order.
func biasAdd(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, bias, skip := in[0], in[1], in[2]
	if len(x.Shape) != 3 || !equalShape(x.Shape, skip.Shape) || len(bias.Shape) != 1 || bias.Shape[0] != x.Shape[2] {
		return nil, fmt.Errorf("X %v, bias %v and skip %v must be (B, S, C), (C) and (B, S, C)", x.Shape, bias.Shape, skip.Shape)
	}
	y, err := binary(c, opAdd, x, bias)
	if err != nil {
		return nil, err
	}
	y, err = binary(c, opAdd, y, skip)
	return []*Tensor{y}, err
}

// generationOps are ONNX Runtime's contrib ops that run a whole
// generation loop (a decoder subgraph called once per token, with search
// and sampling): onnxpe's executor does not run them.
var generationOps = map[string]bool{
	"BeamSearch": true, "GreedySearch": true, "WhisperBeamSearch": true, "Sampling": true,
}

// generationOpError is the error of a model that contains one of
// generationOps.
func generationOpError(op string) error {
	return fmt.Errorf("com.microsoft.%s runs a whole generation loop (decoder subgraph, search and sampling) inside ONNX Runtime; onnxpe does not execute it: run the decoder model it wraps instead: %w", op, ErrUnsupportedOp)
}

func init() {
	ms := func(op string, fn Kernel) { Register(DomainMicrosoft, op, 1, 0, fn, 0) }
	Register(DomainMicrosoft, "EmbedLayerNormalization", 1, 0, float32Kernel(embedLayerNorm), 0)
	ms("GemmFastGelu", gemmFastGelu)
	ms("BiasAdd", biasAdd)
}
