package scorebias

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/passes/probe"
)

// biasCase is one call of a bias function, dst [heads][Q][K], compared
// with Want ([heads][Q][len(Keys)], NaN where the model masks) at the keys
// Keys.
type BiasCase struct {
	Q, K int
	Keys []int
	Want *emit.Table
}

// biasGolden evaluates the bias value at n positions (queries and keys)
// and keeps the rows of the last nq queries, as the call (nq, n) of a bias
// function computes them.
func BiasGolden(g *emit.Gen, value string, n, nq, heads int, name string) (*BiasCase, error) {
	r, err := g.Extract(probe.ExtractSpec{Values: []string{value}, Seq: n})
	if err != nil {
		return nil, err
	}
	out, err := r.Run(nil)
	if err != nil {
		return nil, err
	}
	bv, _ := NewBiasView(out[0]) // a scalar views as 0 x 0 x 0
	if bh, bq, bk := bv.Dims(); bk != n || bq != 1 && bq != n || bh != 1 && bh != heads {
		return nil, fmt.Errorf("the bias has shape %v for %d positions and %d heads", out[0].Shape, n, heads)
	}
	c := &BiasCase{Q: nq, K: n, Keys: emit.SamplePositions(n), Want: &emit.Table{Name: name, Type: "float32", Golden: true}}
	for h := 0; h < heads; h++ {
		for i := n - nq; i < n; i++ {
			for _, j := range c.Keys {
				x := bv.At(h, i, j)
				if Masked(x) { // the model's mask: not compared
					x = math.NaN()
				}
				c.Want.Vals = append(c.Want.Vals, x)
			}
		}
	}
	return c, nil
}
