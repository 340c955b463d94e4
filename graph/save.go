package graph

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/atomicfile"

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
	// Context, when set, stops a save once it is done (an interrupt):
	// the temporary files written so far are removed, nothing is renamed
	// into place, and Save returns the context's error.
	Context context.Context
}

// save writes every file (side files first, the model last) to a
// temporary name beside its destination, and renames them into place only
// once all were written: a failure or a cancelled context leaves nothing.
func (m *Model) save(path string, opts SaveOptions) (err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	dir := filepath.Dir(abs)
	var files []*staged
	defer func() {
		if err != nil {
			for _, f := range files {
				f.abort()
			}
		}
	}()
	var data []byte
	var pieces []piece // InlineAll: the model with its external tensors streamed in
	switch opts.External {
	case KeepStorage:
		files, err = m.stageSideFiles(ctx, dir)
		if err != nil {
			return err
		}
		data, err = m.encode(nil)
	case InlineAll:
		var h *holes
		if h, err = newHoles(); err != nil {
			return err
		}
		data, err = m.encode(func(t *Tensor) (*onnxpb.TensorProto, error) {
			if t.ext == nil {
				return t.pb, nil
			}
			if t.ext.missing {
				return nil, fmt.Errorf("external data %q: %w", t.ext.Location, ErrExternalMissing)
			}
			tp := proto.Clone(t.pb).(*onnxpb.TensorProto)
			tp.ExternalData, tp.DataLocation, tp.RawData = nil, nil, h.sentinel(t)
			return tp, nil
		})
		if err != nil {
			return err
		}
		var size int64
		pieces, size, err = h.expand(data, modelDesc, nil)
		if err == nil && size > MaxModelBytes {
			err = fmt.Errorf("the model is %d bytes inline, over the 2 GiB limit of the format: keep large tensors external", size)
		}
	case ExternalizeLarge:
		var side *staged
		data, side, err = m.saveExternalized(ctx, dir, filepath.Base(abs), opts)
		if side != nil {
			files = append(files, side)
		}
	default:
		err = fmt.Errorf("graph: unknown external mode %d", opts.External)
	}
	if err != nil {
		return err
	}
	model, err := stage(ctx, abs, func(w io.Writer) error {
		if pieces != nil {
			return writePieces(w, pieces)
		}
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	files = append(files, model)
	// Every file is complete: rename them into place, the model last,
	// unless the save was stopped meanwhile.
	if err := ctx.Err(); err != nil {
		return err
	}
	for len(files) > 0 {
		if err := files[0].commit(); err != nil {
			files = files[1:]
			return err
		}
		files = files[1:]
	}
	return nil
}

// SaveSideFiles lists the side files Save(path, opts) writes beside path,
// each once: the tensors' side files copied into path's folder when it is
// not the model's (KeepStorage), the one side file of ExternalizeLarge,
// none for InlineAll. Commands check them before saving (a side file must
// not replace a file it does not own).
func (m *Model) SaveSideFiles(path string, opts SaveOptions) ([]string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(abs)
	switch opts.External {
	case KeepStorage:
		if m.Dir == "" {
			return nil, nil
		}
		if same, err := sameDir(m.Dir, dir); err != nil || same {
			return nil, err
		}
		var files []string
		seen := map[string]bool{}
		m.eachTensor(func(t *Tensor) {
			if t.ext != nil && !seen[t.ext.Location] {
				seen[t.ext.Location] = true
				files = append(files, filepath.Join(dir, filepath.FromSlash(t.ext.Location)))
			}
		})
		return files, nil
	case ExternalizeLarge:
		loc := opts.Location
		if loc == "" {
			loc = filepath.Base(abs) + ".data"
		}
		if _, err := resolveLocationName(loc); err != nil {
			return nil, err
		}
		return []string{filepath.Join(dir, loc)}, nil
	}
	return nil, nil
}

// stageSideFiles copies the side files of external tensors to temporary
// files in dir when the model is saved to a folder other than the one it
// was loaded from, so that the saved locations stay valid.
func (m *Model) stageSideFiles(ctx context.Context, dir string) ([]*staged, error) {
	if m.Dir == "" {
		return nil, nil
	}
	same, err := sameDir(m.Dir, dir)
	if err != nil || same {
		return nil, err
	}
	done := map[string]bool{}
	var files []*staged
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
		st, err := stage(ctx, dst, func(w io.Writer) error {
			f, err := os.Open(t.ext.path)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(w, f)
			return err
		})
		if err != nil {
			firstErr = err
			return
		}
		files = append(files, st)
	})
	if firstErr != nil {
		for _, f := range files {
			f.abort()
		}
		return nil, firstErr
	}
	return files, nil
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

func (m *Model) saveExternalized(ctx context.Context, dir, base string, opts SaveOptions) ([]byte, *staged, error) {
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
	side, err := stage(ctx, filepath.Join(dir, loc), func(w io.Writer) error {
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
			if pad := (externalAlign - off%externalAlign) % externalAlign; pad > 0 {
				if _, err := w.Write(make([]byte, pad)); err != nil {
					return nil, err
				}
				off += pad
			}
			// An external tensor is copied from its side file, not read
			// into memory; an inline one is written from the model.
			var length int64
			if t.ext != nil {
				if err := t.ext.copyTo(w); err != nil {
					return nil, err
				}
				length = t.ext.Length
			} else {
				raw, err := t.RawBytes()
				if err != nil {
					return nil, err
				}
				if _, err := w.Write(raw); err != nil {
					return nil, err
				}
				length = int64(len(raw))
			}
			tp := &onnxpb.TensorProto{
				Dims: t.pb.Dims, DataType: t.pb.DataType, Segment: t.pb.Segment,
				Name: t.pb.Name, DocString: t.pb.DocString, MetadataProps: t.pb.MetadataProps,
				DataLocation: onnxpb.TensorProto_EXTERNAL.Enum(),
				ExternalData: []*onnxpb.StringStringEntryProto{
					{Key: proto.String("location"), Value: proto.String(loc)},
					{Key: proto.String("offset"), Value: proto.String(strconv.FormatInt(off, 10))},
					{Key: proto.String("length"), Value: proto.String(strconv.FormatInt(length, 10))},
				},
			}
			off += length
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

// staged is a file written completely to a temporary name in its folder
// (locked while this process lives), waiting to be renamed into place.
type staged struct{ f *atomicfile.File }

// stage writes a temporary file beside path, after removing the stale
// temporary files of path a killed run left. Writing stops with ctx's
// error once ctx is done; the temporary file is then removed.
func stage(ctx context.Context, path string, write func(io.Writer) error) (*staged, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	if err := write(&ctxWriter{ctx: ctx, w: f}); err != nil {
		f.Abort()
		return nil, err
	}
	return &staged{f}, nil
}

// commit syncs the file and renames it into place.
func (s *staged) commit() error { return s.f.Commit() }

func (s *staged) abort() { s.f.Abort() }

// writeAtomic writes a file through a temporary file in the same folder,
// renamed into place only once everything was written and synced.
func writeAtomic(path string, write func(io.Writer) error) error {
	st, err := stage(context.Background(), path, write)
	if err != nil {
		return err
	}
	return st.commit()
}

// ctxWriter writes in chunks of at most ctxChunk bytes and stops with the
// context's error once it is done.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

const ctxChunk = 1 << 20

func (c *ctxWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if err := c.ctx.Err(); err != nil {
			return n, err
		}
		k, err := c.w.Write(p[:min(len(p), ctxChunk)])
		n += k
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}
