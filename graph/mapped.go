package graph

import (
	"fmt"
	"os"
	"sync"
)

// Side files are mapped into memory read-only, once per file per process
// (two models loaded from the same files share the pages), so that a
// runtime can use weights in place instead of reading copies of them.
// Mappings stay for the life of the process (slices into them may be held
// anywhere); their pages are the page cache's, and ReleaseMapped drops
// them from the process when a user is done with them.

// fileKey identifies one version of a file: its device and inode, and
// its size and modification and change times, so that a file replaced
// under the same name (or an inode reused) maps anew.
type fileKey struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

var (
	mapMu   sync.Mutex
	mapping = map[fileKey][]byte{}
)

// Mapped returns the elements of an external tensor as memory mapped
// read-only from its side file: the file's bytes, which must never be
// written (a write faults). ok is false when the tensor is not external or
// the platform maps no files; then read it with RawBytes.
func (t *Tensor) Mapped() (b []byte, ok bool, err error) {
	e := t.ext
	if e == nil || !canMap {
		return nil, false, nil
	}
	if e.missing {
		return nil, false, fmt.Errorf("external data %q: %w", e.Location, ErrExternalMissing)
	}
	if e.path == "" {
		return nil, false, nil
	}
	if e.Length == 0 {
		return []byte{}, true, nil
	}
	whole, err := mapFile(e.path)
	if err != nil {
		return nil, false, fmt.Errorf("external data %q: %w", e.Location, err)
	}
	if e.Offset+e.Length > int64(len(whole)) {
		return nil, false, fmt.Errorf("external data %q: %d bytes at offset %d run past the end of the %d-byte file", e.Location, e.Length, e.Offset, len(whole))
	}
	return whole[e.Offset : e.Offset+e.Length : e.Offset+e.Length], true, nil
}

// mapFile maps the whole of path (the current version of the file).
func mapFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	k, ok := keyOf(fi)
	mapMu.Lock()
	defer mapMu.Unlock()
	if b, hit := mapping[k]; ok && hit {
		return b, nil
	}
	b, err := mmapFile(f, fi.Size())
	if err != nil {
		return nil, err
	}
	if ok {
		mapping[k] = b
	}
	return b, nil
}

// ReleaseMapped drops the pages of b, memory Mapped returned, from the
// process (they stay in the page cache): touched again, they are read
// from the file. It is how a user that copied a weight (packed it) stops
// holding its bytes.
func ReleaseMapped(b []byte) { adviseMapped(b, adviseDontNeed) }

// PopulateMapped reads the pages of b, memory Mapped returned, in one go
// (a weight used in place), instead of one page fault per page.
func PopulateMapped(b []byte) { adviseMapped(b, advisePopulate) }
