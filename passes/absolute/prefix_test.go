package absolute

import (
	"slices"
	"testing"

	"github.com/onnxpe/onnxpe/kernels"
)

// TestCutPrefix: every axis of the long size is cut to its first n
// entries, the others kept.
func TestCutPrefix(t *testing.T) {
	// [6, 2, 6]: element (i, j, k) = 100i + 10j + k.
	v := make([]int64, 0, 72)
	for i := 0; i < 6; i++ {
		for j := 0; j < 2; j++ {
			for k := 0; k < 6; k++ {
				v = append(v, int64(100*i+10*j+k))
			}
		}
	}
	got := cutPrefix(kernels.FromSlice([]int{6, 2, 6}, v), 6, 3)
	if !slices.Equal(got.Shape, []int{3, 2, 3}) {
		t.Fatalf("shape %v, want [3 2 3]", got.Shape)
	}
	var want []int64
	for i := 0; i < 3; i++ {
		for j := 0; j < 2; j++ {
			for k := 0; k < 3; k++ {
				want = append(want, int64(100*i+10*j+k))
			}
		}
	}
	if !slices.Equal(got.Int64s(), want) {
		t.Errorf("values %v, want %v", got.Int64s(), want)
	}
	if cutPrefix(kernels.FromSlice([]int{2, 2}, []int64{1, 2, 3, 4}), 6, 3) != nil {
		t.Error("a tensor without the long size was cut")
	}
}
