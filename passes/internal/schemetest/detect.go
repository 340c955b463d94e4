package schemetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
)

// Detect runs the detector d alone on m (with the passes it requires, the
// trace on) and returns its findings and the near-misses the trace
// recorded (rule, place, reason).
func Detect(t testing.TB, m *graph.Model, d *passes.Pass[[]*passes.Finding]) ([]*passes.Finding, []passes.Miss) {
	t.Helper()
	ctx, err := passes.Run(m, passes.Options{Trace: true}, d)
	if err != nil {
		t.Fatalf("%s: %v", d.Name, err)
	}
	return passes.Result(ctx, d), ctx.Trace()
}

// Only returns the only finding of fs, failing t unless there is exactly
// one (the trace is printed to say why when there is none).
func Only(t testing.TB, fs []*passes.Finding, trace []passes.Miss) *passes.Finding {
	t.Helper()
	if len(fs) != 1 {
		t.Fatalf("%d findings, want 1: %s\ntrace:\n%s", len(fs), Describe(fs), TraceString(trace))
	}
	return fs[0]
}

// WantMiss checks a near-miss: no finding, and a near-miss of rule in the
// trace whose reason holds reason.
func WantMiss(t testing.TB, fs []*passes.Finding, trace []passes.Miss, rule, reason string) {
	t.Helper()
	if len(fs) != 0 {
		t.Errorf("%d findings of a near-miss, want none: %s", len(fs), Describe(fs))
	}
	for _, m := range trace {
		if m.Rule == rule && strings.Contains(m.Reason, reason) {
			t.Logf("near-miss of %s at %s: %s", m.Rule, m.At, m.Reason)
			return
		}
	}
	t.Errorf("no near-miss of %s saying %q in the trace:\n%s", rule, reason, TraceString(trace))
}

// Describe prints findings as their schemes, layers and params.
func Describe(fs []*passes.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("\n  ")
		b.WriteString(f.Scheme)
		b.WriteString(" ")
		b.WriteString(fmt.Sprint(f.Layers))
		if f.Params != nil {
			b.WriteString(" ")
			b.WriteString(passes.ParamsKey(f.Params))
		}
	}
	return b.String()
}

// TraceString prints near-misses one a line.
func TraceString(trace []passes.Miss) string {
	var b strings.Builder
	for _, m := range trace {
		b.WriteString("  " + m.Rule + " at " + m.At + ": " + m.Reason + "\n")
	}
	return b.String()
}
