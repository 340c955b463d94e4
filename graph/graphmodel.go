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
// The copy shares nothing with m. The initializers of the graphs around g
// that g reads become initializers of the copy: ONNX Runtime's
// convert_generation.py moves a decoder's initializers, or those its
// encoder and decoder share, to the main graph, and runs the decoder with
// them. A graph that reads a value the graphs around it compute cannot
// stand alone: that is an error.
func (m *Model) GraphModel(g *Graph) (*Model, error) {
	if g == nil || g.model != m {
		return nil, fmt.Errorf("graph: GraphModel of a graph of another model")
	}
	var outer []*Value
	for _, v := range g.outerReads() {
		if v.Const == nil {
			return nil, fmt.Errorf("graph: graph %q does not stand alone: it reads %q, which the graph around it computes", g.Name, v.Name)
		}
		outer = append(outer, v)
	}
	s := &saver{tw: func(t *Tensor) (*onnxpb.TensorProto, error) { return t.pb, nil }}
	pg, err := s.graph(g)
	if err != nil {
		return nil, err
	}
	// g's shell is the one the next save fills again: the outer
	// initializers are added for the copy only.
	own := len(pg.Initializer)
	defer func() { pg.Initializer = pg.Initializer[:own] }()
	for _, v := range outer {
		v.Const.pb.Name = keepStr(v.Const.pb.Name, v.Name)
		pg.Initializer = append(pg.Initializer, v.Const.pb)
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
