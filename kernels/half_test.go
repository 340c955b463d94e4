package kernels

import (
	"math"
	"os"
	"testing"

	"github.com/x448/float16"
)

func TestF16to32Exhaustive(t *testing.T) {
	for i := range 1 << 16 {
		h := float16.Float16(i)
		got, want := math.Float32bits(f16to32(h)), math.Float32bits(h.Float32())
		if got != want {
			t.Fatalf("f16to32(%#04x) = %#08x, want %#08x", i, got, want)
		}
	}
}

func TestF32to16(t *testing.T) {
	// Every float32 takes 15 s (ONNXPE_F16_EXHAUSTIVE=1 does it); by
	// default a stride that visits every exponent and many mantissas, plus
	// the edges.
	step := uint32(127)
	if os.Getenv("ONNXPE_F16_EXHAUSTIVE") == "1" {
		step = 1
	}
	check := func(u uint32) {
		f := math.Float32frombits(u)
		if got, want := f32to16(f), float16.Fromfloat32(f); got != want {
			t.Fatalf("f32to16(%#08x = %g) = %#04x, want %#04x", u, f, got, want)
		}
	}
	for u := uint64(0); u < 1<<32; u += uint64(step) {
		check(uint32(u))
	}
	for _, u := range []uint32{0x477fefff, 0x477ff000, 0x477ff001, 0x47800000, 0x7f800000, 0x7fc00000, 0x33000000, 0x33000001, 0x387fc000, 0x387fe000, 0x38800000} {
		check(u)
		check(u | 0x80000000)
	}
}

func TestHalfSlices(t *testing.T) {
	// The vector paths (when the CPU has them) against the float16 package.
	hs := make([]float16.Float16, 1<<16+5)
	for i := range hs {
		hs[i] = float16.Float16(i)
	}
	w := make([]float32, len(hs))
	widen16(w, hs)
	for i, h := range hs {
		if got, want := math.Float32bits(w[i]), math.Float32bits(h.Float32()); got != want {
			t.Fatalf("widen16 %#04x = %#08x, want %#08x", uint16(h), got, want)
		}
	}
	fs := make([]float32, 0, 1<<20)
	for u := uint64(0); u < 1<<32; u += 4093 {
		fs = append(fs, math.Float32frombits(uint32(u)))
	}
	fs = append(fs, math.Float32frombits(0x7fc00001), math.Float32frombits(0xff800001), math.Float32frombits(0x477ff000), 65520, 65519.99)
	n := make([]float16.Float16, len(fs))
	narrow16(n, fs)
	for i, f := range fs {
		if want := float16.Fromfloat32(f); n[i] != want {
			t.Fatalf("narrow16 %#08x = %#04x, want %#04x", math.Float32bits(f), n[i], want)
		}
	}
}
