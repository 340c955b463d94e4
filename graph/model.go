package graph

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// ErrNotONNX is wrapped by errors about input that is not an ONNX model.
var ErrNotONNX = errors.New("not an ONNX model")

// ErrInvalid is wrapped by errors about models that decode but break the
// format's rules (dangling edges, duplicate names, cycles, bad tensors).
var ErrInvalid = errors.New("invalid model")

// Model is an ONNX model: its main graph, its model-local functions and
// its metadata. Fields the package does not model are kept as loaded so
// that saving an unchanged model writes the same bytes.
type Model struct {
	Graph     *Graph
	Functions []*Function
	// Dir is the folder external data locations are relative to ("" for a
	// model read from memory).
	Dir string

	shell   *onnxpb.ModelProto // everything except graph and functions
	names   nameSet
	repairs []Repair // rules the loaded file breaks that Load tolerated
	cloned  int      // values Clone numbered in this copy (Value.Num)
	clonedN int      // nodes Clone numbered in this copy (Node.Num)
}

// NumCloned is the largest Value.Num among m's values: the number of
// values Clone copied into m (0 for a model Clone did not make).
func (m *Model) NumCloned() int { return m.cloned }

// NumClonedNodes is the largest Node.Num among m's nodes.
func (m *Model) NumClonedNodes() int { return m.clonedN }

// Opset is one imported operator set.
type Opset struct {
	Domain  string `json:"domain"`
	Version int64  `json:"version"`
}

// IRVersion is the model's IR version.
func (m *Model) IRVersion() int64 { return m.shell.GetIrVersion() }

// SetIRVersion sets the model's IR version (a rewrite that imports a newer
// operator set needs the IR version that knows it).
func (m *Model) SetIRVersion(v int64) { m.shell.IrVersion = &v }

// ProducerName is the name of the tool that wrote the model.
func (m *Model) ProducerName() string { return m.shell.GetProducerName() }

// ProducerVersion is the version of the tool that wrote the model.
func (m *Model) ProducerVersion() string { return m.shell.GetProducerVersion() }

// Domain is the model's domain.
func (m *Model) Domain() string { return m.shell.GetDomain() }

// ModelVersion is the model's own version number.
func (m *Model) ModelVersion() int64 { return m.shell.GetModelVersion() }

// Doc is the model's doc_string.
func (m *Model) Doc() string { return m.shell.GetDocString() }

// Metadata returns metadata_props as ordered key/value pairs.
func (m *Model) Metadata() [][2]string {
	var kv [][2]string
	for _, e := range m.shell.MetadataProps {
		kv = append(kv, [2]string{e.GetKey(), e.GetValue()})
	}
	return kv
}

// HasTrainingInfo reports whether the model carries training graphs
// (kept, not interpreted).
func (m *Model) HasTrainingInfo() bool { return len(m.shell.TrainingInfo) > 0 }

// Opsets lists the imported operator sets in file order.
func (m *Model) Opsets() []Opset {
	var out []Opset
	for _, o := range m.shell.OpsetImport {
		out = append(out, Opset{o.GetDomain(), o.GetVersion()})
	}
	return out
}

// OpsetVersion is the imported version of a domain ("" and "ai.onnx" are the
// same), or 0 when the domain is not imported.
func (m *Model) OpsetVersion(domain string) int64 {
	for _, o := range m.shell.OpsetImport {
		if sameDomain(o.GetDomain(), domain) {
			return o.GetVersion()
		}
	}
	return 0
}

// SetOpsetVersion imports a domain at a version, or changes its version.
func (m *Model) SetOpsetVersion(domain string, version int64) {
	for _, o := range m.shell.OpsetImport {
		if sameDomain(o.GetDomain(), domain) {
			o.Version = proto.Int64(version)
			return
		}
	}
	m.shell.OpsetImport = append(m.shell.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: proto.String(domain), Version: proto.Int64(version)})
}

func sameDomain(a, b string) bool {
	norm := func(s string) string {
		if s == "ai.onnx" {
			return ""
		}
		return s
	}
	return norm(a) == norm(b)
}

// Function returns the model-local function with the given domain and
// name (and overload), or nil.
func (m *Model) Function(domain, name, overload string) *Function {
	for _, f := range m.Functions {
		if f.Domain == domain && f.Name == name && f.Overload == overload {
			return f
		}
	}
	return nil
}

// NewName returns a name not yet used for any value or node of the model,
// made from base. All names handed out by rewrites come from here.
func (m *Model) NewName(base string) string { return m.freshName(base) }

