package verify

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// Prompt then decode. Model B may be model A given a KV cache (onnxpe
// rewrite --add-kv-cache): B takes A's inputs and past key/value caches,
// and returns A's outputs and the present caches. Such a pair is compared
// as the cache is used: each set runs in A whole, and in B as a prompt of
// all but its last decodeSteps tokens (empty caches), then one token at a
// time, each step's present caches fed back as the next step's past, the
// attention mask over past and new tokens; B's outputs of the steps,
// concatenated along the sequence, are compared with A's.

// decodeSteps is how many tokens of a set B decodes one at a time after
// its prompt.
const decodeSteps = 3

// cacheLink ties B's cache inputs to its present outputs.
type cacheLink struct {
	past    []string          // B's inputs A does not have
	present map[string]string // past input -> present output
	axis    map[string]int    // past input -> its sequence axis
}

// describe is the report's line on how B runs.
func (l *cacheLink) describe() string {
	return fmt.Sprintf("B takes a KV cache A does not (%d past inputs): each set runs in B as a prompt of all but its last %d tokens, then one token at a time with the present caches fed back, and B's outputs of the steps are compared with A's run on the whole set",
		len(l.past), decodeSteps)
}

// cacheOps are the ops that read a past cache and return the present
// one: past input index -> present output index.
var cacheOps = map[string]map[int]int{
	"com.microsoft.GroupQueryAttention": {3: 1, 4: 2},
	"com.microsoft.MultiHeadAttention":  {6: 1, 7: 2},
	".Attention":                        {4: 1, 5: 2},
}

// linkCache is the link when b is a with a KV cache added: every input
// of a in b, and each input of b that a lacks read by an op as a past
// cache whose present is an output of b that a lacks; nil when b has no
// input a lacks. An extra input that is no such cache is an
// ErrIncompatible.
func linkCache(a, b *graph.Model) (*cacheLink, error) {
	has := map[string]bool{}
	for _, v := range kernels.FeedInputs(a) {
		has[v.Name] = true
	}
	outA := map[string]bool{}
	for _, v := range a.Graph.Outputs {
		outA[v.Name] = true
	}
	l := &cacheLink{present: map[string]string{}, axis: map[string]int{}}
	for _, v := range kernels.FeedInputs(b) {
		if has[v.Name] {
			continue
		}
		for _, u := range v.Uses() {
			n := u.Node
			out, axis := -1, 2
			if m, ok := cacheOps[n.Domain+"."+n.OpType]; ok {
				if o, ok := m[u.Index]; ok && o < len(n.Outputs()) {
					out = o
				}
			} else if n.OpType == "Concat" && n.Domain == "" {
				out, axis = 0, int(n.AttrInt("axis", 0))
				if dims, ok := v.Type.Shape(); ok && axis < 0 {
					axis += len(dims)
				}
			}
			if out < 0 {
				continue
			}
			p := n.Output(out)
			if p.IsGraphOutput() && !outA[p.Name] {
				l.present[v.Name], l.axis[v.Name] = p.Name, axis
				break
			}
		}
		if _, ok := l.present[v.Name]; !ok {
			return nil, fmt.Errorf("%w: model A has no input %q (and it is not a KV cache of model B)", ErrIncompatible, v.Name)
		}
		l.past = append(l.past, v.Name)
	}
	if len(l.past) == 0 {
		return nil, nil
	}
	for _, v := range a.Graph.Outputs {
		if b.Graph.Lookup(v.Name) == nil || !b.Graph.Lookup(v.Name).IsGraphOutput() {
			return nil, fmt.Errorf("%w: model B (A with a KV cache) has no output %q", ErrIncompatible, v.Name)
		}
	}
	return l, nil
}

// decodeRunner runs B's sets as a prompt then decode steps.
type decodeRunner struct {
	inner runner
	// halfORT: B runs in ONNX Runtime and has half-precision outputs,
	// which onnxruntime_go cannot allocate itself (the comparison gives it
	// tensors shaped like A's outputs, which a step's are not).
	halfORT bool
	link    *cacheLink
	an      *Analysis // A's
	b       *graph.Model
	outs    []string // A's outputs
}

func (d *decodeRunner) close() { d.inner.close() }

// seqAxis is the axis of input in that holds the tokens (sequence or
// past + sequence), -1 when none.
func seqAxis(in *InputInfo) int {
	for i, dim := range in.Dims {
		if dim.Kind == DimSeq || dim.Kind == DimTotal {
			return i
		}
	}
	return -1
}

