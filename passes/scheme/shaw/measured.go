package shaw

import (
	"fmt"

	"github.com/onnxpe/onnxpe/passes"
)

// measure is a relative-embedding finding's own evidence: the index of
// the table its score term gathers, evaluated over key − query.
func measure(f *passes.Finding) *passes.Measured {
	ev, _ := f.Evidence.(*Evidence)
	if ev == nil || len(ev.IndexMap) == 0 {
		return nil
	}
	rows := map[int]bool{}
	for _, r := range ev.IndexMap {
		rows[r] = true
	}
	if ev.Stored != "" {
		return &passes.Measured{Test: passes.TestScoreBias,
			Summary: fmt.Sprintf("a score term of q with relative embeddings stored whole (%s), q cut to one vector: a function of key − query over −%d to %d, every distance beyond ±%d scored as ±%d", ev.Stored, ev.MaxRel, ev.MaxRel, ev.Radius, ev.Radius)}
	}
	return &passes.Measured{Test: passes.TestScoreBias,
		Summary: fmt.Sprintf("a score term of q with rows of a table gathered at an index of key − query: %d rows over the distances −%d to %d", len(rows), ev.MaxRel, ev.MaxRel)}
}
