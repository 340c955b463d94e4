package verify

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// Sweep defaults.
const (
	// DefaultLongSequence is the long sequence of the sweep when no stored
	// table bounds the model's positions.
	DefaultLongSequence = 128
	// DefaultMaxLength caps the long sequence a stored table asks for
	// (Options.MaxLength overrides it).
	DefaultMaxLength = 2048
	// DefaultFarPosition is the largest position id fed to a model that
	// computes its positional encoding (no stored table bounds it).
	DefaultFarPosition = 4095
	shortSeq           = 7
	decodePast         = 7
	// Patches of the images of open size a sweep sets (patchGrid: 1 x 2,
	// 3 x 4 and 31 x 32 patches).
	imageSmall, imageMedium, imageLarge = 2, 12, 1024
	// capacitySlack is how many slots of a static cache lie beyond the
	// tokens of a set: the model must leave them unread.
	capacitySlack = 3
)

// SetSpec describes one synthesised input set.
type SetSpec struct {
	Name  string `json:"name"`
	Batch int    `json:"batch"`
	Seq   int    `json:"seq"`
	Past  int    `json:"past"`
	// Offset is added to every position id (positions near the largest
	// the model supports).
	Offset int `json:"offset,omitempty"`
	// Padding is the padding of each row of the attention mask: "none",
	// "left" or "right" (Pads tokens each).
	Padding []string `json:"padding,omitempty"`
	Pads    int      `json:"pads,omitempty"`
	// RowOffsets is added to the positions of each row: rows of a batch
	// at different places (histories of different lengths, continuous
	// batching). Nil: no row is shifted.
	RowOffsets []int `json:"row_offsets,omitempty"`
	// RowRepeats is, per row, how many of its tokens from the middle one
	// (token Seq/2) on repeat the position before them (tokens sharing a
	// position, as a speculative decoder's tree candidates do): from
	// there on the row sits that many positions behind its tokens'
	// indices. Nil: no row repeats a position.
	RowRepeats []int `json:"row_repeats,omitempty"`
	// Purpose says what the set exercises.
	Purpose string `json:"purpose"`
	// required sets must run in model A; optional ones are skipped (and
	// reported) when A refuses them.
	required bool
	// unpadded sets keep every row whole (they reach the last position).
	unpadded bool
	// history: the padding is the start of the rows' cached tokens
	// (static caches without a mask: padded rows hold fewer).
	history bool
	// image: the set is an image of Seq patches (patchGrid), with no
	// sequence axis.
	image bool
}

func (s SetSpec) key() string {
	k := fmt.Sprintf("%d/%d/%d/%d/%v/%d", s.Batch, s.Seq, s.Past, s.Offset, s.Padding, s.Pads)
	if s.RowOffsets != nil || s.RowRepeats != nil {
		k += fmt.Sprintf("/%v/%v", s.RowOffsets, s.RowRepeats)
	}
	return k
}

// rowShift is the offset of row b's positions and how many of its tokens
// from the middle one on repeat the position before them.
func (s SetSpec) rowShift(b int) (offset, repeats int) {
	if b < len(s.RowOffsets) {
		offset = s.RowOffsets[b]
	}
	if b < len(s.RowRepeats) {
		repeats = s.RowRepeats[b]
	}
	return offset, repeats
}

// describe prints a set's shape for tables: "batch 3, seq 7, past 0".
func (s SetSpec) describe() string {
	var b strings.Builder
	if s.image {
		r, c := patchGrid(s.Seq)
		fmt.Fprintf(&b, "batch %d, %d x %d patches", s.Batch, r, c)
		return b.String()
	}
	fmt.Fprintf(&b, "batch %d, seq %d", s.Batch, s.Seq)
	if s.Past > 0 {
		fmt.Fprintf(&b, ", past %d", s.Past)
	}
	if s.Offset > 0 {
		fmt.Fprintf(&b, ", positions from %d", s.Offset)
	}
	var pads []string
	for _, p := range s.Padding {
		if p != "none" && s.Pads > 0 && !slices.Contains(pads, p) {
			pads = append(pads, p)
		}
	}
	switch {
	case len(pads) > 0 && s.history:
		fmt.Fprintf(&b, ", padded rows hold %d fewer", s.Pads)
	case len(pads) > 0:
		fmt.Fprintf(&b, ", %s padding", strings.Join(pads, "+"))
	}
	if s.RowOffsets != nil {
		fmt.Fprintf(&b, ", rows' positions %s", joinInts(s.RowOffsets, "+"))
	}
	if s.RowRepeats != nil {
		fmt.Fprintf(&b, ", rows repeating %s positions from token %d", joinInts(s.RowRepeats, ""), s.Seq/2)
	}
	return b.String()
}

