package t5

import (
	"fmt"

	"github.com/onnxpe/onnxpe/passes"
)

// measure is a T5 finding's own evidence: the bias of the scores read as
// a table gathered at the bucket of key − query.
func measure(f *passes.Finding) *passes.Measured {
	ev, _ := f.Evidence.(*Evidence)
	if ev == nil || len(ev.BucketMap) == 0 {
		return nil
	}
	buckets := map[int]bool{}
	for _, b := range ev.BucketMap {
		buckets[b] = true
	}
	return &passes.Measured{Test: passes.TestScoreBias,
		Summary: fmt.Sprintf("the bias %s of the scores gathers the table %s at the bucket of key − query: %d buckets over the distances −%d to %d, as Hugging Face's bucket function maps them", ev.Bias, ev.Table, len(buckets), ev.MaxRel, ev.MaxRel)}
}
