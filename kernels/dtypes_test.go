package kernels

import (
	"errors"
	"fmt"
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

// TestUnsignedAndInt16Ops runs ops whose schemas take int16, uint16,
// uint32 and uint64 on each of them and compares with the same op on
// int64 (the values fit every type).
func TestUnsignedAndInt16Ops(t *testing.T) {
	a := []int64{3, 7, 1, 9, 4, 2}
	b := []int64{5, 2, 8, 1, 4, 6}
	for _, dt := range []graph.DataType{graph.Int16, graph.Uint16, graph.Uint32, graph.Uint64} {
		x := castTensor(FromSlice([]int{2, 3}, a), dt)
		y := castTensor(FromSlice([]int{2, 3}, b), dt)
		x64, y64 := FromSlice([]int{2, 3}, a), FromSlice([]int{2, 3}, b)
		cond := FromSlice([]int{2, 3}, []bool{true, false, true, false, true, false})
		for _, c := range []struct {
			op    string
			opset int64
			attrs []*graph.Attr
			ins   func(x, y *Tensor) []*Tensor
		}{
			{"Add", 14, nil, func(x, y *Tensor) []*Tensor { return []*Tensor{x, y} }},
			{"Mul", 14, nil, func(x, y *Tensor) []*Tensor { return []*Tensor{x, y} }},
			{"Max", 13, nil, func(x, y *Tensor) []*Tensor { return []*Tensor{x, y} }},
			{"Mod", 13, nil, func(x, y *Tensor) []*Tensor { return []*Tensor{x, y} }},
			{"Less", 13, nil, func(x, y *Tensor) []*Tensor { return []*Tensor{x, y} }},
			{"Where", 16, nil, func(x, y *Tensor) []*Tensor { return []*Tensor{cond, x, y} }},
			{"Abs", 13, nil, func(x, y *Tensor) []*Tensor { return []*Tensor{x} }},
			{"ArgMax", 13, []*graph.Attr{graph.IntAttr("axis", 1)}, func(x, y *Tensor) []*Tensor { return []*Tensor{x} }},
			{"ReduceMax", 18, nil, func(x, y *Tensor) []*Tensor { return []*Tensor{x} }},
			{"Transpose", 13, nil, func(x, y *Tensor) []*Tensor { return []*Tensor{x} }},
			{"Concat", 13, []*graph.Attr{graph.IntAttr("axis", 0)}, func(x, y *Tensor) []*Tensor { return []*Tensor{x, y} }},
			{"Gather", 13, nil, func(x, y *Tensor) []*Tensor { return []*Tensor{x, FromSlice([]int{2}, []int64{1, 0})} }},
			{"Clip", 13, nil, func(x, y *Tensor) []*Tensor {
				return []*Tensor{x, castTensor(Scalar(int64(2)), x.DType), castTensor(Scalar(int64(6)), x.DType)}
			}},
		} {
			want, err := runOp(t, "", c.op, c.opset, 1, c.attrs, c.ins(x64, y64)...)
			if err != nil {
				t.Fatalf("%s on int64: %v", c.op, err)
			}
			got, err := runOp(t, "", c.op, c.opset, 1, c.attrs, c.ins(x, y)...)
			if err != nil {
				t.Errorf("%s on %v: %v", c.op, dt, err)
				continue
			}
			if !equalShape(got[0].Shape, want[0].Shape) || fmt.Sprint(got[0].Int64s()) != fmt.Sprint(want[0].Int64s()) {
				t.Errorf("%s on %v: %v %v, want %v %v", c.op, dt, got[0], got[0].Int64s(), want[0], want[0].Int64s())
			}
		}
	}
}

// TestSmallTypesMove moves float8, float4, int4 and uint2 tensors through
// the data-movement ops whose schemas take them and compares with the
// same ops on the values as float32.
func TestSmallTypesMove(t *testing.T) {
	vals := []float32{1, -2, 0.5, 0, 3, -1}
	for _, dt := range []graph.DataType{graph.Float8E4M3FN, graph.Float8E5M2, graph.Float4E2M1, graph.Int4, graph.Uint2} {
		v := vals
		if dt == graph.Int4 {
			v = []float32{1, -2, 5, 0, 3, -1}
		} else if dt == graph.Uint2 {
			v = []float32{1, 2, 3, 0, 3, 1}
		}
		f := FromSlice([]int{2, 3}, v)
		x := castTensor(f, dt)
		for _, c := range []struct {
			op    string
			attrs []*graph.Attr
			extra []*Tensor
		}{
			{"Transpose", nil, nil},
			{"Flatten", []*graph.Attr{graph.IntAttr("axis", 0)}, nil},
			{"Reshape", nil, []*Tensor{FromSlice([]int{2}, []int64{3, 2})}},
			{"Unsqueeze", nil, []*Tensor{FromSlice([]int{1}, []int64{0})}},
			{"Pad", nil, []*Tensor{FromSlice([]int{4}, []int64{0, 1, 1, 0})}},
			{"Identity", nil, nil},
		} {
			want, err := runOp(t, "", c.op, 21, 1, c.attrs, append([]*Tensor{f}, c.extra...)...)
			if err != nil {
				t.Fatalf("%s on float32: %v", c.op, err)
			}
			got, err := runOp(t, "", c.op, 21, 1, c.attrs, append([]*Tensor{x}, c.extra...)...)
			if err != nil {
				t.Errorf("%s on %v: %v", c.op, dt, err)
				continue
			}
			if got[0].DType != dt || !equalShape(got[0].Shape, want[0].Shape) || fmt.Sprint(got[0].Float64s()) != fmt.Sprint(want[0].Float64s()) {
				t.Errorf("%s on %v: %v %v, want %v", c.op, dt, got[0], got[0].Float64s(), want[0].Float64s())
			}
		}
	}
}