// joinInts prints 0/5/10 (each after sign when it is not negative).
func joinInts(v []int, sign string) string {
	p := make([]string, len(v))
	for i, x := range v {
		if x >= 0 {
			p[i] = sign
		}
		p[i] += fmt.Sprint(x)
	}
	return strings.Join(p, "/")
}

// inputSet is a set of inputs with what is known of its positions.
type inputSet struct {
	name   string
	spec   *SetSpec // nil for given inputs
	inputs map[string]*kernels.Tensor
	// pos[b][j] is the position of current token j of row b (nil when
	// unknown); past is the number of cached tokens.
	pos [][]int64
	// pad[b][j] is true when current token j of row b is padding (its
	// outputs are not compared); nil when no row is padded.
	pad  [][]bool
	past int
	seq  int
}

// shapeOf resolves an input's dimensions for a set.
func shapeOf(in *InputInfo, s SetSpec) []int {
	shape := make([]int, len(in.Dims))
	for i, d := range in.Dims {
		switch d.Kind {
		case DimFixed:
			shape[i] = d.Size
		case DimBatch:
			shape[i] = s.Batch
		case DimPast:
			shape[i] = s.Past
		case DimTotal:
			shape[i] = s.Past + s.Seq
		case DimCapacity:
			shape[i] = s.Past + s.Seq + capacitySlack
		case DimImageRows, DimImageCols:
			gh, gw := patchGrid(s.Seq)
			shape[i] = d.Size * gh
			if d.Kind == DimImageCols {
				shape[i] = d.Size * gw
			}
		default: // sequence and other symbolic dimensions
			shape[i] = s.Seq
		}
	}
	return shape
}

