package kernels

import (
	"fmt"
	"math"
)

// The loss ops of the default domain: NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss. For input x of shape (N, C, d1, ...) and
// target t of shape (N, d1, ...) with class indices:
//
//	loss[n, d] = -w[t[n,d]] * x[n, t[n,d], d]   (w = 1 without weights)
//
// and 0 where t[n,d] equals ignore_index (whose weight counts as 0).
// reduction "none" returns loss, "sum" its sum, "mean" its sum divided by
// the sum of the weights taken. SoftmaxCrossEntropyLoss applies it to
// log_softmax(x) over the class axis and may also return that.

// nllLoss computes the loss of logp (N, C, D flattened) for targets t
// (N, D); the result has t's shape or is a scalar.
func nllLoss(c *Call, logp []float64, t []int64, weight []float64, n, cl, d int) ([]float64, bool, error) {
	ignore, hasIgnore := int64(0), c.Attr("ignore_index") != nil
	if hasIgnore {
		ignore = c.Int("ignore_index", 0)
	}
	loss := make([]float64, n*d)
	var wsum float64
	for b := range n {
		for i := range d {
			k := t[b*d+i]
			if hasIgnore && k == ignore {
				continue
			}
			if k < 0 || k >= int64(cl) {
				return nil, false, fmt.Errorf("target %d outside the %d classes", k, cl)
			}
			w := 1.0
			if weight != nil {
				w = weight[k]
			}
			loss[b*d+i] = -logp[(b*cl+int(k))*d+i] * w
			wsum += w
		}
	}
	switch r := c.String("reduction", "mean"); r {
	case "none":
		return loss, false, nil
	case "sum", "mean":
		var s float64
		for _, v := range loss {
			s += v
		}
		if r == "mean" {
			s /= wsum
		}
		return []float64{s}, true, nil
	default:
		return nil, false, fmt.Errorf("reduction %q", r)
	}
}

// lossShapes checks x (N, C, ...) against target (N, ...) and the weights
// (C), returning N, C, the size D of the remaining axes and the weights.
func lossShapes(x, t, w *Tensor) (n, cl, d int, weight []float64, err error) {
	if len(x.Shape) < 2 || len(t.Shape) != len(x.Shape)-1 || t.Shape[0] != x.Shape[0] || !equalShape(t.Shape[1:], x.Shape[2:]) {
		return 0, 0, 0, nil, fmt.Errorf("input %v and target %v: want (N, C, d...) and (N, d...)", x.Shape, t.Shape)
	}
	n, cl, d = x.Shape[0], x.Shape[1], shapeSize(x.Shape[2:])
	if w != nil {
		if w.Len() != cl || len(w.Shape) != 1 {
			return 0, 0, 0, nil, fmt.Errorf("weight %v: want %d values", w.Shape, cl)
		}
		weight = w.Float64s()
	}
	return n, cl, d, weight, nil
}

func nllLossKernel(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, t := in[0], in[1]
	n, cl, d, weight, err := lossShapes(x, t, optIn(in, 2))
	if err != nil {
		return nil, err
	}
	loss, scalar, err := nllLoss(c, x.Float64s(), t.Int64s(), weight, n, cl, d)
	if err != nil {
		return nil, err
	}
	shape := t.Shape
	if scalar {
		shape = nil
	}
	o, err := floatOut(c, x.DType, shape, loss)
	return []*Tensor{o}, err
}

func softmaxCrossEntropy(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, t := in[0], in[1]
	n, cl, d, weight, err := lossShapes(x, t, optIn(in, 2))
	if err != nil {
		return nil, err
	}
	// log_softmax over the class axis.
	xs := x.Float64s()
	logp := make([]float64, len(xs))
	for b := range n {
		for i := range d {
			m := math.Inf(-1)
			for k := range cl {
				m = math.Max(m, xs[(b*cl+k)*d+i])
			}
			var s float64
			for k := range cl {
				s += math.Exp(xs[(b*cl+k)*d+i] - m)
			}
			ls := math.Log(s)
			for k := range cl {
				j := (b*cl+k)*d + i
				logp[j] = xs[j] - m - ls
			}
		}
	}
	loss, scalar, err := nllLoss(c, logp, t.Int64s(), weight, n, cl, d)
	if err != nil {
		return nil, err
	}
	shape := t.Shape
	if scalar {
		shape = nil
	}
	o, err := floatOut(c, x.DType, shape, loss)
	if err != nil {
		return nil, err
	}
	outs := []*Tensor{o}
	if c.NumOutputs() > 1 {
		lp, err := floatOut(c, x.DType, x.Shape, logp)
		if err != nil {
			return nil, err
		}
		outs = append(outs, lp)
	}
	return outs, nil
}

func init() {
	reg("NegativeLogLikelihoodLoss", 12, 0, nllLossKernel)
	reg("SoftmaxCrossEntropyLoss", 12, 0, softmaxCrossEntropy)
}
