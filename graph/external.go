package graph

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrUnsafeLocation is wrapped by errors about external data locations that
// would read outside the model's folder.
var ErrUnsafeLocation = errors.New("external data location leaves the model's folder")

// ErrExternalMissing is wrapped by the error of reading a tensor whose
// side file was absent when a model was loaded with
// LoadOptions.AllowMissingExternal.
var ErrExternalMissing = errors.New("external data file is missing")

// External says where a tensor's elements are stored outside the .onnx
// file: Length bytes at Offset in the file Location, a path relative to
// the model's folder.
type External struct {
	Location string
	Offset   int64
	Length   int64
	Checksum string
	path     string // resolved, checked path
	missing  bool   // the side file was absent (LoadOptions.AllowMissingExternal)
}

// Missing reports whether the side file was absent when the model was
// loaded (then the elements cannot be read).
func (e *External) Missing() bool { return e.missing }

// Path is the resolved path of the side file.
func (e *External) Path() string { return e.path }

// SideFiles are the resolved paths of the files the model's external
// tensors are stored in (initializers and tensor attributes, in graphs,
// subgraphs and functions), each once, in the order first met.
func (m *Model) SideFiles() []string {
	var files []string
	seen := map[string]bool{}
	m.eachTensor(func(t *Tensor) {
		if t != nil && t.ext != nil && t.ext.path != "" && !seen[t.ext.path] {
			seen[t.ext.path] = true
			files = append(files, t.ext.path)
		}
	})
	return files
}

// parseExternal reads the external_data entries of a tensor proto and
// resolves the location against dir. It checks that the location stays in
// dir (also through symlinks) and that the file holds the bytes, without
// reading them.
func parseExternal(t *Tensor, dir string, allowMissing bool) (*External, error) {
	e := &External{Length: -1}
	for _, kv := range t.pb.ExternalData {
		var err error
		switch kv.GetKey() {
		case "location":
			e.Location = kv.GetValue()
		case "offset":
			e.Offset, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		case "length":
			e.Length, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		case "checksum":
			e.Checksum = kv.GetValue()
		}
		if err != nil {
			return nil, fmt.Errorf("external data %s %q is not a number", kv.GetKey(), kv.GetValue())
		}
	}
	if e.Location == "" {
		return nil, errors.New("external data has no location")
	}
	if e.Offset < 0 || e.Length < -1 {
		return nil, fmt.Errorf("external data %q: negative offset or length", e.Location)
	}
	path, err := resolveLocation(dir, e.Location)
	if err != nil {
		if allowMissing && errors.Is(err, ErrExternalMissing) {
			e.missing = true
			return e, nil
		}
		return nil, err
	}
	e.path = path
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if allowMissing {
				e.missing, e.path = true, ""
				return e, nil
			}
			return nil, fmt.Errorf("external data file %q: %w", e.Location, ErrExternalMissing)
		}
		return nil, fmt.Errorf("external data file %q: %w", e.Location, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("external data %q is not a regular file", e.Location)
	}
	if e.Length == -1 {
		e.Length = fi.Size() - e.Offset
	}
	if e.Offset > fi.Size() || e.Length > fi.Size()-e.Offset {
		return nil, fmt.Errorf("external data %q: %d bytes at offset %d run past the end of the %d-byte file", e.Location, e.Length, e.Offset, fi.Size())
	}
	return e, nil
}

// resolveLocation joins a relative location to dir and refuses absolute
// locations, ones that climb out with "..", and ones that leave dir
// through a symlink.
func resolveLocation(dir, loc string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("external data %q: the model was not loaded from a file, so there is no folder to read it from", loc)
	}
	slashed := strings.ReplaceAll(loc, `\`, "/")
	if filepath.IsAbs(loc) || strings.HasPrefix(slashed, "/") || filepath.VolumeName(loc) != "" || strings.Contains(loc, "\x00") {
		return "", fmt.Errorf("external data location %q is absolute: %w", loc, ErrUnsafeLocation)
	}
	for _, part := range strings.Split(slashed, "/") {
		if part == ".." {
			return "", fmt.Errorf("external data location %q climbs out with '..': %w", loc, ErrUnsafeLocation)
		}
	}
	path := filepath.Join(dir, filepath.FromSlash(slashed))
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("model folder: %w", err)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("external data file %q: %w", loc, ErrExternalMissing)
		}
		return "", fmt.Errorf("external data %q: %w", loc, err)
	}
	rel, err := filepath.Rel(realDir, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("external data location %q leads to %s through a symlink: %w", loc, real, ErrUnsafeLocation)
	}
	return real, nil
}

// read reads the tensor's bytes from the side file.
func (e *External) read() ([]byte, error) {
	if e.missing {
		return nil, fmt.Errorf("external data %q: %w", e.Location, ErrExternalMissing)
	}
	if e.path == "" {
		return nil, fmt.Errorf("external data %q: the tensor was made in memory (NewExternalTensor): save the model and load it to read it", e.Location)
	}
	f, err := os.Open(e.path)
	if err != nil {
		return nil, fmt.Errorf("external data %q: %w", e.Location, err)
	}
	defer f.Close()
	b := make([]byte, e.Length)
	if _, err := f.ReadAt(b, e.Offset); err != nil && !(errors.Is(err, io.EOF) && e.Length == 0) {
		return nil, fmt.Errorf("external data %q: reading %d bytes at %d: %w", e.Location, e.Length, e.Offset, err)
	}
	return b, nil
}
