package graph

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// MaxModelBytes is the largest model file Load reads: a protobuf message
// is at most 2 GiB (ONNX Runtime refuses larger files too); larger
// weights belong in external data.
const MaxModelBytes = 1<<31 - 1

// ErrNotRegular is wrapped by the error of a path that is not a regular
// file (a folder, a FIFO, a device, a socket): models and test data are
// read only from regular files, so that /dev/zero or a FIFO can neither
// hang a command nor feed it without bound.
var ErrNotRegular = errors.New("not a regular file")

type notRegular struct{ kind string }

func (e notRegular) Error() string        { return e.kind + ", not a regular file" }
func (e notRegular) Is(target error) bool { return target == ErrNotRegular }

// FileKind names what a file that is not regular is: "a folder", "a FIFO
// (named pipe)", "a character device", ...
func FileKind(fi fs.FileInfo) string {
	m := fi.Mode()
	switch {
	case m.IsDir():
		return "a folder"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsRegular():
		return "a regular file"
	}
	return "a special file (" + m.Type().String() + ")"
}

// OpenRegular opens path for reading if it is a regular file; anything
// else is refused with an *fs.PathError wrapping ErrNotRegular, without
// blocking (a FIFO is opened non-blocking, then refused).
func OpenRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		kind := FileKind(fi)
		if fi.IsDir() {
			kind = "is a directory" // as the system says it
		} else {
			kind = "is " + kind
		}
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: notRegular{kind}}
	}
	return f, fi, nil
}

// ReadRegularFile reads path, a regular file (OpenRegular) of at most
// limit bytes; what it reads is bounded by limit even if the file grows
// meanwhile.
func ReadRegularFile(path string, limit int64) ([]byte, error) {
	f, fi, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooBig := func(n int64) error {
		return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%d bytes or more, over the limit of %d bytes", n, limit)}
	}
	if fi.Size() > limit {
		return nil, tooBig(fi.Size())
	}
	data := make([]byte, fi.Size(), fi.Size()+1)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	// A file that grew (or reports no size) is read on, up to limit.
	rest, err := io.ReadAll(io.LimitReader(f, limit-int64(len(data))+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)+len(rest)) > limit {
		return nil, tooBig(int64(len(data) + len(rest)))
	}
	return append(data, rest...), nil
}