func (d *decodeRunner) run(in, _ map[string]*kernels.Tensor) (map[string]*kernels.Tensor, error) {
	if d.halfORT {
		return nil, fmt.Errorf("prompt then decode in ONNX Runtime: the model has float16 or bfloat16 outputs, which this binding cannot allocate per step (compare in onnxpe's executor: --runtime go)")
	}
	// The set's length and batch, from its token input (else any input
	// with a sequence axis).
	N, batch := -1, 1
	for i := range d.an.Inputs {
		info := &d.an.Inputs[i]
		ax, t := seqAxis(info), in[info.Name]
		if ax < 0 || t == nil || N >= 0 && info.Role != RoleTokenIDs {
			continue
		}
		N = t.Shape[ax]
		for j, dim := range info.Dims {
			if dim.Kind == DimBatch {
				batch = t.Shape[j]
			}
		}
	}
	if N < 0 {
		return nil, fmt.Errorf("prompt then decode: no input of model A holds the tokens along a sequence axis")
	}
	steps := min(decodeSteps, max(N-2, 0)) // a prompt of 2 tokens at least
	var cuts [][2]int
	cuts = append(cuts, [2]int{0, N - steps})
	for t := N - steps; t < N; t++ {
		cuts = append(cuts, [2]int{t, t + 1})
	}
	past := map[string]*kernels.Tensor{}
	for _, name := range d.link.past {
		v := d.b.Graph.Lookup(name)
		dims, ok := v.Type.Shape()
		if !ok {
			return nil, fmt.Errorf("prompt then decode: the shape of %s is not declared", name)
		}
		shape := make([]int, len(dims))
		for i, dim := range dims {
			switch {
			case i == d.link.axis[name]:
				shape[i] = 0
			case dim.Known:
				shape[i] = int(dim.Value)
			case i == 0:
				shape[i] = batch
			default:
				return nil, fmt.Errorf("prompt then decode: dimension %d of %s (%s) is not known", i, name, v.Type)
			}
		}
		past[name] = kernels.New(v.Type.ElemType(), shape...)
	}
	parts := map[string][]*kernels.Tensor{}
	for _, c := range cuts {
		step := map[string]*kernels.Tensor{}
		for i := range d.an.Inputs {
			info := &d.an.Inputs[i]
			t := in[info.Name]
			if t == nil {
				continue
			}
			ax := seqAxis(info)
			switch {
			case ax < 0:
				step[info.Name] = t
			case info.Role == RoleAttentionMask:
				step[info.Name] = sliceAxis(t, ax, 0, c[1]) // past and new tokens
			default:
				step[info.Name] = sliceAxis(t, ax, c[0], c[1])
			}
		}
		maps(step, past)
		out, err := d.inner.run(step, nil)
		if err != nil {
			return nil, fmt.Errorf("prompt then decode, tokens %d to %d: %w", c[0], c[1]-1, err)
		}
		for _, name := range d.link.past {
			p := out[d.link.present[name]]
			if p == nil {
				return nil, fmt.Errorf("prompt then decode: no output %s", d.link.present[name])
			}
			past[name] = p
		}
		for _, o := range d.outs {
			parts[o] = append(parts[o], out[o])
		}
	}
	res := map[string]*kernels.Tensor{}
	for _, o := range d.outs {
		ps := parts[o]
		if len(ps) == 1 {
			res[o] = ps[0]
			continue
		}
		ax := stepAxis(ps, cuts)
		if ax < 0 {
			return nil, fmt.Errorf("prompt then decode: output %s has no axis along the tokens (shapes %v and %v): it cannot be put together from the steps", o, ps[0].Shape, ps[1].Shape)
		}
		res[o] = concatAxis(ps, ax)
	}
	return res, nil
}

func maps(dst, src map[string]*kernels.Tensor) {
	for k, v := range src {
		dst[k] = v
	}
}

// stepAxis is the axis along which the step outputs ps hold the steps'
// tokens (the cuts' lengths), the others equal; -1 when none.
func stepAxis(ps []*kernels.Tensor, cuts [][2]int) int {
	rank := len(ps[0].Shape)
next:
	for ax := range rank {
		for i, p := range ps {
			if len(p.Shape) != rank || p.Shape[ax] != cuts[i][1]-cuts[i][0] {
				continue next
			}
			for j := range rank {
				if j != ax && p.Shape[j] != ps[0].Shape[j] {
					continue next
				}
			}
		}
		return ax
	}
	return -1
}

// sliceAxis is t[.., from:to, ..] along axis.
func sliceAxis(t *kernels.Tensor, axis, from, to int) *kernels.Tensor {
	shape := slices.Clone(t.Shape)
	shape[axis] = to - from
	out := kernels.New(t.DType, shape...)
	inner := 1
	for _, s := range t.Shape[axis+1:] {
		inner *= s
	}
	outer := 1
	for _, s := range t.Shape[:axis] {
		outer *= s
	}
	src, dst := reflect.ValueOf(t.Raw()), reflect.ValueOf(out.Raw())
	n := (to - from) * inner
	for o := range outer {
		s := (o*t.Shape[axis] + from) * inner
		reflect.Copy(dst.Slice(o*n, (o+1)*n), src.Slice(s, s+n))
	}
	return out
}

// concatAxis joins ps along axis.
func concatAxis(ps []*kernels.Tensor, axis int) *kernels.Tensor {
	shape := slices.Clone(ps[0].Shape)
	shape[axis] = 0
	for _, p := range ps {
		shape[axis] += p.Shape[axis]
	}
	out := kernels.New(ps[0].DType, shape...)
	inner := 1
	for _, s := range shape[axis+1:] {
		inner *= s
	}
	outer := 1
	for _, s := range shape[:axis] {
		outer *= s
	}
	dst := reflect.ValueOf(out.Raw())
	at := 0
	for o := range outer {
		for _, p := range ps {
			n := p.Shape[axis] * inner
			reflect.Copy(dst.Slice(at, at+n), reflect.ValueOf(p.Raw()).Slice(o*n, (o+1)*n))
			at += n
		}
	}
	return out
}
