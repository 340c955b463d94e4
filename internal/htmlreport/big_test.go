package htmlreport

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/testmodels"
)

// A model of many layers gets a compact layer map: small cells in rows of
// 50 labelled by their first layer, one cell (with its tooltip) per layer.
func TestLayerMapOfManyLayers(t *testing.T) {
	cfg := testmodels.LlamaConfig{Layers: 150, Hidden: 16, Heads: 2, KVHeads: 1, FFN: 32, Vocab: 32, RopeBase: 10000, Opset: 17, Seed: 1}
	r, _, err := audit.AuditModel(testmodels.Llama(cfg), "llama150", passes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Layers) != 150 {
		t.Fatalf("%d layers", len(r.Layers))
	}
	fg := layerMap(&plot.IDs{}, r)
	if got := strings.Count(fg.SVG, `<g class="layer">`); got != 150 {
		t.Errorf("%d cells, want 150", got)
	}
	for _, l := range []string{"0", "50", "100"} {
		if !strings.Contains(fg.SVG, `text-anchor="end">`+l+`</text>`) {
			t.Errorf("no row label %s", l)
		}
	}
	if !strings.Contains(fg.SVG, "<title>layer 149: rope</title>") {
		t.Error("no tooltip for the last layer")
	}
	h, _ := strconv.ParseFloat(regexp.MustCompile(`height="([0-9.]+)"`).FindStringSubmatch(fg.SVG)[1], 64)
	if h > 200 {
		t.Errorf("the map of 150 layers is %g pixels high", h)
	}
	// 32 layers: two labelled rows of 16.
	r.Layers = r.Layers[:32]
	fg = layerMap(&plot.IDs{}, r)
	if !strings.Contains(fg.SVG, `>31</text>`) || strings.Count(fg.SVG, `y="34"`) != 16 {
		t.Errorf("32 layers are not two labelled rows of 16")
	}
}
