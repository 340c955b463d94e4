package verify

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestStaticCacheInputsAreConsistent checks the sets the sweep makes for
// the opset-24 decoder whose static KV caches go through TensorScatter
// into Attention: its caches, write indices and valid-key counts are
// recognised; in every set each row's new tokens are written right after
// the tokens its cache holds, at the positions that follow them, and the
// valid keys end with them; and the model reads exactly the slots the
// row holds: NaN in every other slot leaves the outputs finite and
// unchanged, while a change in a held slot changes them.
func TestStaticCacheInputsAreConsistent(t *testing.T) {
	m := testmodels.BuildDeploy(testmodels.FormStaticCache24, testmodels.DefaultDeploy)
	a, err := Analyze(m, Hints{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Role{"input_ids": RoleTokenIDs, "position_ids": RolePositionIDs, "write_indices": RoleWriteIndex,
		"nonpad_kv_seqlen": RoleKVLength, "key_cache.0": RoleStaticCache, "value_cache.1": RoleStaticCache}
	for name, r := range want {
		if in := a.input(name); in == nil || in.Role != r {
			t.Fatalf("%s: %+v, want role %s", name, in, r)
		}
	}
	if kc := a.input("key_cache.0"); kc.Dims[2].Kind != DimCapacity || !a.HasCache {
		t.Fatalf("key_cache.0 dims %+v (has cache %v)", kc.Dims, a.HasCache)
	}
	sess, err := kernels.NewSession(m, kernels.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := &planner{a: a, opts: &Options{}}
	specs := p.specs()
	ragged, pasts := 0, 0
	for _, s := range specs {
		set, err := a.synthesize(s, 1)
		if err != nil {
			t.Fatal(err)
		}
		in := set.inputs
		w, kv, pos := in["write_indices"].Int64s(), in["nonpad_kv_seqlen"].Int64s(), in["position_ids"].Int64s()
		capacity := in["key_cache.0"].Shape[2]
		if !slices.Equal(w, slices.Repeat(w[:1], len(w))) {
			ragged++
		}
		for b := range s.Batch {
			if kv[b] != w[b]+int64(s.Seq) || kv[b] > int64(capacity) || w[b] < 0 || w[b] > int64(s.Past) {
				t.Fatalf("%s row %d: write index %d, %d valid keys, %d new tokens, capacity %d, past %d", s.Name, b, w[b], kv[b], s.Seq, capacity, s.Past)
			}
			// A row repeating r positions from its middle token on (tokens
			// sharing a position in different slots, rowPositions) sits up
			// to r positions behind its slots.
			_, r := s.rowShift(b)
			for j := range s.Seq {
				behind := int64(min(r, max(0, j-s.Seq/2+1)))
				if got := pos[b*s.Seq+j]; got != w[b]+int64(j)+int64(s.Offset)-behind {
					t.Fatalf("%s row %d: token %d at position %d, written at slot %d, %d behind", s.Name, b, j, got, w[b]+int64(j), behind)
				}
			}
			if r > 0 && w[b] != 0 {
				t.Fatalf("%s row %d repeats positions after a history of %d", s.Name, b, w[b])
			}
			if w[b] > 0 {
				pasts++
			}
		}
		ref, err := sess.Run(in)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		// NaN in the slots no row holds or writes; then one held slot
		// changed.
		poisoned := map[string]*kernels.Tensor{}
		for k, v := range in {
			poisoned[k] = v
		}
		held := -1
		for l := range testmodels.DefaultDeploy.Layers {
			for _, kind := range []string{"key", "value"} {
				name := fmt.Sprintf("%s_cache.%d", kind, l)
				c := kernels.FromSlice(in[name].Shape, slices.Clone(kernels.Data[float32](in[name])))
				d := kernels.Data[float32](c)
				B, N, M, H := c.Shape[0], c.Shape[1], c.Shape[2], c.Shape[3]
				for b := range B {
					for n := range N {
						for s := int(w[b]) + set.seq; s < M; s++ {
							for h := range H {
								d[((b*N+n)*M+s)*H+h] = float32(math.NaN())
							}
						}
					}
					if w[b] > 0 && held < 0 && name == "key_cache.0" {
						held = b
					}
				}
				poisoned[name] = c
			}
		}
		got, err := sess.Run(poisoned)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		r, g := kernels.Data[float32](ref["logits"]), kernels.Data[float32](got["logits"])
		for i := range r {
			if r[i] != g[i] {
				t.Fatalf("%s: logits[%d] %v with the unread slots NaN, %v without", s.Name, i, g[i], r[i])
			}
		}
		if held >= 0 {
			c := poisoned["key_cache.0"]
			c = kernels.FromSlice(c.Shape, slices.Clone(kernels.Data[float32](c)))
			kernels.Data[float32](c)[(held*c.Shape[1]*c.Shape[2])*c.Shape[3]] += 1 // slot 0 of row held
			poisoned["key_cache.0"] = c
			got, err := sess.Run(poisoned)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Equal(kernels.Data[float32](got["logits"]), kernels.Data[float32](ref["logits"])) {
				t.Errorf("%s: a held slot of row %d is not read", s.Name, held)
			}
		}
	}
	t.Logf("%d sets, %d with rows holding different counts, %d rows with a history", len(specs), ragged, pasts)
	if ragged == 0 || pasts == 0 {
		t.Errorf("no set has rows with different histories (%d) or a history at all (%d)", ragged, pasts)
	}
}
