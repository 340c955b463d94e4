package graph_test

import (
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/onnxpb"
	"github.com/onnxpe/onnxpe/testmodels"
)

func benchModels(b *testing.B) map[string]*graph.Model {
	llama := testmodels.DefaultLlama
	llama.Layers = 32
	llama.NoWeights = true
	return map[string]*graph.Model{
		"Llama32":   testmodels.Llama(llama),
		"Chain10k":  testmodels.Chain(10_000),
		"Chain100k": testmodels.Chain(100_000),
	}
}

// BenchmarkLoad measures decoding and building the IR; time per node
// should be flat from 10k to 100k nodes.
func BenchmarkLoad(b *testing.B) {
	for name, m := range benchModels(b) {
		data, err := m.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		nodes := m.Graph.Len()
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := graph.Decode(data, ""); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(nodes), "ns/node")
		})
	}
}

// BenchmarkUnmarshal is the protobuf decoding alone, the floor under
// BenchmarkLoad.
func BenchmarkUnmarshal(b *testing.B) {
	for name, m := range benchModels(b) {
		data, err := m.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		nodes := m.Graph.Len()
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := proto.Unmarshal(data, &onnxpb.ModelProto{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(nodes), "ns/node")
		})
	}
}

// BenchmarkSave measures encoding and writing a model file.
func BenchmarkSave(b *testing.B) {
	dir := b.TempDir()
	for name, m := range benchModels(b) {
		nodes := m.Graph.Len()
		path := filepath.Join(dir, name+".onnx")
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := m.Save(path, graph.SaveOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(nodes), "ns/node")
		})
	}
}
