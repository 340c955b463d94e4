package graph

import (
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// DecodeTensor reads one serialized TensorProto, the format of ONNX test
// data files (input_N.pb, output_N.pb). The tensor must hold its elements
// inline.
func DecodeTensor(data []byte) (*Tensor, error) {
	tp := &onnxpb.TensorProto{}
	if err := proto.Unmarshal(data, tp); err != nil {
		return nil, fmt.Errorf("not a TensorProto: %w", err)
	}
	if tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL || len(tp.ExternalData) > 0 {
		return nil, fmt.Errorf("tensor %q: external data is not supported in a standalone tensor file", tp.GetName())
	}
	if tp.Segment != nil {
		// Also what a SequenceProto file looks like when read as a tensor.
		return nil, fmt.Errorf("tensor %q: a segment of a larger tensor (or not a TensorProto at all)", tp.GetName())
	}
	t := &Tensor{pb: tp}
	if err := t.check(); err != nil {
		return nil, fmt.Errorf("tensor %q: %w", tp.GetName(), err)
	}
	return t, nil
}

// ReadTensorFile reads a TensorProto file.
func ReadTensorFile(path string) (*Tensor, error) {
	data, err := ReadRegularFile(path, MaxModelBytes)
	if err != nil {
		return nil, err
	}
	t, err := DecodeTensor(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// EncodeTensor serializes a tensor as a TensorProto, reading external
// elements into raw_data.
func EncodeTensor(t *Tensor) ([]byte, error) {
	tp := t.pb
	if t.ext != nil {
		raw, err := t.RawBytes()
		if err != nil {
			return nil, err
		}
		tp = proto.Clone(t.pb).(*onnxpb.TensorProto)
		tp.ExternalData, tp.DataLocation, tp.RawData = nil, nil, raw
	}
	return proto.Marshal(tp)
}

// WriteTensorFile writes a tensor as a TensorProto file, atomically.
func WriteTensorFile(path string, t *Tensor) error {
	data, err := EncodeTensor(t)
	if err != nil {
		return err
	}
	return writeAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
