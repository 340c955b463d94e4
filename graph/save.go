package graph

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// ExternalMode says how Save stores tensor elements.
type ExternalMode int

const (
	// KeepStorage keeps every tensor where it is: inline tensors inline,
	// external ones external under their locations (side files are copied
	// when the model is saved to another folder).
	KeepStorage ExternalMode = iota
	// InlineAll moves every external tensor into the model file.
	InlineAll
	// ExternalizeLarge stores every tensor of at least Threshold bytes in
	// one side file, Location, beside the model; smaller ones inline.
	ExternalizeLarge
)

// DefaultExternalThreshold is the size from which ExternalizeLarge moves a
// tensor out of the model file.
const DefaultExternalThreshold = 1024

// externalAlign is the alignment of tensors in a side file we write, so
// that runtimes can map them.
const externalAlign = 4096

// SaveOptions control Save.
type SaveOptions struct {
	External  ExternalMode
	Threshold int64  // ExternalizeLarge: bytes; 0 means DefaultExternalThreshold
	Location  string // ExternalizeLarge: side file name; "" means <model file>.data
}

func (m *Model) save(path string, opts SaveOptions) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	dir := filepath.Dir(abs)
	var data []byte
	switch opts.External {
	case KeepStorage:
		if err := m.copySideFiles(dir); err != nil {
			return err
		}
		data, err = m.encode(nil)
	case InlineAll:
		data, err = m.encode(func(t *Tensor) (*onnxpb.TensorProto, error) {
			if t.ext == nil {
				return t.pb, nil
			}
			raw, err := t.RawBytes()
			if err != nil {
				return nil, err
			}
			tp := proto.Clone(t.pb).(*onnxpb.TensorProto)
			tp.ExternalData, tp.DataLocation, tp.RawData = nil, nil, raw
			return tp, nil
		})
		if err == nil && len(data) > 1<<31-1 {
			err = fmt.Errorf("the model is %d bytes inline, over the 2 GiB limit of the format: keep large tensors external", len(data))
		}
	case ExternalizeLarge:
		var side *staged
		data, side, err = m.saveExternalized(dir, filepath.Base(abs), opts)
		if err == nil {
			// Both files are complete before either is renamed into place.
			model, err := stage(abs, func(w io.Writer) error {
				_, err := w.Write(data)
				return err
			})
			if err != nil {
				side.abort()
				return err
			}
			if err := side.commit(); err != nil {
				model.abort()
				return err
			}
			return model.commit()
		}
	default:
		err = fmt.Errorf("graph: unknown external mode %d", opts.External)
	}
	if err != nil {
		return err
	}
	return writeAtomic(abs, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// copySideFiles copies the side files of external tensors into dir when
// the model is saved to a folder other than the one it was loaded from, so
// that the saved locations stay valid.
func (m *Model) copySideFiles(dir string) error {
	if m.Dir == "" {
		return nil
	}
	same, err := sameDir(m.Dir, dir)
	if err != nil || same {
		return err
	}
	done := map[string]bool{}
	var firstErr error
	m.eachTensor(func(t *Tensor) {
		if t.ext == nil || done[t.ext.Location] || firstErr != nil {
			return
		}
		done[t.ext.Location] = true
		dst := filepath.Join(dir, filepath.FromSlash(t.ext.Location))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			firstErr = err
			return
		}
		firstErr = writeAtomic(dst, func(w io.Writer) error {
			f, err := os.Open(t.ext.path)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(w, f)
			return err
		})
	})
	return firstErr
}

func sameDir(a, b string) (bool, error) {
	ra, err := filepath.EvalSymlinks(a)
	if err != nil {
		return false, err
	}
	rb, err := filepath.EvalSymlinks(b)
	if err != nil {
		return false, err
	}
	return ra == rb, nil
}

