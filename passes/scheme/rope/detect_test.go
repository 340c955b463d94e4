package rope_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/audit"
	st "github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
)

// TestCorpus audits the corpus models whose golden reports have RoPE
// findings: each finding as the golden report has it.
func TestCorpus(t *testing.T) { st.CheckCorpus(t, rope.Name, audit.AuditModel) }

// rotatePartial rotates the first rd dims of x [B,H,S,hd] by rot(xr)
// (x·cos + rot(x)·sin) and keeps the others.
func rotatePartial(e *st.Env, x, cos, sin *graph.Value, rd int, rot func(xr *graph.Value) *graph.Value) *graph.Value {
	xr := e.Op("Slice", nil, x, e.Ints(0), e.Ints(int64(rd)), e.Ints(-1))
	pass := e.Op("Slice", nil, x, e.Ints(int64(rd)), e.Ints(math.MaxInt64), e.Ints(-1))
	y := e.Op("Add", nil, e.Op("Mul", nil, xr, cos), e.Op("Mul", nil, rot(xr), sin))
	return e.Op("Concat", e.Axis(-1), y, pass)
}

// TestForms: RoPE written in forms and with values the corpus does not
// have, each with the params the math gives.
func TestForms(t *testing.T) {
	cases := []struct {
		name  string
		build func() *graph.Model
		fused bool
		want  map[string]any
	}{{
		// Interleaved pairs on 8 of 32 dims, base 1e6, frequencies by
		// MatMul with a Div-computed inv_freq, positions from NonZero,
		// cos/sin repeat_interleaved, the pairs cut by Slice steps.
		name: "interleaved_partial_nonzero",
		build: func() *graph.Model {
			return st.BuildExporterForm(st.ExporterForm{Name: "interleaved_partial", Heads: 2, HD: 32,
				Rope: func(e *st.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
					freqs := st.FreqsMatMul(e, st.PosNonZero(e), 1e6, 8, "div")
					cos, sin := st.InterleavedCosSin(e, freqs, 8)
					return st.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
						return rotatePartial(e, x, cos, sin, 8, func(xr *graph.Value) *graph.Value { return st.RotPairsSliceKeep(e, xr, 8) })
					})
				}})
		},
		want: map[string]any{"layout": "interleaved", "base": 1e6, "head_dim": 32, "rotary_dim": 8, "num_heads": 2, "num_kv_heads": 2, "scaling": "none", "max_positions": nil},
	}, {
		// Linear scaling by 2 of base 20000, halves by Split, positions
		// from the mask's cumulative sum, scores by Einsum, four heads.
		name: "split_linear_cumsum_einsum",
		build: func() *graph.Model {
			return st.BuildForm(st.Form{Name: "split_linear", Heads: 4, HD: 16, Positions: "cumsum", Rope: "computed", Rotate: "split", Base: 20000, Linear: 2, Scores: "einsum"})
		},
		want: map[string]any{"layout": "half_split", "base": 20000.0, "scaling": "linear", "factor": 2.0, "head_dim": 16, "rotary_dim": 16, "num_heads": 4},
	}, {
		// com.microsoft RotaryEmbedding over [48, 8] caches of base 5e5
		// feeding MultiHeadAttention, two layers.
		name: "ms_rotary_base_5e5",
		build: func() *graph.Model {
			b := st.NewNet(st.ONNX(17), st.MS())
			ids, pos := b.IDs(), b.PosIDs()
			x := b.Embed(ids)
			cos, sin := b.Caches(48, st.HeadDim, 500000, st.One, 1)
			x = b.MSRopeLayer(b.MSRopeLayer(x, pos, cos, sin), pos, cos, sin)
			b.Output(x)
			return b.M
		},
		fused: true,
		want:  map[string]any{"layout": "half_split", "base": 500000.0, "scaling": "none", "head_dim": st.HeadDim, "rotary_dim": st.HeadDim, "num_heads": st.Heads, "max_positions": 48},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := c.build()
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, rope.Detect)
			f := st.Only(t, fs, trace)
			if f.Fused != c.fused {
				t.Errorf("fused %v, want %v", f.Fused, c.fused)
			}
			st.WantParams(t, f, c.want)
		})
	}
}

