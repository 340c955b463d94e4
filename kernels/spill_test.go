package kernels

import (
	"runtime"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
)

func TestSpill(t *testing.T) {
	if !canSpill {
		t.Skip("no memory mapping on " + runtime.GOOS)
	}
	s := NewSpill()
	defer s.Close()
	n := SpillMin / 4
	big := New(graph.Float, 2, n/2)
	d := Data[float32](big)
	for i := range d {
		d[i] = float32(i % 1000)
	}
	small := New(graph.Float, 3)
	out := s.Outputs(map[string]*Tensor{"big": big, "small": small})
	if out["small"] != small {
		t.Errorf("a tensor under SpillMin was spilled")
	}
	got := out["big"]
	if got == big {
		t.Fatalf("a tensor of SpillMin bytes stayed in memory")
	}
	if !got.frozen || got.DType != graph.Float || len(got.Shape) != 2 || got.Shape[0] != 2 || got.Shape[1] != n/2 {
		t.Fatalf("spilled tensor: frozen %v, %v %v", got.frozen, got.DType, got.Shape)
	}
	if s.Bytes() != int64(n)*4 {
		t.Errorf("Bytes %d, want %d", s.Bytes(), n*4)
	}
	g := Data[float32](got)
	for i := range g {
		if g[i] != d[i] {
			t.Fatalf("element %d: %v, want %v", i, g[i], d[i])
		}
	}
	s.Release(got) // the pages go; the values are read back from the file
	if g[n-1] != d[n-1] {
		t.Fatalf("after Release: %v, want %v", g[n-1], d[n-1])
	}
	s.Close()
	if s.Bytes() != 0 {
		t.Errorf("Bytes after Close: %d", s.Bytes())
	}
	var none *Spill
	if none.Tensor(big) != big {
		t.Errorf("a nil Spill moved a tensor")
	}
}
