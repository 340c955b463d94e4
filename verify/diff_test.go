package verify

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

func f32(shape []int, v ...float32) *kernels.Tensor { return kernels.FromSlice(shape, v) }

func TestDiffTolerance(t *testing.T) {
	tol := Tolerance{Rtol: 1e-3, Atol: 1e-4}
	a := f32([]int{4}, 1, 10, 0, -5)
	// Within: |d| <= 1e-4 + 1e-3*|a| exactly at the bound for the first two.
	b := f32([]int{4}, 1+1.1e-3*0.99, 10+1.01e-2*0.99, 1e-4*0.9, -5)
	d := diffTensors("y", a, b, tol, noPositions)
	if !d.Equal || d.Mismatches != 0 || d.Compared != 4 {
		t.Fatalf("within tolerance: %+v", d)
	}
	b = f32([]int{4}, 1, 10.02, 0, -5)
	d = diffTensors("y", a, b, tol, noPositions)
	if d.Equal || d.Mismatches != 1 || d.Worst == nil || d.Worst.Index[0] != 1 || d.FirstMismatch.Index[0] != 1 {
		t.Fatalf("one outside: %+v", d)
	}
	if math.Abs(d.MaxAbsErr-0.02) > 1e-5 || math.Abs(d.MaxRelErr-0.002) > 1e-6 {
		t.Fatalf("max abs %v rel %v", d.MaxAbsErr, d.MaxRelErr)
	}
	// The worst element is the one furthest outside its own tolerance,
	// not the one with the largest absolute difference.
	a = f32([]int{2}, 1000, 0.001)
	b = f32([]int{2}, 1000.5, 0.01)
	d = diffTensors("y", a, b, tol, noPositions)
	if d.Mismatches != 1 || d.Worst.Index[0] != 1 {
		t.Fatalf("worst %+v (mismatches %d)", d.Worst, d.Mismatches)
	}
}

func TestDiffNonFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tol := DefaultFloat32
	for _, c := range []struct {
		a, b  float32
		equal bool
	}{{nan, nan, true}, {inf, inf, true}, {-inf, -inf, true}, {nan, 1, false}, {1, nan, false}, {inf, -inf, false}, {inf, 1e30, false}, {0, float32(math.Copysign(0, -1)), true}} {
		d := diffTensors("y", f32([]int{1}, c.a), f32([]int{1}, c.b), tol, noPositions)
		if d.Equal != c.equal {
			t.Errorf("%v vs %v: equal %v", c.a, c.b, d.Equal)
		}
		if _, err := json.Marshal(d); err != nil {
			t.Errorf("%v vs %v: JSON: %v", c.a, c.b, err)
		}
		if math.IsInf(d.MaxAbsErr, 0) || math.IsNaN(d.MaxAbsErr) {
			t.Errorf("%v vs %v: max abs %v", c.a, c.b, d.MaxAbsErr)
		}
	}
	var n Number
	if err := json.Unmarshal([]byte(`"-Inf"`), &n); err != nil || !math.IsInf(float64(n), -1) {
		t.Errorf("Number round trip: %v %v", n, err)
	}
	if b, _ := json.Marshal(Number(math.NaN())); string(b) != `"NaN"` {
		t.Errorf("NaN marshals as %s", b)
	}
}

