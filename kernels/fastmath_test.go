package kernels

import (
	"math"
	"testing"
)

// ulpDiff is the distance in float32 units in the last place between got
// and the correctly rounded want.
func ulpDiff(got float32, want float64) int64 {
	w := float32(want)
	if got == w || math.IsNaN(float64(got)) && math.IsNaN(want) {
		return 0
	}
	ord := func(f float32) int64 {
		b := int64(math.Float32bits(f))
		if b < 0 || f < 0 {
			return -(b & 0x7fffffff)
		}
		return b
	}
	d := ord(got) - ord(w)
	if d < 0 {
		d = -d
	}
	return d
}

// TestFastMathULP checks expf, tanhf, sigmoidf, erff and the Gelus against math's float64
// functions rounded to float32 over every 331st float32 (both signs, the
// whole range): at most 1 ulp.
func TestFastMathULP(t *testing.T) {
	funcs := []struct {
		name string
		fast func(float64) float64
		ref  func(float64) float64
	}{
		{"exp", expf, math.Exp},
		{"tanh", tanhf, math.Tanh},
		{"sigmoid", sigmoidf, sigmoid},
		{"geluTanh", geluTanhf, geluTanh},
		{"erf", erff, math.Erf},
		{"geluErf", geluErff, geluErf},
	}
	for _, f := range funcs {
		var worst int64
		var at float32
		n := 0
		for b := uint32(0); b < 0x7f800000; b += 331 {
			for _, x := range []float32{math.Float32frombits(b), -math.Float32frombits(b)} {
				got := float32(f.fast(float64(x)))
				if d := ulpDiff(got, f.ref(float64(x))); d > worst {
					worst, at = d, x
				}
				n++
			}
		}
		for _, x := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0, 88.72, 88.73, -87.4, -103.9, -104, 0x1p-12, -0x1p-12, 3.9, 4, 10.5, -10.5, -14.5, -15, 1e-30} {
			if d := ulpDiff(float32(f.fast(float64(x))), f.ref(float64(x))); d > worst {
				worst, at = d, x
			}
		}
		t.Logf("%s: worst %d ulp at %g over %d values", f.name, worst, at, n)
		if worst > 1 {
			t.Errorf("%s: %d ulp at %g, want <= 1", f.name, worst, at)
		}
	}
}

func TestWiden(t *testing.T) {
	for b := uint32(0); b < 1<<32-1<<20; b += 1 << 20 {
		for _, o := range []uint32{0, 1, 0x7ffff} {
			v := math.Float32frombits(b + o)
			w, g := float64(v), widen(v)
			if math.Float64bits(w) != math.Float64bits(g) && !(math.IsNaN(w) && math.IsNaN(g)) {
				t.Fatalf("widen(%g) = %g, want %g", v, g, w)
			}
		}
	}
}

// TestExpVec checks that the vector exponential (AVX-512 where the CPU has
// it) gives expf's bits, specials and the saturation bounds included.
func TestExpVec(t *testing.T) {
	var s []float64
	for b := uint32(0); b < 0x7f800000; b += 4099 {
		x := float64(math.Float32frombits(b))
		s = append(s, x, -x, x*1e-3, -x*1e-3)
	}
	s = append(s, math.Inf(1), math.Inf(-1), math.NaN(), 700, -700, 700.0001, -700.0001, 709, -745, 1e300, -1e300)
	d := make([]float64, len(s))
	expN(d, s)
	for i, x := range s {
		w := expf(x)
		if math.Float64bits(d[i]) != math.Float64bits(w) && !(math.IsNaN(w) && math.IsNaN(d[i])) {
			t.Fatalf("exp(%g): vector %g, expf %g", x, d[i], w)
		}
	}
	requireVector(t, "exp", expVec(make([]float64, len(s)), s), len(s))
}

// TestErfVec checks that the vector erf and Gelu (AVX-512 where the CPU
// has it) give the bits of the scalar forms over a sweep of float32
// values (both signs), specials and interval edges included.
func TestErfVec(t *testing.T) {
	var s []float32
	for b := uint32(0); b < 0x7f800000; b += 1031 {
		x := math.Float32frombits(b)
		s = append(s, x, -x)
	}
	for i := 0; i <= 4*erfcTabN+8; i++ { // the table's interval edges, and around them
		x := float32(i) * 0.25
		s = append(s, x, -x, math.Nextafter32(x, 0), math.Nextafter32(x, 100), -math.Nextafter32(x, 100))
	}
	s = append(s, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0x1p-12, -0x1p-12,
		math.Nextafter32(0x1p-12, 0), 0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 3.4e38, -3.4e38)
	s = append(s, 1, 2, 3) // a tail the vector form leaves to the scalar one
	d := make([]float32, len(s))
	for _, f := range []struct {
		name  string
		slice func(d, s []float32)
		one   func(float64) float64
	}{
		{"erf", erfSlice, erff},
		{"geluErf", geluErfSlice, geluErff},
	} {
		f.slice(d, s)
		for i, v := range s {
			w := float32(f.one(float64(v)))
			if math.Float32bits(d[i]) != math.Float32bits(w) && !(w != w && d[i] != d[i]) {
				t.Fatalf("%s(%g): slice %g, scalar %g", f.name, v, d[i], w)
			}
		}
	}
	requireVector(t, "erf", erfVec(d, s), len(s))
}
