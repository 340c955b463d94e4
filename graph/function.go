package graph

import (
	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// Function is a model-local function: nodes calling (Domain, Name,
// Overload) run Body with the call's inputs bound to Body.Inputs.
type Function struct {
	Domain   string
	Name     string
	Overload string
	// AttrNames are the attributes a call may set.
	AttrNames []string
	// AttrDefaults are attributes with default values (attribute_proto).
	AttrDefaults []*Attr
	Body         *Graph

	shell *onnxpb.FunctionProto
}

// Doc is the function's doc_string.
func (f *Function) Doc() string { return f.shell.GetDocString() }

// Opsets lists the operator sets the body imports.
func (f *Function) Opsets() []Opset {
	var out []Opset
	for _, o := range f.shell.OpsetImport {
		out = append(out, Opset{o.GetDomain(), o.GetVersion()})
	}
	return out
}

// SetOpsetVersion makes the body import a domain at a version.
func (f *Function) SetOpsetVersion(domain string, version int64) {
	for _, o := range f.shell.OpsetImport {
		if sameDomain(o.GetDomain(), domain) {
			o.Version = proto.Int64(version)
			return
		}
	}
	f.shell.OpsetImport = append(f.shell.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: proto.String(domain), Version: proto.Int64(version)})
}
