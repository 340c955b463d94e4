package verify

import "github.com/onnxpe/onnxpe/graph"

// Position ids with a stream axis: multimodal RoPE (Qwen2-VL's M-RoPE)
// reads [streams, batch, seq] position ids, one stream per axis of a
// token's place (temporal, height, width). Text tokens count alike on
// every stream (the diagonal); an image's tokens hold the image's start on
// the temporal stream and their row and column on the others, and the
// text after it continues from the image's largest position, as
// Qwen2VLModel.get_rope_index computes them. Synthesised sets put an image
// in every other row so that the streams differ: a model (or a rewrite)
// that reads one stream for all of them gives other outputs.

// imageGrid is the image placed in a row of n real tokens, after one text
// token and before another: 2 rows by 3 columns (rows and columns differ)
// when they fit, else 2 by 2, else none.
func imageGrid(n int) (gh, gw int) {
	switch {
	case n >= 2*3+2:
		return 2, 3
	case n >= 2*2+2:
		return 2, 2
	}
	return 0, 0
}

// streamInput reports whether in is position ids with a leading stream
// axis (a fixed size of two or more) before the batch.
func streamInput(in *InputInfo) bool {
	return len(in.Dims) == 3 && in.Dims[0].Kind == DimFixed && in.Dims[0].Size >= 2 && in.Dims[1].Kind == DimBatch
}

// streamPositions fills position ids [streams, batch, seq] for a set:
// mask[b][t] tells the real tokens (over past and current ones).
func streamPositions(shape []int, s SetSpec, mask [][]bool, hasMask bool) ([]float64, [][]bool) {
	streams, batch, seq := shape[0], shape[1], shape[2]
	vals := make([]float64, streams*batch*seq)
	image := make([][]bool, batch) // the image's tokens, per row
	total := s.Past + s.Seq
	for b := 0; b < batch; b++ {
		image[b] = make([]bool, seq)
		// The real tokens of the row, past and current, in order.
		var real []int
		for t := 0; t < total; t++ {
			if !hasMask || b >= len(mask) || mask[b][t] {
				real = append(real, t)
			}
		}
		gh, gw := imageGrid(len(real))
		cells := gh * gw
		// An image in even rows of sets without a past, after one text token.
		withImage := b%2 == 0 && s.Past == 0 && cells > 0
		at := map[int][]int64{}
		p := int64(0)
		for k, t := range real {
			pos := make([]int64, streams)
			switch {
			case withImage && k >= 1 && k < 1+cells:
				c := k - 1
				pos[0] = 1
				if streams > 1 {
					pos[1] = 1 + int64(c/gw)
				}
				if streams > 2 {
					pos[2] = 1 + int64(c%gw)
				}
				for st := 3; st < streams; st++ {
					pos[st] = 1
				}
				if t >= s.Past {
					image[b][t-s.Past] = true
				}
				if k == cells {
					p = 1 + int64(max(gh, gw))
				}
			default:
				for st := range pos {
					pos[st] = p
				}
				p++
			}
			at[t] = pos
		}
		shift, _ := s.rowShift(b)
		for j := 0; j < seq; j++ {
			pos, ok := at[s.Past+j]
			for st := 0; st < streams; st++ {
				v := int64(1) // Hugging Face fills padding with 1
				if ok {
					v = pos[st] + int64(shift)
				}
				vals[(st*batch+b)*seq+j] = float64(v + int64(s.Offset))
			}
		}
	}
	return vals, image
}

// Images whose size the model leaves open (2-D RoPE over the patch grid of
// any image): the sets give them sizes that cut into whole patches, on a
// grid of more columns than rows (so that a model mixing up the axes
// differs), with about as many patches as the set's sequence length.

// patchGrid is the grid of a set of seq tokens: rows × (rows+1) patches.
func patchGrid(seq int) (rows, cols int) {
	rows = 1
	for (rows+1)*(rows+2) <= seq {
		rows++
	}
	return rows, rows + 1
}

// imageDims marks the height and width of float inputs [batch, channels,
// height, width] that a convolution with strides reads (a patch
// embedding) as a grid of patches of those strides.
func (a *Analysis) imageDims() {
	for i := range a.Inputs {
		in := &a.Inputs[i]
		if in.Role != RoleFeatures || len(in.Dims) != 4 || in.Dims[2].Kind == DimFixed || in.Dims[3].Kind == DimFixed {
			continue
		}
		conv := patchConv(in.v)
		if conv == nil {
			continue
		}
		st := conv.AttrInts("strides")
		in.Dims[2] = DimSpec{Kind: DimImageRows, Size: int(st[0]), Param: in.Dims[2].Param}
		in.Dims[3] = DimSpec{Kind: DimImageCols, Size: int(st[1]), Param: in.Dims[3].Param}
	}
}

// patchConv is the 2-D convolution reading v (through casts) with strides
// as large as its kernel (non-overlapping patches), or nil.
func patchConv(v *graph.Value) *graph.Node {
	for steps := 0; steps < 4 && v != nil; steps++ {
		var next *graph.Value
		for _, u := range v.Uses() {
			n := u.Node
			switch {
			case n.OpType == "Conv" && u.Index == 0:
				st, k := n.AttrInts("strides"), n.AttrInts("kernel_shape")
				if len(st) == 2 && len(k) == 2 && st[0] == k[0] && st[1] == k[1] && st[0] > 1 {
					return n
				}
			case n.OpType == "Cast" || n.OpType == "Identity":
				next = n.Output(0)
			}
		}
		v = next
	}
	return nil
}
