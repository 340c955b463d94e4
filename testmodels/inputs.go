package testmodels

import (
	"fmt"
	"math/rand/v2"

	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// Sizes are the dynamic dimensions of a synthesized input set.
type Sizes struct {
	Batch, Seq, Past int
}

// dim resolves a manifest dimension (a number or a symbol).
func (s Sizes) dim(d any) (int, error) {
	switch d := d.(type) {
	case float64:
		return int(d), nil
	case string:
		switch d {
		case "batch":
			return s.Batch, nil
		case "sequence":
			return s.Seq, nil
		case "past_sequence":
			return s.Past, nil
		case "total_sequence":
			return s.Past + s.Seq, nil
		}
	}
	return 0, fmt.Errorf("testmodels: unknown dimension %v", d)
}

// RandomInputs synthesizes inputs that respect each input's meaning: token
// ids within the vocabulary (pad id where the mask is 0), masks of 0/1 with
// padding on the model's side (every row keeps a real token), position ids
// counting real tokens from 0 (as Hugging Face derives them from the mask),
// token types of 0/1, and normal values for pixels and past keys/values.
func (e *Entry) RandomInputs(rng *rand.Rand, s Sizes) (map[string]*kernels.Tensor, error) {
	out := map[string]*kernels.Tensor{}
	shapes := map[string][]int{}
	hasPast := false
	for _, in := range e.Inputs {
		hasPast = hasPast || in.Role == "past_key"
	}
	if !hasPast {
		s.Past = 0 // positions start at 0 without a cache
	}
	for _, in := range e.Inputs {
		shape := make([]int, len(in.Shape))
		for i, d := range in.Shape {
			if d == "height" || d == "width" {
				// An image of open size: whole patches, a grid of rows ×
				// (rows+1) patches of about Seq (more columns than rows).
				if in.PatchSize <= 0 {
					return nil, fmt.Errorf("%s: input %s: an open %v without a patch size", e.Name, in.Name, d)
				}
				rows := 1
				for (rows+1)*(rows+2) <= s.Seq {
					rows++
				}
				shape[i] = rows * in.PatchSize
				if d == "width" {
					shape[i] = (rows + 1) * in.PatchSize
				}
				continue
			}
			n, err := s.dim(d)
			if err != nil {
				return nil, fmt.Errorf("%s: input %s: %w", e.Name, in.Name, err)
			}
			shape[i] = n
		}
		shapes[in.Name] = shape
	}
	// The mask first: ids and positions depend on it.
	var mask []int64
	var maskShape []int
	side := "none"
	for _, in := range e.Inputs {
		if in.Role != "attention_mask" {
			continue
		}
		maskShape = shapes[in.Name]
		mask = make([]int64, maskShape[0]*maskShape[1])
		for i := range mask {
			mask[i] = 1
		}
		side = in.PaddingSide
		if side == "" {
			side = "none"
		}
		rows, cols := maskShape[0], maskShape[1]
		for b := 0; b < rows && side != "none"; b++ {
			pad := b % max(1, cols/2) // row 0 unpadded, later rows padded more
			for j := 0; j < pad; j++ {
				col := cols - 1 - j
				if side == "left" {
					col = j
				}
				mask[b*cols+col] = 0
			}
		}
		out[in.Name] = kernels.FromSlice(maskShape, mask)
	}
	// masked reports whether token (b, j) of the current sequence is
	// padding; the mask may also cover past tokens, which come first.
	masked := func(b, j int) bool {
		if mask == nil {
			return false
		}
		cols := maskShape[1]
		return mask[b*cols+cols-s.Seq+j] == 0
	}
	for _, in := range e.Inputs {
		shape := shapes[in.Name]
		n := 1
		for _, d := range shape {
			n *= d
		}
		switch in.Role {
		case "attention_mask":
			continue
		case "input_ids", "token_type_ids":
			lo, hi := 0, 1
			if len(in.Range) == 2 {
				lo, hi = int(in.Range[0]), int(in.Range[1])
			} else if in.VocabSize > 0 {
				hi = in.VocabSize - 1
			}
			v := make([]int64, n)
			for i := range v {
				v[i] = int64(lo + rng.IntN(hi-lo+1))
				if in.PadID != nil && len(shape) == 2 && masked(i/shape[1], i%shape[1]) {
					v[i] = int64(*in.PadID)
				}
			}
			out[in.Name] = kernels.FromSlice(shape, v)
		case "position_ids":
			// [batch, seq], or [streams, batch, seq] (M-RoPE: text tokens
			// count on every stream alike).
			v := make([]int64, n)
			bs := shape[len(shape)-2:]
			for k := 0; bs[0]*bs[1] > 0 && k < n/(bs[0]*bs[1]); k++ {
				w := v[k*bs[0]*bs[1] : (k+1)*bs[0]*bs[1]]
				for b := 0; b < bs[0]; b++ {
					p := int64(s.Past)
					for j := 0; j < bs[1]; j++ {
						if masked(b, j) {
							w[b*bs[1]+j] = 1 // Hugging Face fills padding positions with 1
							continue
						}
						w[b*bs[1]+j] = p
						p++
					}
				}
			}
			out[in.Name] = kernels.FromSlice(shape, v)
		default: // pixel_values, past keys and values, other float inputs
			dt, ok := graph.ParseDataType(in.DType)
			if !ok {
				return nil, fmt.Errorf("%s: input %s: dtype %q", e.Name, in.Name, in.DType)
			}
			switch dt {
			case graph.Float:
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(rng.NormFloat64())
				}
				out[in.Name] = kernels.FromSlice(shape, v)
			case graph.Float16:
				v := make([]float16.Float16, n)
				for i := range v {
					v[i] = float16.Fromfloat32(float32(rng.NormFloat64()))
				}
				out[in.Name] = kernels.FromSlice(shape, v)
			default:
				return nil, fmt.Errorf("%s: input %s: no rule for role %q of %v", e.Name, in.Name, in.Role, dt)
			}
		}
	}
	return out, nil
}

// OutputsLike returns zero tensors of the types and shapes the manifest
// declares for e's outputs at sizes s (for ONNX Runtime peers that must be
// given an output's shape).
func (e *Entry) OutputsLike(s Sizes) (map[string]*kernels.Tensor, error) {
	out := map[string]*kernels.Tensor{}
	for _, o := range e.Outputs {
		dt, ok := graph.ParseDataType(o.DType)
		if !ok {
			return nil, fmt.Errorf("%s: output %s: dtype %q", e.Name, o.Name, o.DType)
		}
		shape := make([]int, len(o.Shape))
		for i, d := range o.Shape {
			n, err := s.dim(d)
			if err != nil {
				return nil, fmt.Errorf("%s: output %s: %w", e.Name, o.Name, err)
			}
			shape[i] = n
		}
		out[o.Name] = kernels.New(dt, shape...)
	}
	return out, nil
}
