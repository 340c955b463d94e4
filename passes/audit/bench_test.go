package audit_test

import (
	"runtime"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/schemes"
	"github.com/onnxpe/onnxpe/testmodels"
)

// benchAuditModels are the graphs of the audit's speed goals: a 32-layer
// Llama-shaped graph, and graphs of about 100,000 nodes (a Llama of 1,500
// small layers, and a chain of elementwise ops). Each is built in its own
// benchmark, so that only it is alive while it is audited (as in a run of
// onnxpe audit): the collector's work grows with what is alive.
func benchAuditModels() []struct {
	name  string
	build func() *graph.Model
} {
	l32 := testmodels.DefaultLlama
	l32.Layers = 32
	big := testmodels.LlamaConfig{Layers: 1500, Hidden: 16, Heads: 2, KVHeads: 1, FFN: 32, Vocab: 32, RopeBase: 10000, Opset: 17, Seed: 1}
	return []struct {
		name  string
		build func() *graph.Model
	}{
		{"Llama32", func() *graph.Model { return testmodels.Llama(l32) }},
		{"Llama1500", func() *graph.Model { return testmodels.Llama(big) }},
		{"Chain100k", func() *graph.Model { return testmodels.Chain(100_000) }},
	}
}

// BenchmarkAudit measures the whole audit (copy, normalisation, blocks,
// every detector); ns/node should stay flat as graphs grow.
func BenchmarkAudit(b *testing.B) {
	for _, c := range benchAuditModels() {
		b.Run(c.name, func(b *testing.B) {
			m := c.build()
			nodes := 0
			m.Walk(func(*graph.Node) { nodes++ })
			runtime.GC() // the garbage of other benchmarks and of the build
			b.ReportAllocs()
			var r *passes.Report
			cpu0 := cpuTime()
			for b.Loop() {
				var err error
				r, _, err = audit.AuditModel(m, c.name, passes.Options{})
				if err != nil {
					b.Fatal(err)
				}
			}
			if c.name != "Chain100k" && (len(r.Schemes) != 1 || r.Schemes[0] != "rope") {
				b.Fatalf("%s: schemes %v", c.name, r.Schemes)
			}
			// CPU time (user and system, GC included): on a shared machine
			// the wall time says more about the neighbours.
			b.ReportMetric(float64(cpuTime()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(nodes), "nodes")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(nodes), "ns/node")
		})
	}
}

// BenchmarkRewrite measures onnxpe rewrite's passes on a 32-layer
// Llama-shaped graph (the audit included: the rewrite consumes its
// findings): RoPE fused in every layer, caches of 4096 positions evaluated
// from the model's own subgraph.
func BenchmarkRewrite(b *testing.B) {
	l32 := testmodels.DefaultLlama
	l32.Layers = 32
	m := testmodels.Llama(l32)
	nodes := 0
	m.Walk(func(*graph.Node) { nodes++ })
	b.Run("Llama32", func(b *testing.B) {
		b.ReportAllocs()
		var r *rewrite.Rewrite
		cpu0 := cpuTime()
		for b.Loop() {
			var err error
			r, _, err = audit.RewriteModel(m, passes.Options{}, schemes.Rewriters()...)
			if err != nil {
				b.Fatal(err)
			}
		}
		fused := 0
		r.M.Walk(func(n *graph.Node) {
			if n.OpType == "RotaryEmbedding" {
				fused++
			}
		})
		if fused != 64 {
			b.Fatalf("%d RotaryEmbedding nodes, want 64", fused)
		}
		b.ReportMetric(float64(cpuTime()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
		b.ReportMetric(float64(nodes), "nodes")
	})
}
