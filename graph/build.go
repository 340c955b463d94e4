package graph

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// NewModel makes an empty model with the given IR version and operator set
// imports; its graph has no nodes yet.
func NewModel(irVersion int64, producer string, opsets ...Opset) *Model {
	m := &Model{shell: &onnxpb.ModelProto{IrVersion: proto.Int64(irVersion)}}
	if producer != "" {
		m.shell.ProducerName = proto.String(producer)
	}
	for _, o := range opsets {
		m.shell.OpsetImport = append(m.shell.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: proto.String(o.Domain), Version: proto.Int64(o.Version)})
	}
	m.Graph = &Graph{Name: "main", model: m, scope: map[string]*Value{}, shell: &onnxpb.GraphProto{}}
	return m
}

// AddInput adds a graph input under a unique name derived from name.
func (g *Graph) AddInput(name string, t *Type) *Value {
	v := g.newValue(name)
	v.Type = t
	g.Inputs = append(g.Inputs, v)
	return v
}

// AddOutput makes v an output of g.
func (g *Graph) AddOutput(v *Value) { g.Outputs = append(g.Outputs, v) }

// NewSubgraph makes an empty graph nested in g, for an attribute of a node
// of g (If branches, Loop bodies).
func (g *Graph) NewSubgraph(name string) *Graph {
	sg := &Graph{Name: g.model.freshName(name), parent: g, model: g.model, scope: map[string]*Value{}, shell: &onnxpb.GraphProto{}}
	return sg
}

// Op makes a node and appends it to g, returning its outputs: the short
// form used by builders and rewrites.
func (g *Graph) Op(opType string, inputs []*Value, numOutputs int, attrs ...*Attr) []*Value {
	n := g.NewNode(opType, "", inputs, numOutputs, attrs...)
	g.Append(n)
	return n.outputs
}

// AddFunction adds a model-local function whose body is a graph built with
// the returned Function's Body (add inputs, nodes and outputs to it).
func (m *Model) AddFunction(domain, name string, attrNames ...string) *Function {
	body := &Graph{Name: name, model: m, scope: map[string]*Value{}, shell: &onnxpb.GraphProto{}}
	f := &Function{Domain: domain, Name: name, AttrNames: attrNames, Body: body, shell: &onnxpb.FunctionProto{}}
	m.Functions = append(m.Functions, f)
	return f
}

// RenameValue gives v, a value of g, a new name, which no value of g (or
// of a graph enclosing it) may have.
func (g *Graph) RenameValue(v *Value, name string) error {
	if v.graph != g {
		return fmt.Errorf("graph: value %q is not in graph %q", v.Name, g.Name)
	}
	if name == "" || g.Lookup(name) != nil {
		return fmt.Errorf("graph: cannot rename %q to %q: the name is empty or taken", v.Name, name)
	}
	g.rename(v, name)
	return nil
}
