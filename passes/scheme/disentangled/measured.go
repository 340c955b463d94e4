package disentangled

import (
	"fmt"

	"github.com/onnxpe/onnxpe/passes"
)

// measure is a disentangled finding's own evidence: the relative
// positions its position terms gather the table at, evaluated over
// query − key.
func measure(f *passes.Finding) *passes.Measured {
	ev, _ := f.Evidence.(*Evidence)
	if ev == nil || len(ev.Buckets) == 0 {
		return nil
	}
	return &passes.Measured{Test: passes.TestScoreBias,
		Summary: fmt.Sprintf("position terms of the scores gather a relative table (%d rows) at the relative position of query − key, over the distances −%d to %d", 2*ev.Span, ev.MaxDist, ev.MaxDist)}
}
