package audit_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/testmodels"
)

// fuzzAuditTime bounds the audit of one fuzzed model (the corpus models
// take well under a second).
const fuzzAuditTime = 60 * time.Second

// fuzzAuditBudget bounds the memory of the audit's probes (the process
// budget of the executor: a mutated model asking for more gets an error
// of the node, not Go's out of memory). It also bounds their time: with
// 256 MiB a mutated tiny Llama whose dimensions grew took 8 s and 1.7 GB
// (probes near the budget in the score test and the rotation
// measurement), close to the 10 s after which Go's fuzzing engine calls
// an input a hang; the seeds' probes take kilobytes.
const fuzzAuditBudget = 64 << 20

// FuzzAudit feeds the audit path (load, then the whole audit: the copy of
// the model, normalisation, every detector and its numeric probes, the
// report) models made by mutating small ones of every kind the corpus
// has: tiny Go-built Llamas (computed RoPE and a cos/sin table) and two
// exported models. The fuzzer's mutations reach weights, frequencies and
// tables (raw_data: NaN, huge values), attributes, shapes and op types.
// Whatever the bytes, loading returns a model or an error, and the audit a
// report or an error that is not an internal one (a panic of a kernel or a
// detector); it ends within fuzzAuditTime and within the memory budget;
// a report it gives encodes as JSON.
//
// make test runs it for a fixed time (make fuzz); go test runs its seeds.
func FuzzAudit(f *testing.F) {
	for _, form := range []testmodels.RopeForm{testmodels.RopeComputed, testmodels.RopeCacheTable} {
		m := testmodels.Llama(testmodels.LlamaConfig{Layers: 1, Hidden: 16, Heads: 2, KVHeads: 1, FFN: 16, Vocab: 16,
			RopeBase: 10000, Opset: 17, Seed: 1, RoPE: form, MaxPositions: 16})
		b, err := m.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, name := range []string{"sinusoidal_interleaved_computed", "t5_encoder"} {
		b, err := os.ReadFile(filepath.Join(testmodels.Dir(), "models", name, "model.onnx"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	budget := kernels.ProcessBudget()
	old := budget.Limit()
	budget.SetLimit(fuzzAuditBudget)
	f.Cleanup(func() { budget.SetLimit(old) })
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := graph.Decode(data, "")
		if err != nil {
			return
		}
		type result struct {
			rep *passes.Report
			err error
		}
		done := make(chan result, 1)
		go func() {
			var r result
			defer func() {
				if p := recover(); p != nil {
					r.err = kernels.Recovered(p)
				}
				done <- r
			}()
			r.rep, _, r.err = audit.AuditModel(m, "fuzz", passes.Options{})
		}()
		select {
		case r := <-done:
			if errors.Is(r.err, kernels.ErrInternal) {
				t.Fatalf("the audit failed inside: %v", r.err)
			}
			if r.err == nil {
				if _, err := json.Marshal(r.rep); err != nil {
					t.Fatalf("the report does not encode: %v", err)
				}
			}
		case <-time.After(fuzzAuditTime):
			t.Fatalf("the audit still runs after %v", fuzzAuditTime)
		}
		if used := budget.Used(); used != 0 {
			t.Fatalf("%d bytes of the memory budget left reserved after the audit", used)
		}
	})
}
