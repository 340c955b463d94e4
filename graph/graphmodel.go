package graph

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// GraphModel makes a model of its own from g, a graph held by an attribute
// of one of m's nodes (the decoder of a generation op such as BeamSearch,
// an If branch): a copy of g as the main graph, with m's IR version,
// opset imports, model-local functions and folder (for external data).
// The copy shares nothing with m. A graph that reads values of the graphs
// around it cannot stand alone: that is an error.
func (m *Model) GraphModel(g *Graph) (*Model, error) {
	if g == nil || g.model != m {
		return nil, fmt.Errorf("graph: GraphModel of a graph of another model")
	}
	s := &saver{tw: func(t *Tensor) (*onnxpb.TensorProto, error) { return t.pb, nil }}
	pg, err := s.graph(g)
	if err != nil {
		return nil, err
	}
	var pfs []*onnxpb.FunctionProto
	for _, f := range m.Functions {
		pf, err := s.function(f)
		if err != nil {
			return nil, err
		}
		pfs = append(pfs, pf)
	}
	pm := &onnxpb.ModelProto{IrVersion: m.shell.IrVersion, OpsetImport: m.shell.OpsetImport, Graph: pg, Functions: pfs}
	data, err := proto.MarshalOptions{}.Marshal(pm)
	if err != nil {
		return nil, fmt.Errorf("graph: GraphModel of %q: %w", g.Name, err)
	}
	out, err := Decode(data, m.Dir)
	if err != nil {
		return nil, fmt.Errorf("graph: graph %q does not stand alone: %w", g.Name, err)
	}
	return out, nil
}