// freshName hands out a unique name. The set of names in use is collected
// on the first call (loading does not pay for it).
func (m *Model) freshName(base string) string {
	if m.names.used == nil {
		m.names.used = map[string]bool{}
		add := func(g *Graph) {
			m.names.add(g.Name)
			for name := range g.scope {
				m.names.add(name)
			}
			for _, v := range g.ValueInfo {
				m.names.add(v.Name)
			}
		}
		var visit func(g *Graph)
		visit = func(g *Graph) {
			add(g)
			for _, n := range g.nodes {
				m.names.add(n.Name)
				for _, sg := range n.Subgraphs() {
					visit(sg)
				}
			}
		}
		if m.Graph != nil {
			visit(m.Graph)
		}
		for _, f := range m.Functions {
			visit(f.Body)
		}
	}
	return m.names.fresh(base)
}

// Walk calls f for every node of the model: the main graph, its subgraphs,
// and the bodies of model-local functions.
func (m *Model) Walk(f func(*Node)) {
	m.Graph.Walk(f)
	for _, fn := range m.Functions {
		fn.Body.Walk(f)
	}
}

// nameSet hands out unique names.
type nameSet struct {
	used map[string]bool
	next map[string]int
	// of is the set of the model this one's model was cloned from, read
	// only: its names count as used, without copying them (a copy of 100k
	// names costs more than the clone of the graph).
	of *nameSet
}

func (s *nameSet) add(name string) {
	if s.used == nil {
		s.used = map[string]bool{}
	}
	s.used[name] = true
}

func (s *nameSet) isUsed(name string) bool {
	for ; s != nil; s = s.of {
		if s.used[name] {
			return true
		}
	}
	return false
}

// counter is the last suffix handed out for base here or in the sets this
// one was cloned from.
func (s *nameSet) counter(base string) int {
	for ; s != nil; s = s.of {
		if k, ok := s.next[base]; ok {
			return k
		}
	}
	return 0
}

func (s *nameSet) fresh(base string) string {
	if base == "" {
		base = "v"
	}
	if s.used == nil {
		s.used = map[string]bool{}
	}
	if s.next == nil {
		s.next = map[string]int{}
	}
	if !s.isUsed(base) {
		s.used[base] = true
		return base
	}
	k := s.counter(base)
	for {
		k++
		c := base + "_" + strconv.Itoa(k)
		if !s.isUsed(c) {
			s.next[base] = k
			s.used[c] = true
			return c
		}
	}
}

// Load reads a model from a file, a regular file of at most MaxModelBytes.
// External tensors are resolved against the file's folder and checked, but
// their bytes are not read.
func Load(path string) (*Model, error) { return LoadWith(path, LoadOptions{}) }

// LoadOptions change what Load accepts.
type LoadOptions struct {
	// AllowMissingExternal loads a model whose external data files are
	// absent (a model published without its weights): reading such a
	// tensor returns an error wrapping ErrExternalMissing. Locations that
	// leave the model's folder are still refused.
	AllowMissingExternal bool
}

// LoadWith is Load with options.
func LoadWith(path string, opts LoadOptions) (*Model, error) {
	data, err := ReadRegularFile(path, MaxModelBytes)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return DecodeWith(data, filepath.Dir(abs), opts)
}

// Decode reads a model from its bytes; dir is the folder external data
// is relative to ("" when there is none).
func Decode(data []byte, dir string) (*Model, error) { return DecodeWith(data, dir, LoadOptions{}) }

// DecodeWith is Decode with options.
func DecodeWith(data []byte, dir string, opts LoadOptions) (*Model, error) {
	pm := &onnxpb.ModelProto{}
	if err := (proto.UnmarshalOptions{}).Unmarshal(data, pm); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotONNX, err)
	}
	if pm.Graph == nil {
		return nil, fmt.Errorf("%w: no graph", ErrNotONNX)
	}
	if pm.GetIrVersion() <= 0 {
		return nil, fmt.Errorf("%w: ir_version %d", ErrNotONNX, pm.GetIrVersion())
	}
	return fromProto(pm, dir, opts)
}

// Save writes the model to path through a temporary file in the same
// folder that is renamed into place, so that a failure leaves no partial
// file. External tensors are handled as opts say.
func (m *Model) Save(path string, opts SaveOptions) error {
	return m.save(path, opts)
}

// Marshal encodes the model. External tensors stay external (their side
// files are not written).
func (m *Model) Marshal() ([]byte, error) { return m.encode(nil) }
