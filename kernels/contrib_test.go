package kernels

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels/gemm"
)

// Unit tests of the contrib attention and quantization kernels that do
// not need ONNX Runtime (their differential tests are in
// contrib_ort_test.go, build tag ort).

func TestGenerationOpsNamed(t *testing.T) {
	for _, op := range []string{"BeamSearch", "GreedySearch"} {
		m := graph.NewModel(9, "kernels-test", graph.Opset{Domain: "", Version: 17}, graph.Opset{Domain: DomainMicrosoft, Version: 1})
		g := m.Graph
		x := g.AddInput("input_ids", graph.TensorType(graph.Int32, nil))
		n := g.NewNode(op, DomainMicrosoft, []*graph.Value{x}, 1)
		g.Append(n)
		g.AddOutput(n.Outputs()[0])
		_, err := NewSession(m, Options{})
		if err == nil || !errors.Is(err, ErrUnsupportedOp) || !strings.Contains(err.Error(), "com.microsoft."+op) ||
			!strings.Contains(err.Error(), "generation loop") {
			t.Errorf("%s: got error %v, want one naming the op as a generation loop", op, err)
		}
	}
}

func TestIntGemmExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const m, n, k = 3, 5, 1000
	a, b := make([]float32, m*k), make([]float32, k*n)
	for i := range a {
		a[i] = float32(255 - 2*rng.IntN(2)*255) // +-255: the largest products
	}
	for i := range b {
		b[i] = float32(rng.IntN(511) - 255)
	}
	// Row 0 and column 0 at the largest magnitude: their sum (65,025,000)
	// needs 26 bits, which float32 holds only chunk by chunk.
	for p := range k {
		a[p], b[p*n] = 255, 255
	}
	c := make([]int32, m*n)
	intGemm(gemm.Exec{}, m, n, k, a, b, c)
	for i := range m {
		for j := range n {
			var want int64
			for p := range k {
				want += int64(a[i*k+p]) * int64(b[p*n+j])
			}
			if int64(c[i*n+j]) != want {
				t.Fatalf("c[%d,%d] = %d, want %d", i, j, c[i*n+j], want)
			}
		}
	}
}

// nbitsCase builds MatMulNBits inputs (4 bits) with packed zero points.
func nbitsCase(rng *rand.Rand, M, K, N, bs int) (a, b, scales, zp *Tensor) {
	kb := (K + bs - 1) / bs
	a = randF32(rng, M, K)
	bq := make([]uint8, N*kb*bs/2)
	for i := range bq {
		bq[i] = uint8(rng.IntN(256))
	}
	sc := make([]float32, N*kb)
	for i := range sc {
		sc[i] = 0.01 + 0.1*rng.Float32()
	}
	z := make([]uint8, N*((kb+1)/2))
	for i := range z {
		z[i] = uint8(rng.IntN(256))
	}
	return a, FromSlice([]int{N, kb, bs / 2}, bq), FromSlice([]int{N * kb}, sc), FromSlice([]int{len(z)}, z)
}

// TestMatMulNBitsGIdxZeroPoints checks g_idx with packed zero points (a
// case ONNX Runtime 1.30 gets wrong, so not in the differential test): the
// identity g_idx gives the same result as none, and a shuffled g_idx
// matches a float64 reference that dequantizes with block g_idx[k].
func TestMatMulNBitsGIdxZeroPoints(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	const M, K, N, bs = 3, 64, 10, 16
	a, b, sc, zp := nbitsCase(rng, M, K, N, bs)
	attrs := []*graph.Attr{graph.IntAttr("K", K), graph.IntAttr("N", N), graph.IntAttr("bits", 4), graph.IntAttr("block_size", bs)}
	plain := mustOp(t, DomainMicrosoft, "MatMulNBits", 21, attrs, a, b, sc, zp)
	ident := make([]int32, K)
	for k := range ident {
		ident[k] = int32(k / bs)
	}
	withIdent := mustOp(t, DomainMicrosoft, "MatMulNBits", 21, attrs, a, b, sc, zp, FromSlice([]int{K}, ident))
	if d := maxDiff(plain, withIdent); d != 0 {
		t.Errorf("identity g_idx differs from none by %g", d)
	}
	shuf := make([]int32, K)
	for k := range shuf {
		shuf[k] = int32(rng.IntN(K / bs))
	}
	got := Data[float32](mustOp(t, DomainMicrosoft, "MatMulNBits", 21, attrs, a, b, sc, zp, FromSlice([]int{K}, shuf)))
	bq, scd, zd, ad := Data[uint8](b), Data[float32](sc), Data[uint8](zp), Data[float32](a)
	kb := K / bs
	for i := range M {
		for n := range N {
			var want float64
			for k := range K {
				q := float64(bq[(n*kb+k/bs)*bs/2+(k%bs)/2] >> (4 * (k % 2)) & 15)
				blk := int(shuf[k])
				z := float64(zd[n*((kb+1)/2)+blk/2] >> (4 * (blk % 2)) & 15)
				want += float64(ad[i*K+k]) * (q - z) * float64(scd[n*kb+blk])
			}
			if d := math.Abs(float64(got[i*N+n]) - want); d > 1e-4 {
				t.Fatalf("y[%d,%d] = %g, want %g", i, n, got[i*N+n], want)
			}
		}
	}
}

