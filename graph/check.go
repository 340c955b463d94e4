package graph

import (
	"fmt"
	"strings"
)

// Checks of a loaded model that ONNX Runtime makes when it loads one
// (onnx::OpSchema::Verify and its opset registry), so that onnxpe does not
// accept, rewrite and write on what ONNX Runtime refuses.

// NewestOpsets are the newest versions of the operator sets onnxpe knows
// (ONNX's own domains, as its operator changelogs give them, and ONNX
// Runtime's com.microsoft; onnxpe's ai.onnxpe): a model importing a later version is refused,
// since what its operators mean is not known. Other domains (a vendor's,
// model-local functions) have no such bound.
var NewestOpsets = map[string]int64{
	"":                         28,
	"ai.onnx.ml":               5,
	"ai.onnx.preview":          1,
	"ai.onnx.preview.training": 1,
	"ai.onnx.training":         1,
	"com.microsoft":            1,
	"ai.onnxpe":                1, // onnxpe's own fused ops (ALiBiBias)
}

// opName is an op of a domain ("" for the default one).
type opName struct{ domain, op string }

// opSchema is the attribute types of one version of an op.
type opSchema struct {
	since int64
	attrs map[string]AttrType
}

// schemaAttrs returns the attribute types of op at opset version, or nil
// when onnxpe has no schema for it.
func schemaAttrs(domain, op string, version int64) map[string]AttrType {
	vs := opSchemas[opName{normDomainName(domain), op}]
	var best map[string]AttrType
	for _, s := range vs {
		if s.since <= version {
			best = s.attrs
		}
	}
	return best
}

// checkOpsets refuses opset imports newer than onnxpe knows.
func checkOpsets(where string, imports []Opset) error {
	for _, o := range imports {
		d := normDomainName(o.Domain)
		if newest, ok := NewestOpsets[d]; ok && o.Version > newest {
			name := d
			if d == "" {
				name = "ai.onnx"
			}
			return fmt.Errorf("%w: %simports operator set %s version %d, newer than any onnxpe knows (the newest is %d; ONNX Runtime refuses it too)", ErrInvalid, where, name, o.Version, newest)
		}
	}
	return nil
}

// checkModel makes the load-time checks: opset versions, and each node's
// attributes (a value of the type the attribute declares, of the type the
// op's schema declares).
func (m *Model) checkModel() error {
	if err := checkOpsets("the model ", m.Opsets()); err != nil {
		return err
	}
	for _, f := range m.Functions {
		if err := checkOpsets(fmt.Sprintf("function %s.%s ", f.Domain, f.Name), f.Opsets()); err != nil {
			return err
		}
	}
	version := func(imports []Opset, d string) int64 {
		for _, o := range imports {
			if sameDomain(o.Domain, d) {
				return o.Version
			}
		}
		if v := m.OpsetVersion(d); v != 0 {
			return v
		}
		return AssumedOpset(d)
	}
	var err error
	check := func(imports []Opset) func(*Node) {
		return func(n *Node) {
			if err == nil && m.Function(n.Domain, n.OpType, n.Overload) == nil {
				err = checkNodeAttrs(n, version(imports, n.Domain))
			}
		}
	}
	m.Graph.Walk(check(nil))
	for _, f := range m.Functions {
		f.Body.Walk(check(f.Opsets()))
	}
	return err
}

// checkNodeAttrs checks the attributes of n, a node of an op at opset
// version.
func checkNodeAttrs(n *Node, version int64) error {
	schema := schemaAttrs(n.Domain, n.OpType, version)
	for _, a := range n.Attrs {
		held := a.heldKinds()
		declared := AttrType(a.pb.GetType())
		switch {
		case len(held) > 1:
			return fmt.Errorf("%w: %s: attribute %s holds values of %d types (%s); an attribute holds one", ErrInvalid, nodeDesc(n), ShortName(a.Name()), len(held), kindList(held))
		case a.pb.Type != nil && len(held) == 1 && held[0] != declared:
			return fmt.Errorf("%w: %s: attribute %s is declared %s but holds %s (ONNX Runtime refuses it: type field and data field mismatch)", ErrInvalid, nodeDesc(n), ShortName(a.Name()), article(declared), article(held[0]))
		}
		want, ok := schema[a.Name()]
		if !ok {
			continue
		}
		if got := a.Type(); got != want {
			found := article(got)
			if got == AttrUndefined {
				found = "no type"
			}
			return fmt.Errorf("%w: %s: attribute %s has type %s, but %s-%d declares it %s (ONNX Runtime refuses it: mismatched attribute type)", ErrInvalid, nodeDesc(n), ShortName(a.Name()), found, n.OpType, version, article(want))
		}
	}
	return nil
}

// heldKinds lists the kinds of value a's fields hold (one for a well-formed
// attribute; none for an empty list or a reference to a caller's
// attribute).
func (a *Attr) heldKinds() []AttrType {
	var ks []AttrType
	pb := a.pb
	add := func(ok bool, k AttrType) {
		if ok {
			ks = append(ks, k)
		}
	}
	add(pb.F != nil, AttrFloat)
	add(pb.I != nil, AttrInt)
	add(pb.S != nil, AttrString)
	add(a.Tensor != nil || pb.T != nil, AttrTensor)
	add(a.Graph != nil || pb.G != nil, AttrGraph)
	add(len(pb.Floats) > 0, AttrFloats)
	add(len(pb.Ints) > 0, AttrInts)
	add(len(pb.Strings) > 0, AttrStrings)
	add(len(a.Tensors) > 0 || len(pb.Tensors) > 0, AttrTensors)
	add(len(a.Graphs) > 0 || len(pb.Graphs) > 0, AttrGraphs)
	add(pb.SparseTensor != nil, AttrSparseTensor)
	add(len(pb.SparseTensors) > 0, AttrSparseTensors)
	add(pb.Tp != nil, AttrTypeProto)
	add(len(pb.TypeProtos) > 0, AttrTypeProtos)
	return ks
}

func kindList(ks []AttrType) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = k.String()
	}
	return strings.Join(s, ", ")
}

// article is "an int", "a list of ints", ... for messages.
func article(k AttrType) string {
	switch k {
	case AttrInt:
		return "an int"
	case AttrFloats, AttrInts, AttrStrings, AttrTensors, AttrGraphs, AttrSparseTensors, AttrTypeProtos:
		return "a list of " + strings.TrimSuffix(k.String(), "s") + "s"
	}
	return "a " + k.String()
}