func TestULPDistance(t *testing.T) {
	one := 1.0
	next32 := float64(math.Nextafter32(1, 2))
	if got := ulpDistance(graph.Float, one, next32); got != 1 {
		t.Errorf("float32 next after 1: %d ulp", got)
	}
	if got := ulpDistance(graph.Float, -float64(math.SmallestNonzeroFloat32), float64(math.SmallestNonzeroFloat32)); got != 2 {
		t.Errorf("across zero: %d ulp", got)
	}
	if got := ulpDistance(graph.Float, 0, math.Copysign(0, -1)); got != 0 {
		t.Errorf("+0 and -0: %d ulp", got)
	}
	h1 := float16.Fromfloat32(1)
	h2 := float16.Frombits(h1.Bits() + 3)
	if got := ulpDistance(graph.Float16, 1, float64(h2.Float32())); got != 3 {
		t.Errorf("float16: %d ulp, want 3", got)
	}
	b2 := graph.BF16(uint16(graph.BF16FromFloat32(1)) + 2)
	if got := ulpDistance(graph.BFloat16, 1, float64(b2.Float32())); got != 2 {
		t.Errorf("bfloat16: %d ulp, want 2", got)
	}
	d := diffTensors("y", kernels.FromSlice([]int{1}, []float16.Float16{h1}), kernels.FromSlice([]int{1}, []float16.Float16{h2}), DefaultFloat16, noPositions)
	if d.MaxULP != 3 || !d.Equal {
		t.Errorf("float16 output: %+v", d)
	}
	// Integer outputs compare exactly whatever the tolerance.
	d = diffTensors("ids", kernels.FromSlice([]int{2}, []int64{3, 4}), kernels.FromSlice([]int{2}, []int64{3, 5}), Tolerance{Rtol: 1, Atol: 1}, noPositions)
	if d.Equal || d.Tolerance != (Tolerance{}) {
		t.Errorf("int64 output: %+v", d)
	}
}

// TestDiffPositions checks the sequence position of elements: from the
// position ids of each row, from the past length, along a past+current
// axis, and that padding tokens are not compared.
func TestDiffPositions(t *testing.T) {
	// Output [batch 2, seq 3, 2]: row 1 is left-padded by one token.
	shape := []int{2, 3, 2}
	a := make([]float32, 12)
	b := make([]float32, 12)
	b[1*6+0*2+1] = 9 // row 1, token 0 (padding): not compared
	b[1*6+2*2+0] = 1 // row 1, token 2: position 1
	b[0*6+2*2+1] = 1 // row 0, token 2: position 7
	pm := &positionMap{batchAxis: 0, seqAxis: 1, pos: [][]int64{{5, 6, 7}, {1, 0, 1}}, pad: [][]bool{{false, false, false}, {true, false, false}}}
	d := diffTensors("y", f32(shape, a...), f32(shape, b...), DefaultFloat32, pm)
	if d.Mismatches != 2 || d.Compared != 10 {
		t.Fatalf("mismatches %d compared %d", d.Mismatches, d.Compared)
	}
	if p := d.FirstMismatch.Position; p == nil || *p != 1 || d.FirstMismatch.Index[0] != 1 {
		t.Fatalf("first mismatch %+v", d.FirstMismatch)
	}
	// Without position ids: past + index.
	pm = &positionMap{batchAxis: 0, seqAxis: 1, past: 10}
	d = diffTensors("y", f32(shape, a...), f32(shape, b...), DefaultFloat32, pm)
	if p := d.FirstMismatch.Position; p == nil || *p != 10 || d.FirstMismatch.Index[1] != 0 || d.Compared != 12 || d.Mismatches != 3 {
		t.Fatalf("past 10: first %+v, %d compared", d.FirstMismatch, d.Compared)
	}
	// A past+current axis: the index is the position.
	pm = &positionMap{batchAxis: 0, seqAxis: 1, total: true, past: 10, pad: [][]bool{{true, true, true}, {true, true, true}}}
	d = diffTensors("y", f32(shape, a...), f32(shape, b...), DefaultFloat32, pm)
	if p := d.FirstMismatch.Position; p == nil || *p != 0 || d.Compared != 12 {
		t.Fatalf("total axis: first %+v, %d compared", d.FirstMismatch, d.Compared)
	}
	// Shapes that differ are a problem, not a crash.
	d = diffTensors("y", f32([]int{2}, 1, 2), f32([]int{1, 2}, 1, 2), DefaultFloat32, noPositions)
	if d.Equal || d.Problem == "" {
		t.Fatalf("shape mismatch: %+v", d)
	}
}

func TestPolicy(t *testing.T) {
	var p Policy
	if p.For(graph.Float) != DefaultFloat32 || p.For(graph.Float16) != DefaultFloat16 || p.For(graph.BFloat16) != DefaultBFloat16 || p.For(graph.Int64) != (Tolerance{}) {
		t.Fatal("defaults")
	}
	r := 0.5
	p.Rtol = &r
	if got := p.For(graph.Float16); got.Rtol != 0.5 || got.Atol != DefaultFloat16.Atol {
		t.Fatalf("--rtol only: %+v", got)
	}
}