// synthesize makes the inputs of one set, seeded by seed and the set's
// shape (the same set gets the same values whenever it is made).
func (a *Analysis) synthesize(s SetSpec, seed uint64) (*inputSet, error) {
	h := fnv.New64a()
	h.Write([]byte(s.key()))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	set := &inputSet{name: s.Name, spec: &s, inputs: map[string]*kernels.Tensor{}, past: s.Past, seq: s.Seq}
	total := s.Past + s.Seq
	hasMask := a.hasRole(RoleAttentionMask)
	// Without a mask, rows of a model with static caches differ by the
	// tokens their caches hold: a padded row holds Pads fewer (its
	// padding is the start of its history, never a current token).
	ragged := !hasMask && a.ragged()
	// mask[b][t] over past and current tokens.
	mask := make([][]bool, s.Batch)
	for b := range mask {
		mask[b] = make([]bool, total)
		for t := range mask[b] {
			mask[b][t] = true
		}
		pad := "none"
		if b < len(s.Padding) {
			pad = s.Padding[b]
		}
		n := min(s.Pads, total-1)
		if ragged {
			n = min(s.Pads, s.Past)
		}
		for j := 0; j < n && pad != "none"; j++ {
			if pad == "left" || ragged {
				mask[b][j] = false
			} else {
				mask[b][total-1-j] = false
			}
		}
	}
	// held[b] is the number of tokens row b's static cache holds: its
	// real past tokens, written from slot 0 (all past slots when a mask
	// says which are real).
	held := make([]int64, s.Batch)
	for b := range held {
		for t := range s.Past {
			if !ragged || mask[b][t] {
				held[b]++
			}
		}
	}
	if hasMask && s.Pads > 0 {
		set.pad = make([][]bool, s.Batch)
		for b := range set.pad {
			set.pad[b] = make([]bool, s.Seq)
			for j := range set.pad[b] {
				set.pad[b][j] = !mask[b][s.Past+j]
			}
		}
	}
	// Positions: real tokens count from the first real one (Hugging Face
	// derives them as cumsum(mask) - 1), padding gets 1, then Offset; a
	// row's own offset moves its real tokens, and its repeats hold the
	// count from the middle token on (the planner sets them only on rows
	// whose positions no padding, history or shared past length places:
	// rowPositions).
	set.pos = make([][]int64, s.Batch)
	for b := range set.pos {
		set.pos[b] = make([]int64, s.Seq)
		shift, repeats := s.rowShift(b)
		p := int64(0)
		for t := 0; t < total; t++ {
			real := !(hasMask || ragged) || mask[b][t]
			if t >= s.Past {
				j := t - s.Past
				if real && j >= s.Seq/2 && repeats > 0 && p > 0 {
					p--
					repeats--
				}
				if real {
					set.pos[b][j] = p + int64(s.Offset+shift)
				} else {
					set.pos[b][j] = 1 + int64(s.Offset)
				}
			}
			if real {
				p++
			}
		}
	}
	for i := range a.Inputs {
		in := &a.Inputs[i]
		shape := shapeOf(in, s)
		n := 1
		for _, d := range shape {
			n *= d
		}
		var vals []float64
		switch in.Role {
		case RoleTokenIDs, RoleTableIndex:
			rows := max(in.Rows, 2)
			vals = make([]float64, n)
			for k := range vals {
				vals[k] = float64(rng.IntN(rows))
			}
		case RolePositionIDs:
			if streamInput(in) && len(shape) == 3 {
				// M-RoPE's streams: an image's tokens on a grid (streams.go).
				if s.RowRepeats != nil {
					return nil, fmt.Errorf("input %q: position streams with repeated positions are not synthesised", in.Name)
				}
				vals, _ = streamPositions(shape, s, mask, hasMask || ragged)
				break
			}
			vals = make([]float64, n)
			if len(shape) == 0 {
				vals[0] = float64(s.Past + s.Offset)
				break
			}
			last := shape[len(shape)-1]
			for k := range vals {
				j := k % last
				b := 0
				if len(shape) >= 2 && a.rowAxis(in) {
					b = (k / (n / shape[0])) % max(s.Batch, 1)
				}
				if j < s.Seq && b < len(set.pos) {
					vals[k] = float64(set.pos[b][j])
				} else {
					vals[k] = float64(s.Past + s.Offset + j)
				}
			}
		case RoleAttentionMask:
			vals = make([]float64, n)
			if len(shape) == 0 {
				vals[0] = 1
				break
			}
			last := shape[len(shape)-1]
			for k := range vals {
				j := k % last
				b := 0
				if a.rowAxis(in) && shape[0] > 0 {
					b = (k / (n / shape[0])) % max(s.Batch, 1)
				}
				// The mask's last axis covers the current tokens, or past
				// and current ones; either way it ends at the last token.
				t := total - last + j
				if b < len(mask) && t >= 0 && t < total && !mask[b][t] {
					vals[k] = 0
				} else {
					vals[k] = 1
				}
			}
		case RolePastLength:
			vals = make([]float64, n)
			for k := range vals {
				vals[k] = float64(s.Past)
			}
		case RoleWriteIndex, RoleKVLength:
			vals = make([]float64, n)
			for k := range vals {
				b := 0
				if len(shape) > 0 && a.rowAxis(in) && shape[0] > 0 {
					b = (k / (n / shape[0])) % max(s.Batch, 1)
				}
				vals[k] = float64(held[b])
				if in.Role == RoleKVLength {
					vals[k] += float64(s.Seq)
				}
			}
		case RolePastKV, RoleFeatures, RoleStaticCache:
			vals = make([]float64, n)
			for k := range vals {
				vals[k] = rng.NormFloat64()
			}
		default: // an input whose use says nothing: ones (true)
			vals = make([]float64, n)
			for k := range vals {
				vals[k] = 1
			}
		}
		t, err := tensorOf(in.dt, shape, vals)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", in.Name, err)
		}
		set.inputs[in.Name] = t
	}
	return set, nil
}

// tensorOf makes a tensor of element type dt from float64 values.
func tensorOf(dt graph.DataType, shape []int, v []float64) (*kernels.Tensor, error) {
	switch dt {
	case graph.Float:
		d := make([]float32, len(v))
		for i, x := range v {
			d[i] = float32(x)
		}
		return kernels.FromSlice(shape, d), nil
	case graph.Double:
		return kernels.FromSlice(shape, slices.Clone(v)), nil
	case graph.Float16:
		d := make([]float16.Float16, len(v))
		for i, x := range v {
			d[i] = float16.Fromfloat32(float32(x))
		}
		return kernels.FromSlice(shape, d), nil
	case graph.BFloat16:
		d := make([]graph.BF16, len(v))
		for i, x := range v {
			d[i] = graph.BF16FromFloat32(float32(x))
		}
		return kernels.FromSlice(shape, d), nil
	case graph.Int64:
		d := make([]int64, len(v))
		for i, x := range v {
			d[i] = int64(x)
		}
		return kernels.FromSlice(shape, d), nil
	case graph.Int32:
		d := make([]int32, len(v))
		for i, x := range v {
			d[i] = int32(x)
		}
		return kernels.FromSlice(shape, d), nil
	case graph.Int8:
		d := make([]int8, len(v))
		for i, x := range v {
			d[i] = int8(x)
		}
		return kernels.FromSlice(shape, d), nil
	case graph.Uint8:
		d := make([]uint8, len(v))
		for i, x := range v {
			d[i] = uint8(x)
		}
		return kernels.FromSlice(shape, d), nil
	case graph.Bool:
		d := make([]bool, len(v))
		for i, x := range v {
			d[i] = x != 0
		}
		return kernels.FromSlice(shape, d), nil
	}
	return nil, fmt.Errorf("element type %v is not supported", dt)
}

