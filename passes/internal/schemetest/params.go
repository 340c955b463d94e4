package schemetest

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"testing"

	"github.com/onnxpe/onnxpe/passes"
)

// Agree compares a truth value with a reported one: numbers within
// 0.1%, lists elementwise, the rest exactly.
func Agree(want, got any) bool { return AgreeWithin(want, got, 1e-3) }

// AgreeWithin compares a wanted value with a reported one: numbers within
// rel of the wanted, lists and objects elementwise, the rest exactly.
func AgreeWithin(want, got any, rel float64) bool {
	switch w := want.(type) {
	case float64:
		g, ok := toFloat(got)
		if !ok {
			return false
		}
		return math.Abs(w-g) <= rel*math.Abs(w) || w == g
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !AgreeWithin(w[i], g[i], rel) {
				return false
			}
		}
		return true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k := range w {
			if !AgreeWithin(w[k], g[k], rel) {
				return false
			}
		}
		return true
	}
	return fmt.Sprint(want) == fmt.Sprint(got)
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	}
	return 0, false
}

// JSONParams is a finding's params as JSON values (numbers as float64).
func JSONParams(f *passes.Finding) map[string]any {
	b, _ := json.Marshal(f.Params.Map())
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// NormJSON turns a Go value into what encoding/json decodes it to.
func NormJSON(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// WantParams checks the params of f that want names: numbers within a
// relative 1e-6 (a perturbed parameter fails), lists and objects
// elementwise, nil for null; a key f does not print fails too.
func WantParams(t testing.TB, f *passes.Finding, want map[string]any) {
	t.Helper()
	got := JSONParams(f)
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		g, ok := got[k]
		if w := NormJSON(want[k]); !ok || !AgreeWithin(w, g, 1e-6) {
			t.Errorf("%s: %s = %v, want %v (params %v)", f.Scheme, k, g, want[k], got)
		}
	}
}