// TestNearMisses: rotations that are not RoPE give no finding, and the
// trace says why.
func TestNearMisses(t *testing.T) {
	const hd = 16
	cases := []struct {
		name   string
		rope   func(e *st.Env, q, k *graph.Value) (*graph.Value, *graph.Value)
		reason string
	}{{
		// cos and sin of position² · ω: pairs turn, but not by angles
		// linear in the position.
		name: "angles_quadratic_in_position",
		rope: func(e *st.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
			p := e.ToFloat(e.RangeS())
			p2 := e.Op("Mul", nil, p, p)
			freqs := e.Op("Mul", nil, e.Op("Unsqueeze", nil, p2, e.Ints(-1)), e.Floats([]int64{1, hd / 2}, st.InvFreq(10000, hd)))
			cos, sin := st.HalfCosSin(e, freqs)
			return st.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
				return e.Op("Add", nil, e.Op("Mul", nil, x, cos), e.Op("Mul", nil, st.RotSplit18(e, x), sin))
			})
		},
		reason: "the angles are not linear in the position",
	}, {
		// Dimension c turns with 15 - c (the halves mirrored): a rotation
		// of pairs in neither RoPE layout.
		name: "pairs_mirrored",
		rope: func(e *st.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
			freqs := st.FreqsMatMul(e, e.RangeS(), 10000, hd, "table") // [S, 8]
			rev := make([]int64, hd/2)
			for i := range rev {
				rev[i] = int64(hd/2 - 1 - i)
			}
			// columns c and 15 - c share frequency c (c < 8).
			emb := e.Op("Concat", e.Axis(-1), freqs, e.Op("Gather", e.Axis(-1), freqs, e.Ints(rev...)))
			cos, sin := e.Op("Cos", nil, emb), e.Op("Sin", nil, emb)
			mirror := make([]int64, hd)
			sign := make([]float32, hd)
			for c := range mirror {
				mirror[c] = int64(hd - 1 - c)
				sign[c] = 1
				if c < hd/2 {
					sign[c] = -1
				}
			}
			return st.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
				rot := e.Op("Mul", nil, e.Op("Gather", e.Axis(-1), x, e.Ints(mirror...)), e.F32(sign...))
				return e.Op("Add", nil, e.Op("Mul", nil, x, cos), e.Op("Mul", nil, rot, sin))
			})
		},
		reason: "follow neither the half-split nor the interleaved layout",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := st.BuildExporterForm(st.ExporterForm{Name: c.name, Heads: 2, HD: hd, Rope: c.rope})
			st.Executes(t, m, 6)
			fs, trace := st.Detect(t, m, rope.Detect)
			st.WantMiss(t, fs, trace, "rope", c.reason)
		})
	}
}

// TestStoredTableAtFixedPositions: GPT-J's and CodeGen's form, a stored
// [rows, rd] table of cat(sin, cos) read at the positions, split, each
// column repeated twice (repeat_interleave) and rotate_every_two on the
// first rd dims. Exported with dynamic shapes the table is read at
// positions that follow the length; exported with fixed shapes (a static
// export, or the inputs pinned) the positions are constant and
// normalisation folds the read into a constant of the rows read. Either
// way the file holds the table: max_positions is its row count.
func TestStoredTableAtFixedPositions(t *testing.T) {
	const rows, hd, rd = 64, 16, 8
	inv := st.InvFreq(10000, rd)
	table := make([]float32, rows*rd)
	for p := 0; p < rows; p++ {
		for i, w := range inv {
			a := float64(p) * float64(w)
			table[p*rd+i] = float32(math.Sin(a))
			table[p*rd+rd/2+i] = float32(math.Cos(a))
		}
	}
	build := func() *graph.Model {
		return st.BuildExporterForm(st.ExporterForm{Name: "stored_sincos_table", Heads: 2, HD: hd,
			Rope: func(e *st.Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
				sincos := e.Op("Gather", e.Axis(0), e.Floats([]int64{rows, rd}, table), e.RangeS()) // [S, rd]
				twice := func(x *graph.Value) *graph.Value {                                        // repeat_interleave(x, 2, -1)
					u := e.Op("Unsqueeze", nil, x, e.Ints(-1))
					ex := e.Op("Expand", nil, u, e.Ints(1, 1, 2))
					return e.Op("Reshape", nil, ex, e.Ints(0, rd))
				}
				sin := twice(e.Op("Slice", nil, sincos, e.Ints(0), e.Ints(rd/2), e.Ints(-1)))
				cos := twice(e.Op("Slice", nil, sincos, e.Ints(rd/2), e.Ints(rd), e.Ints(-1)))
				return st.ApplyRope(q, k, func(x *graph.Value) *graph.Value {
					return rotatePartial(e, x, cos, sin, rd, func(xr *graph.Value) *graph.Value { return st.RotPairsSliceKeep(e, xr, rd) })
				})
			}})
	}
	want := map[string]any{"layout": "interleaved", "base": 10000.0, "head_dim": hd, "rotary_dim": rd, "num_heads": 2,
		"num_kv_heads": 2, "scaling": "none", "max_positions": rows}
	for _, seq := range []int64{0, 10} {
		t.Run(fmt.Sprintf("seq_%d", seq), func(t *testing.T) {
			m := build()
			if seq > 0 {
				for _, v := range m.Graph.Inputs {
					v.Type = graph.TensorType(v.Type.ElemType(), graph.Dims(1, seq))
				}
			} else {
				st.Executes(t, m, 6)
			}
			fs, trace := st.Detect(t, m, rope.Detect)
			st.WantParams(t, st.Only(t, fs, trace), want)
		})
	}
}
