package absolute

import (
	"slices"
	"testing"

	"github.com/onnxpe/onnxpe/kernels"
)

// rowsTensor is a [a, b, d] tensor whose element (i, j, k) is f(i, j)·10
// + k.
func rowsTensor(a, b, d int, f func(i, j int) float32) *kernels.Tensor {
	v := make([]float32, 0, a*b*d)
	for i := 0; i < a; i++ {
		for j := 0; j < b; j++ {
			for k := 0; k < d; k++ {
				v = append(v, f(i, j)*10+float32(k))
			}
		}
	}
	return kernels.FromSlice([]int{a, b, d}, v)
}

// TestRowsAxis: the axis of positions is the one along which the rows
// change, whichever of the leading axes it is.
func TestRowsAxis(t *testing.T) {
	pos0 := func(i, j int) float32 { return float32(i) }
	pos1 := func(i, j int) float32 { return float32(j) }
	cases := []struct {
		name string
		t    *kernels.Tensor
		want int
	}{
		{"batch_major_one_row", rowsTensor(1, 5, 4, pos1), 1},
		{"time_major_broadcast_batch", rowsTensor(5, 1, 4, pos0), 0},
		{"time_major_repeated_batch", rowsTensor(5, 3, 4, pos0), 0},
		{"batch_major_repeated_batch", rowsTensor(3, 5, 4, pos1), 1},
		{"one_position", rowsTensor(1, 1, 4, pos0), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := RowsAxis(c.t); got != c.want {
				t.Fatalf("RowsAxis of %v = %d, want %d", c.t.Shape, got, c.want)
			}
			rows := tensorRows(c.t, c.want)
			if len(rows) != c.t.Shape[c.want] {
				t.Fatalf("%d rows, want %d", len(rows), c.t.Shape[c.want])
			}
			if len(rows) > 1 && slices.Equal(rows[0], rows[1]) {
				t.Errorf("rows 0 and 1 are equal: %v", rows[:2])
			}
		})
	}
}