func maxDiff(a, b *Tensor) float64 {
	av, bv := a.Float64s(), b.Float64s()
	d := 0.0
	for i := range av {
		d = math.Max(d, math.Abs(av[i]-bv[i]))
	}
	return d
}

// refAttention is a float64 reference of causal grouped-query attention
// on (B, S, N*H) inputs: query row s of entry b attends to keys [0, s+1).
func refAttention(q, k, v []float32, B, S, nq, nkv, H int) []float64 {
	out := make([]float64, B*S*nq*H)
	g := nq / nkv
	scale := 1 / math.Sqrt(float64(H))
	for b := range B {
		for n := range nq {
			kh := n / g
			for s := range S {
				qo := (b*S+s)*nq*H + n*H
				sc := make([]float64, s+1)
				m := math.Inf(-1)
				for j := range s + 1 {
					ko := (b*S+j)*nkv*H + kh*H
					var d float64
					for i := range H {
						d += float64(q[qo+i]) * float64(k[ko+i])
					}
					sc[j] = d * scale
					m = math.Max(m, sc[j])
				}
				var sum float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - m)
					sum += sc[j]
				}
				for j := range sc {
					vo := (b*S+j)*nkv*H + kh*H
					for i := range H {
						out[qo+i] += sc[j] / sum * float64(v[vo+i])
					}
				}
			}
		}
	}
	return out
}

