// Package graph is onnxpe's in-memory form of an ONNX model: a Model with
// its main Graph and model-local Functions; Nodes that own their output
// Values; Values that know their producer and every reader (also readers
// inside If/Loop/Scan subgraphs); Tensors that decode to Go slices of every
// ONNX element type.
//
// It is the only package that touches the protobuf bindings
// (internal/onnxpb): Load and Decode turn a file into the IR, Save and
// Marshal turn it back. Fields the IR does not model are kept as loaded,
// so an unchanged model saves byte for byte. Tensors stored as external
// data are located and checked when the model loads (a location must stay
// inside the model's folder, also through symlinks) but read only when
// asked for. Saves go through a temporary file renamed into place.
//
// Load accepts the rule breaks ONNX Runtime accepts (nodes out of
// topological order, a domain missing from the opset imports, no
// producer) and lists them in Model.Repairs for tools to print; what is
// ambiguous (a name defined twice, a cycle, nodes without any opset
// import) is an error wrapping ErrInvalid.
//
// Edits keep use-def right: SetInput, ReplaceAllUsesWith, InsertBefore,
// InsertAfter, Remove; All iterates while the graph changes; TopoSort and
// EliminateDeadCode are explicit steps; Model.NewName is the one source of
// fresh names.
//
// It does not run models (kernels does) nor interpret operators, beyond
// reading Constant nodes (ConstantValue).
package graph
