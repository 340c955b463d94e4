package graph

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// Streaming a model whose external tensors move into the file (InlineAll):
// the model is encoded with each such tensor's raw_data a short sentinel,
// then written field by field, every sentinel replaced by the tensor's
// bytes copied from its side file, and the length of every message
// around it recomputed. The bytes are those proto.Marshal would write for
// the tensors held in memory, without holding them: a 1 GiB tensor is
// never in memory (it was read, copied into a proto and marshalled: four
// times its size).

// holes hands out the sentinels of the external tensors of one save.
type holes struct {
	prefix [16]byte
	ts     []*Tensor
}

func newHoles() (*holes, error) {
	h := &holes{}
	if _, err := rand.Read(h.prefix[:]); err != nil {
		return nil, err
	}
	return h, nil
}

const sentinelLen = 24

// sentinel returns the raw_data that stands for t.
func (h *holes) sentinel(t *Tensor) []byte {
	b := make([]byte, sentinelLen)
	copy(b, h.prefix[:])
	binary.LittleEndian.PutUint64(b[16:], uint64(len(h.ts)))
	h.ts = append(h.ts, t)
	return b
}

// lookup returns the tensor of a raw_data value that is a sentinel.
func (h *holes) lookup(v []byte) *Tensor {
	if len(v) != sentinelLen || !bytes.Equal(v[:16], h.prefix[:]) {
		return nil
	}
	i := binary.LittleEndian.Uint64(v[16:])
	if i >= uint64(len(h.ts)) {
		return nil
	}
	return h.ts[i]
}

// piece is a literal run of bytes or a tensor's elements.
type piece struct {
	lit  []byte
	hole *Tensor
}

var (
	tensorDesc = (&onnxpb.TensorProto{}).ProtoReflect().Descriptor()
	modelDesc  = (&onnxpb.ModelProto{}).ProtoReflect().Descriptor()
)

const rawDataField = 9 // TensorProto.raw_data

// expand splits the encoding b of a message of type md into pieces, each
// sentinel replaced by its tensor, and returns their total size.
func (h *holes) expand(b []byte, md protoreflect.MessageDescriptor, out []piece) ([]piece, int64, error) {
	var size int64
	lit := func(p []byte) {
		if n := len(out); n > 0 && out[n-1].hole == nil {
			out[n-1].lit = append(out[n-1].lit, p...)
		} else {
			out = append(out, piece{lit: append([]byte(nil), p...)})
		}
		size += int64(len(p))
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, 0, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, 0, protowire.ParseError(m)
		}
		field := b[:n+m]
		b = b[n+m:]
		if typ != protowire.BytesType || !bytes.Contains(field, h.prefix[:]) {
			lit(field)
			continue
		}
		v, _ := protowire.ConsumeBytes(field[n:])
		if md == tensorDesc && num == rawDataField {
			if t := h.lookup(v); t != nil {
				length := t.ext.Length
				lit(protowire.AppendVarint(protowire.AppendTag(nil, num, typ), uint64(length)))
				out = append(out, piece{hole: t})
				size += length
				continue
			}
		}
		fd := md.Fields().ByNumber(num)
		if fd == nil || fd.Message() == nil {
			lit(field)
			continue
		}
		sub, subSize, err := h.expand(v, fd.Message(), nil)
		if err != nil {
			return nil, 0, err
		}
		lit(protowire.AppendVarint(protowire.AppendTag(nil, num, typ), uint64(subSize)))
		for _, p := range sub {
			if p.hole != nil {
				out = append(out, p)
				size += p.hole.ext.Length
			} else {
				lit(p.lit)
			}
		}
	}
	return out, size, nil
}

// writePieces writes pieces to w, copying each tensor from its side file.
func writePieces(w io.Writer, pieces []piece) error {
	for _, p := range pieces {
		if p.hole == nil {
			if _, err := w.Write(p.lit); err != nil {
				return err
			}
			continue
		}
		if err := p.hole.ext.copyTo(w); err != nil {
			return err
		}
	}
	return nil
}

// copyTo copies the tensor's bytes from the side file to w, without
// holding them.
func (e *External) copyTo(w io.Writer) error {
	if e.missing {
		return fmt.Errorf("external data %q: %w", e.Location, ErrExternalMissing)
	}
	f, err := os.Open(e.path)
	if err != nil {
		return fmt.Errorf("external data %q: %w", e.Location, err)
	}
	defer f.Close()
	n, err := io.Copy(w, io.NewSectionReader(f, e.Offset, e.Length))
	if err == nil && n != e.Length {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return fmt.Errorf("external data %q: copying %d bytes at %d: %w", e.Location, e.Length, e.Offset, err)
	}
	return nil
}
