package kernels

import (
	"errors"
	"math"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
)

// TestSmallFloatRoundTrip checks the 8-bit and 4-bit float encoders
// against graph's decoders: every finite bit pattern encodes back to
// itself, values halfway between neighbours round to the even one, and
// values past the largest finite one saturate or overflow as Cast says.
func TestSmallFloatRoundTrip(t *testing.T) {
	for dt, f := range smallFormats {
		n := 256
		if dt == graph.Float4E2M1 {
			n = 16
		}
		for code := range n {
			b := uint8(code)
			v := float64(graph.Float8ToFloat32(dt, b))
			if dt == graph.Float4E2M1 {
				v = float64(graph.Float4ToFloat32(b))
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			want := b
			if f.uz && v == 0 {
				want = 0
			}
			if got := encodeSmallFloat(dt, v, false); got != want {
				t.Errorf("%v: %#x (%v) encodes to %#x", dt, b, v, got)
			}
			// The midpoint to the next larger magnitude rounds to the
			// code whose mantissa is even.
			if b&(1<<(f.ebits+f.mbits)) != 0 || b >= f.maxCode {
				continue
			}
			next := smallValue(f, b+1)
			mid := (v + next) / 2
			even := b
			if b&1 == 1 {
				even = b + 1
			}
			if got := encodeSmallFloat(dt, mid, true); got != even {
				t.Errorf("%v: midpoint %v of %#x and %#x encodes to %#x, want %#x", dt, mid, b, b+1, got, even)
			}
		}
		maxVal := smallValue(f, f.maxCode)
		if got := encodeSmallFloat(dt, -4*maxVal, true); got != f.maxCode|1<<(f.ebits+f.mbits) {
			t.Errorf("%v: saturated -4*max encodes to %#x", dt, got)
		}
		if got := encodeSmallFloat(dt, math.Inf(1), true); got != f.maxCode {
			t.Errorf("%v: saturated +Inf encodes to %#x", dt, got)
		}
	}
	if got := encodeSmallFloat(graph.Float8E5M2, 1e6, false); got != 0x7c {
		t.Errorf("e5m2: 1e6 without saturation encodes to %#x, want +Inf 0x7c", got)
	}
	if got := encodeSmallFloat(graph.Float8E4M3FN, -1e6, false); got != 0xff {
		t.Errorf("e4m3fn: -1e6 without saturation encodes to %#x, want -NaN 0xff", got)
	}
	for _, c := range []struct {
		x    float64
		mode string
		want uint8
	}{{1, "up", 127}, {1.1, "up", 128}, {1.1, "down", 127}, {1.5, "nearest", 128}, {1.25, "nearest", 127}, {0, "up", 0}} {
		if got := encodeE8M0(c.x, true, c.mode); got != c.want {
			t.Errorf("e8m0 %v %s: %d, want %d", c.x, c.mode, got, c.want)
		}
	}
}

// TestSmallTypesOnlyWhereAllowed checks that an op whose schema does not
// take the small types refuses them (Concat would otherwise move their
// bytes, Add fail in its own way), and that a cast takes them.
func TestSmallTypesOnlyWhereAllowed(t *testing.T) {
	x := New(graph.Float8E4M3FN, 2)
	Data[uint8](x)[0] = 0x38 // 1.0
	for _, op := range []string{"Add", "Concat"} {
		_, err := runOp(t, "", op, 21, 1, []*graph.Attr{graph.IntAttr("axis", 0)}, x, x)
		if !errors.Is(err, ErrUnsupportedType) {
			t.Errorf("%s of float8: %v, want an unsupported type error", op, err)
		}
	}
	y := mustOp(t, "", "Cast", 21, []*graph.Attr{graph.IntAttr("to", int64(graph.Float))}, x)
	if got := Data[float32](y); got[0] != 1 || got[1] != 0 {
		t.Errorf("Cast of float8 [1, 0]: %v", got)
	}
}

// TestFormatNumberAsNumpy checks the float-to-string conversion of Cast
// against numpy's str() of the same values.
func TestFormatNumberAsNumpy(t *testing.T) {
	for _, c := range []struct {
		x    float64
		dt   graph.DataType
		want string
	}{
		{1, graph.Float, "1.0"}, {float64(float32(0.1)), graph.Float, "0.1"}, {1e-5, graph.Double, "1e-05"},
		{float64(float32(123456.79)), graph.Float, "123456.79"}, {1e16, graph.Double, "1e+16"},
		{math.Inf(-1), graph.Float, "-inf"}, {math.NaN(), graph.Float, "nan"}, {-7, graph.Int32, "-7"},
		{1, graph.Bool, "True"},
	} {
		if got := formatNumber(c.x, c.dt); got != c.want {
			t.Errorf("%v of %v: %q, want %q", c.x, c.dt, got, c.want)
		}
	}
}
