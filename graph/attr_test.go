package graph

import "testing"

func TestAttrRenamed(t *testing.T) {
	ref := RefAttr("axis", "split_dim", AttrInt)
	call := IntAttr("split_dim", 3)
	got := call.Renamed(ref.Name())
	if got.Name() != "axis" || got.Int() != 3 || got.RefAttrName() != "" {
		t.Errorf("Renamed = %s=%d ref %q", got.Name(), got.Int(), got.RefAttrName())
	}
	if call.Name() != "split_dim" {
		t.Error("Renamed changed the original")
	}
}