// hasSeq reports whether some input has a sequence axis.
func (a *Analysis) hasSeq() bool {
	for _, in := range a.Inputs {
		for _, d := range in.Dims {
			if d.Kind == DimSeq || d.Kind == DimTotal {
				return true
			}
		}
	}
	return false
}

// hasDim reports whether some input has a dimension of kind k.
func (a *Analysis) hasDim(k DimKind) bool {
	for _, in := range a.Inputs {
		for _, d := range in.Dims {
			if d.Kind == k {
				return true
			}
		}
	}
	return false
}

// ragged reports whether the rows' lengths are given by the write
// indices or valid key counts of static caches.
func (a *Analysis) ragged() bool {
	return a.hasRole(RoleWriteIndex) || a.hasRole(RoleKVLength)
}

func (a *Analysis) hasRole(r Role) bool {
	for _, in := range a.Inputs {
		if in.Role == r {
			return true
		}
	}
	return false
}

// positionMapFor says where the sequence axis of output v is in a set.
func (a *Analysis) positionMapFor(v *graph.Value, set *inputSet, shape []int) *positionMap {
	pm := &positionMap{batchAxis: -1, seqAxis: -1, past: set.past, pos: set.pos, pad: set.pad}
	if a.fixedRows > 0 && len(shape) > 1 && shape[0] == a.fixedRows {
		pm.batchAxis = 0 // a fixed batch (fixedBatch) declares no symbol
	}
	if dims, ok := v.Type.Shape(); ok && len(dims) == len(shape) {
		for i, d := range dims {
			if d.Param == "" {
				continue
			}
			switch a.params[d.Param] {
			case DimBatch:
				if pm.batchAxis < 0 {
					pm.batchAxis = i
				}
			case DimSeq:
				if pm.seqAxis < 0 || pm.total {
					pm.seqAxis, pm.total = i, false
				}
			case DimTotal:
				if pm.seqAxis < 0 {
					pm.seqAxis, pm.total = i, true
				}
			}
		}
	}
	if pm.seqAxis >= 0 || !a.hasSeq() {
		return pm
	}
	// No declared symbol: an axis (after the batch axis) whose size is
	// the sequence length, when exactly one is.
	find := func(n int) int {
		at := -1
		for i, d := range shape {
			if i == 0 && len(shape) > 1 {
				continue
			}
			if d == n {
				if at >= 0 {
					return -1
				}
				at = i
			}
		}
		return at
	}
	if set.seq > 1 {
		if i := find(set.seq); i >= 0 {
			pm.seqAxis = i
		} else if set.past > 0 {
			if i := find(set.past + set.seq); i >= 0 {
				pm.seqAxis, pm.total = i, true
			}
		}
	}
	if pm.seqAxis > 0 && pm.batchAxis < 0 && len(shape) > 1 && len(set.pos) == shape[0] {
		pm.batchAxis = 0
	}
	return pm
}

// Synthesize makes input sets of the given shapes for model m, with the
// values the sweep would give them (roles from m's analysis under hints):
// for callers that run a model at lengths of their choosing (onnxpe
// extend runs the extended model at its new maximum). Padding and offsets
// are as the specs say; seed seeds the values.
func Synthesize(m *graph.Model, hints Hints, specs []SetSpec, seed uint64, threads int) ([]NamedInputs, *Analysis, error) {
	a, err := Analyze(m, hints, threads)
	if err != nil {
		return nil, nil, err
	}
	var out []NamedInputs
	for _, s := range specs {
		if s.Past > 0 && !a.HasCache {
			continue
		}
		set, err := a.synthesize(s, seed)
		if err != nil {
			return nil, a, fmt.Errorf("set %s: %w", s.Name, err)
		}
		out = append(out, NamedInputs{Name: s.Name, Inputs: set.inputs})
	}
	return out, a, nil
}
