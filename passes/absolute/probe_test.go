package absolute_test

import (
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	st "github.com/onnxpe/onnxpe/passes/internal/schemetest"
)

// longSeq is a length whose encoding's angles, [longSeq, 2048] float32,
// are more than a probe may evaluate.
const longSeq = 65536

// staticLong builds a one-block model of input_ids [1, longSeq] whose
// encoding is a sinusoid of 2048 frequencies projected to the model's
// width, centred over the positions when centre is set.
func staticLong(name string, centre bool) *graph.Model {
	m := st.BuildExporterForm(st.ExporterForm{Name: name, Heads: 2, HD: 16, Abs: func(e *st.Env, x *graph.Value) *graph.Value {
		pos := e.Op("Unsqueeze", nil, e.ToFloat(e.RangeS()), e.Ints(1))
		s := e.Op("Sin", nil, e.Op("Mul", nil, pos, e.Floats([]int64{1, 2048}, st.InvFreq(10000, 4096))))
		if centre {
			s = e.Op("Sub", nil, s, e.Op("ReduceMean", []*graph.Attr{graph.IntsAttr("axes", 0)}, s))
		}
		return e.Op("Add", nil, x, e.Op("Unsqueeze", nil, e.Op("MatMul", nil, s, e.Weight(2048, e.D)), e.Ints(0)))
	}})
	for _, v := range m.Graph.Inputs {
		v.Type = graph.TensorType(v.Type.ElemType(), graph.Dims(1, longSeq))
	}
	return m
}

func encodings(t *testing.T, m *graph.Model) ([]*absolute.Encoding, []passes.Miss) {
	t.Helper()
	ctx, err := passes.Run(m, passes.Options{Trace: true}, absolute.Absolute)
	if err != nil {
		t.Fatal(err)
	}
	return passes.Result(ctx, absolute.Absolute), ctx.Trace()
}

// TestProbeOverTheLimit: a static export whose encoding is too large to
// probe is evaluated on its first positions when its rows are computed
// position by position; otherwise the encoding is kept with the reason
// it could not be evaluated (NotEvaluated), for the audit's unknown.
func TestProbeOverTheLimit(t *testing.T) {
	t.Run("prefix", func(t *testing.T) {
		es, trace := encodings(t, staticLong("prefix", false))
		if len(es) != 1 {
			t.Fatalf("%d encodings, want 1 (trace %v)", len(es), trace)
		}
		e := es[0]
		if e.NotEvaluated != "" || len(e.Rows) != 16 || !e.Varies {
			t.Errorf("NotEvaluated %q, %d rows, varies %v: want the first 16 rows, varying", e.NotEvaluated, len(e.Rows), e.Varies)
		}
	})
	t.Run("centred_over_positions", func(t *testing.T) {
		es, trace := encodings(t, staticLong("centred", true))
		if len(es) != 1 {
			t.Fatalf("%d encodings, want 1 (trace %v)", len(es), trace)
		}
		e := es[0]
		if e.NotEvaluated == "" || e.Rows != nil || len(e.Layers) != 1 {
			t.Fatalf("NotEvaluated %q, %d rows, layers %v: want a reason, no rows, layer 0", e.NotEvaluated, len(e.Rows), e.Layers)
		}
		if !strings.Contains(e.NotEvaluated, "not computed position by position") {
			t.Errorf("NotEvaluated %q does not say why the prefix does not hold", e.NotEvaluated)
		}
	})
}