func (m *Model) saveExternalized(dir, base string, opts SaveOptions) ([]byte, *staged, error) {
	threshold := opts.Threshold
	if threshold <= 0 {
		threshold = DefaultExternalThreshold
	}
	loc := opts.Location
	if loc == "" {
		loc = base + ".data"
	}
	if _, err := resolveLocationName(loc); err != nil {
		return nil, nil, err
	}
	var data []byte
	side, err := stage(filepath.Join(dir, loc), func(w io.Writer) error {
		var off int64
		var err error
		data, err = m.encode(func(t *Tensor) (*onnxpb.TensorProto, error) {
			size := t.ByteSize()
			if size < 0 || size < threshold {
				if t.ext == nil {
					return t.pb, nil
				}
				raw, err := t.RawBytes()
				if err != nil {
					return nil, err
				}
				tp := proto.Clone(t.pb).(*onnxpb.TensorProto)
				tp.ExternalData, tp.DataLocation, tp.RawData = nil, nil, raw
				return tp, nil
			}
			raw, err := t.RawBytes()
			if err != nil {
				return nil, err
			}
			if pad := (externalAlign - off%externalAlign) % externalAlign; pad > 0 {
				if _, err := w.Write(make([]byte, pad)); err != nil {
					return nil, err
				}
				off += pad
			}
			if _, err := w.Write(raw); err != nil {
				return nil, err
			}
			tp := &onnxpb.TensorProto{
				Dims: t.pb.Dims, DataType: t.pb.DataType, Segment: t.pb.Segment,
				Name: t.pb.Name, DocString: t.pb.DocString, MetadataProps: t.pb.MetadataProps,
				DataLocation: onnxpb.TensorProto_EXTERNAL.Enum(),
				ExternalData: []*onnxpb.StringStringEntryProto{
					{Key: proto.String("location"), Value: proto.String(loc)},
					{Key: proto.String("offset"), Value: proto.String(strconv.FormatInt(off, 10))},
					{Key: proto.String("length"), Value: proto.String(strconv.FormatInt(int64(len(raw)), 10))},
				},
			}
			off += int64(len(raw))
			return tp, nil
		})
		return err
	})
	return data, side, err
}

// resolveLocationName checks a side-file name we are asked to write.
func resolveLocationName(loc string) (string, error) {
	if filepath.IsAbs(loc) || filepath.Base(loc) != loc || loc == "." || loc == ".." {
		return "", fmt.Errorf("external data location %q must be a plain file name", loc)
	}
	return loc, nil
}

// eachTensor calls f for every tensor of the model: initializers and
// tensor attributes, in graphs, subgraphs and functions.
func (m *Model) eachTensor(f func(*Tensor)) {
	var visit func(g *Graph)
	attrs := func(as []*Attr) {
		for _, a := range as {
			if a.Tensor != nil {
				f(a.Tensor)
			}
			for _, t := range a.Tensors {
				f(t)
			}
		}
	}
	visit = func(g *Graph) {
		for _, v := range g.Initializers {
			f(v.Const)
		}
		for _, n := range g.nodes {
			attrs(n.Attrs)
			for _, sg := range n.Subgraphs() {
				visit(sg)
			}
		}
	}
	visit(m.Graph)
	for _, fn := range m.Functions {
		visit(fn.Body)
		attrs(fn.AttrDefaults)
	}
}

// staged is a file written completely to a temporary name in its folder,
// waiting to be renamed into place.
type staged struct {
	tmp, path string
}

// stage writes a temporary file beside path and syncs it.
func stage(path string, write func(io.Writer) error) (st *staged, err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = write(tmp); err != nil {
		return nil, err
	}
	if err = tmp.Sync(); err != nil {
		return nil, err
	}
	if err = tmp.Close(); err != nil {
		return nil, err
	}
	if err = os.Chmod(tmp.Name(), 0o644); err != nil {
		return nil, err
	}
	return &staged{tmp: tmp.Name(), path: path}, nil
}

func (s *staged) commit() error {
	if err := os.Rename(s.tmp, s.path); err != nil {
		os.Remove(s.tmp)
		return err
	}
	return nil
}

func (s *staged) abort() { os.Remove(s.tmp) }

// writeAtomic writes a file through a temporary file in the same folder,
// renamed into place only once everything was written and synced.
func writeAtomic(path string, write func(io.Writer) error) error {
	st, err := stage(path, write)
	if err != nil {
		return err
	}
	return st.commit()
}