// TestGroupQueryAttentionBlocks runs a prompt long enough to be split into
// many query blocks (and GEMMs of different key counts) on one and on two
// threads, against the float64 reference.
func TestGroupQueryAttentionBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	const B, S, nq, nkv, H = 2, 300, 8, 2, 16
	q, k, v := randF32(rng, B, S, nq*H), randF32(rng, B, S, nkv*H), randF32(rng, B, S, nkv*H)
	seq := FromSlice([]int{B}, []int32{S - 1, S - 1})
	total := Scalar(int32(S))
	want := refAttention(Data[float32](q), Data[float32](k), Data[float32](v), B, S, nq, nkv, H)
	for _, threads := range []int{1, 2} {
		m := graph.NewModel(9, "kernels-test", graph.Opset{Domain: "", Version: 21}, graph.Opset{Domain: DomainMicrosoft, Version: 1})
		g := m.Graph
		var ins []*graph.Value
		feed := map[string]*Tensor{}
		for i, x := range []*Tensor{q, k, v, nil, nil, seq, total} {
			if x == nil {
				ins = append(ins, nil)
				continue
			}
			in := g.AddInput("in"+string(rune('a'+i)), graph.TensorType(x.DType, nil))
			ins = append(ins, in)
			feed[in.Name] = x
		}
		n := g.NewNode("GroupQueryAttention", DomainMicrosoft, ins, 3, graph.IntAttr("num_heads", nq), graph.IntAttr("kv_num_heads", nkv))
		g.Append(n)
		g.AddOutput(n.Outputs()[0])
		s, err := NewSession(m, Options{Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Run(feed)
		if err != nil {
			t.Fatal(err)
		}
		got := Data[float32](res[n.Outputs()[0].Name])
		worst := 0.0
		for i, w := range want {
			worst = math.Max(worst, math.Abs(float64(got[i])-w))
		}
		if worst > 1e-5 {
			t.Errorf("%d threads: max difference %g from the float64 reference", threads, worst)
		}
	}
}

// TestMultiHeadAttentionPackedForms checks the packed QKV (B, S, N, 3, H)
// and packed KV (B, L, N, 2, H) inputs (which ONNX Runtime's CPU provider
// does not take) against the same values unpacked.
func TestMultiHeadAttentionPackedForms(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	const B, S, N, H = 2, 4, 3, 8
	q, k, v := randF32(rng, B, S, N*H), randF32(rng, B, S, N*H), randF32(rng, B, S, N*H)
	bias := randF32(rng, 3*N*H)
	attrs := []*graph.Attr{graph.IntAttr("num_heads", N)}
	want := mustOp(t, DomainMicrosoft, "MultiHeadAttention", 21, attrs, q, k, v, bias)
	qkv := New(graph.Float, B, S, N, 3, H)
	kv := New(graph.Float, B, S, N, 2, H)
	for i := range B * S * N {
		for h := range H {
			Data[float32](qkv)[(i*3+0)*H+h] = Data[float32](q)[i*H+h]
			Data[float32](qkv)[(i*3+1)*H+h] = Data[float32](k)[i*H+h]
			Data[float32](qkv)[(i*3+2)*H+h] = Data[float32](v)[i*H+h]
			Data[float32](kv)[(i*2+0)*H+h] = Data[float32](k)[i*H+h]
			Data[float32](kv)[(i*2+1)*H+h] = Data[float32](v)[i*H+h]
		}
	}
	packed := mustOp(t, DomainMicrosoft, "MultiHeadAttention", 21, attrs, qkv, nil, nil, bias)
	if d := maxDiff(want, packed); d > 1e-6 {
		t.Errorf("packed QKV differs by %g", d)
	}
	packedKV := mustOp(t, DomainMicrosoft, "MultiHeadAttention", 21, attrs, q, kv, nil, bias)
	if d := maxDiff(want, packedKV); d > 1e-6 {
		t.Errorf("packed KV differs by %g", d)
	}
}

// TestQ4VectorKernels checks the 4-bit vector kernels (where the CPU has
// them) against dequantizing in Go: q4Dequant's permuted rows hold the
// same values, and q4Dot gives their dot product with a permuted row.
func TestQ4VectorKernels(t *testing.T) {
	if !hasQ4Vec() {
		t.Log("no 4-bit vector kernels on this CPU or build: nothing to check")
		return
	}
	rng := rand.New(rand.NewPCG(7, 7))
	const K, N, bs = 192, 3, 64
	a, b, sc, zp := nbitsCase(rng, 1, K, N, bs)
	attrs := []*graph.Attr{graph.IntAttr("K", K), graph.IntAttr("N", N), graph.IntAttr("bits", 4), graph.IntAttr("block_size", bs)}
	c := &Call{Node: graph.NewModel(9, "t").Graph.NewNode("MatMulNBits", DomainMicrosoft, nil, 1, attrs...), attrs: nil}
	for _, at := range attrs {
		c.attrs = append(c.attrs, namedAttr{name: at.Name(), a: at})
	}
	w, err := newNBits(c, []*Tensor{a, b, sc, zp})
	if err != nil {
		t.Fatal(err)
	}
	ap := make([]float32, K)
	q4Permute(ap, Data[float32](a))
	zps, want, got := make([]float32, w.kBlocks), make([]float32, K), make([]float32, K)
	for n := range N {
		w.zeroPoints(zps, n)
		w.dequantRow(want, n, zps)
		if !q4Dequant(got, w.q[n*w.kBlocks*w.blob:], w.scales[n*w.kBlocks:], zps, w.kBlocks, bs) {
			t.Fatal("q4Dequant did not run")
		}
		wp := make([]float32, K)
		q4Permute(wp, want)
		var dot float64
		for k := range K {
			if got[k] != wp[k] {
				t.Fatalf("row %d: dequantized element %d = %g, want %g", n, k, got[k], wp[k])
			}
			dot += float64(ap[k]) * float64(wp[k])
		}
		d, ok := q4Dot(ap, w.q[n*w.kBlocks*w.blob:], w.scales[n*w.kBlocks:], zps, w.kBlocks, bs)
		if !ok || math.Abs(float64(d)-dot) > 1e-4 {
			t.Errorf("row %d: q4Dot = %g (%v), want %g", n, d, ok, dot)
		}
	}
}

// TestAttentionFloat64Refused checks that a float64 Attention is an error
// wrapping ErrUnsupportedType (the attention core computes float32), not
// an internal error.
func TestAttentionFloat64Refused(t *testing.T) {
	q := New(graph.Double, 1, 2, 3, 8)
	_, err := runOp(t, "", "Attention", 23, 1, nil, q, q, q)
	if !errors.Is(err, ErrUnsupportedType) || errors.Is(err, ErrInternal) {
		t.Errorf("error %v, want ErrUnsupportedType", err)
	}
}

// TestContribAttentionEmptySequence: com.microsoft Attention on a
// sequence of length 0 (what a caller probing sizes may feed) returns an
// empty output and the past as present, without reading past the end of
// the empty projections.
func TestContribAttentionEmptySequence(t *testing.T) {
	x := FromSlice([]int{1, 0, 8}, []float32{})
	w := FromSlice([]int{8, 24}, make([]float32, 8*24))
	b := FromSlice([]int{24}, make([]float32, 24))
	past := FromSlice([]int{2, 1, 2, 3, 4}, make([]float32, 2*1*2*3*4))
	outs, err := runOp(t, DomainMicrosoft, "Attention", 17, 2, []*graph.Attr{graph.IntAttr("num_heads", 2)}, x, w, b, nil, past)
	if err != nil {
		t.Fatal(err)
	}
	if !equalShape(outs[0].Shape, []int{1, 0, 8}) || !equalShape(outs[1].Shape, []int{2, 1, 2, 3, 4}) {
		t.Fatalf("output %v and present %v", outs[0].Shape, outs[1].Shape)
	}
}
