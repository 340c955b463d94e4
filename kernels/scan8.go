package kernels

import (
	"fmt"
	"slices"
)

// scan8 is Scan before opset 9: every input is batched on axis 0 (the
// states too), the scan axis of the scan inputs is 1, an optional first
// input gives each batch element's sequence length, and the attribute
// directions reverses scan inputs. Each batch element runs the body over
// its sequence; the scan outputs are padded with zeros to the longest.
func scan8(c *Call, in []*Tensor) ([]*Tensor, error) {
	m := int(c.Int("num_scan_inputs", 0))
	lensT := optIn(in, 0)
	rest := in[1:]
	n := len(rest) - m
	if m <= 0 || n < 0 {
		return nil, fmt.Errorf("num_scan_inputs %d for %d inputs", m, len(rest))
	}
	dirs := c.Ints("directions")
	if dirs != nil && len(dirs) != m {
		return nil, fmt.Errorf("directions has %d entries, want %d", len(dirs), m)
	}
	for _, t := range rest {
		if t == nil || t.notTensor() || len(t.Shape) < 1 {
			return nil, fmt.Errorf("Scan 8 inputs must be batched tensors")
		}
	}
	batch := rest[n].Shape[0]
	if len(rest[n].Shape) < 2 {
		return nil, fmt.Errorf("scan input %v has no sequence axis", rest[n].Shape)
	}
	maxLen := rest[n].Shape[1]
	for _, t := range rest {
		if t.Shape[0] != batch {
			return nil, fmt.Errorf("inputs differ in batch size: %v and %v", rest[n].Shape, t.Shape)
		}
	}
	for _, t := range rest[n:] {
		if len(t.Shape) < 2 || t.Shape[1] != maxLen {
			return nil, fmt.Errorf("scan inputs differ in sequence length: %v and %v", rest[n].Shape, t.Shape)
		}
	}
	lens := make([]int, batch)
	for b := range lens {
		lens[b] = maxLen
	}
	if lensT != nil {
		v := lensT.Int64s()
		if len(v) != batch {
			return nil, fmt.Errorf("sequence_lens of %d for a batch of %d", len(v), batch)
		}
		for b, l := range v {
			if l < 0 || l > int64(maxLen) {
				return nil, fmt.Errorf("sequence length %d outside [0, %d]", l, maxLen)
			}
			lens[b] = int(l)
		}
	}
	k := c.NumOutputs() - n
	if k < 0 {
		return nil, fmt.Errorf("%d state values but %d outputs", n, c.NumOutputs())
	}
	finals := make([][]*Tensor, n)  // per state, per batch element
	scans := make([][][]*Tensor, k) // per scan output, per batch element, per step
	for j := range scans {
		scans[j] = make([][]*Tensor, batch)
	}
	at := func(t *Tensor, axis, i int) *Tensor {
		s := sliceAxis(nil, t, axis, i, 1)
		return view(s, slices.Delete(slices.Clone(s.Shape), axis, axis+1))
	}
	for b := range batch {
		state := make([]*Tensor, n)
		for i := range n {
			state[i] = at(rest[i], 0, b)
		}
		seqs := make([]*Tensor, m)
		for j := range m {
			seqs[j] = at(rest[n+j], 0, b)
		}
		for it := range lens[b] {
			args := slices.Clone(state)
			for j, s := range seqs {
				pos := it
				if dirs != nil && dirs[j] == 1 {
					pos = lens[b] - 1 - it
				}
				args = append(args, at(s, 0, pos))
			}
			outs, err := c.runSub("body", args)
			if err != nil {
				return nil, fmt.Errorf("body, batch %d, iteration %d: %w", b, it, err)
			}
			if len(outs) != n+k {
				return nil, fmt.Errorf("body has %d outputs, want %d", len(outs), n+k)
			}
			copy(state, outs[:n])
			for j := range k {
				scans[j][b] = append(scans[j][b], outs[n+j])
			}
		}
		for i := range n {
			finals[i] = append(finals[i], state[i])
		}
	}
	res := make([]*Tensor, 0, n+k)
	for i := range n {
		s, err := stack(c, finals[i])
		if err != nil {
			return nil, err
		}
		res = append(res, s)
	}
	for j := range k {
		var elem *Tensor
		for b := range batch {
			if len(scans[j][b]) > 0 {
				elem = scans[j][b][0]
				break
			}
		}
		if elem == nil {
			// No iteration ran: the per-iteration shape is the one the
			// body declares (unknown sizes 0), as for Scan 9.
			e := emptyScan(c, bodyOutput(c, n+j))
			elem = c.zeros(e.DType, e.Shape[1:]...)
		}
		out := c.zeros(elem.DType, slices.Concat([]int{batch, maxLen}, elem.Shape)...)
		per := elem.Len()
		for b := range batch {
			for it, t := range scans[j][b] {
				if t.notTensor() || !equalShape(t.Shape, elem.Shape) || t.DType != elem.DType {
					return nil, fmt.Errorf("scan output %d differs between iterations: %v and %v", j, elem, t)
				}
				copyAny(out, (b*maxLen+it)*per, t, 0, per)
			}
		}
		res = append(res, out)
	}
	return res, nil
}

func init() {
	Register("", "Scan", 8, 8, scan8, Native)
}
