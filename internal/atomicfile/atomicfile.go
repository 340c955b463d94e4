// Package atomicfile writes files and folders so that nothing is ever
// half-written: each is written to a temporary name beside its
// destination (".NAME.tmp-*"), locked while its writer lives, and renamed
// into place once complete. A writer that was killed (SIGKILL, a crash, a
// power cut) leaves its temporary file behind; the next writer of the same
// destination removes it (RemoveStale), since its lock died with it.
//
// It does not decide what may be written where: the command line checks
// its outputs before any work (internal/cli/output.go).
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// tempPattern is the os.CreateTemp pattern of path's temporary files.
func tempPattern(path string) string { return "." + filepath.Base(path) + ".tmp-*" }

// IsTemp reports whether name (a base name) is a temporary file or folder
// of this package.
func IsTemp(name string) bool { return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-") }

// File is a temporary file that becomes path on Commit.
type File struct {
	*os.File
	path string
}

// Create removes path's stale temporary files (RemoveStale) and makes a
// new one beside path, locked until Commit or Abort.
func Create(path string) (*File, error) {
	RemoveStale(path)
	f, err := os.CreateTemp(filepath.Dir(path), tempPattern(path))
	if err != nil {
		return nil, err
	}
	if err := lock(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &File{File: f, path: path}, nil
}

// Path is where the file goes on Commit.
func (f *File) Path() string { return f.path }

// Commit syncs the file, makes it readable by others (0644, as
// os.WriteFile's files are) and renames it over path. On failure the
// temporary file is removed.
func (f *File) Commit() error {
	err := f.Sync()
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), f.path)
	}
	cerr := f.Close()
	if err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// Abort removes the temporary file.
func (f *File) Abort() {
	f.Close()
	os.Remove(f.Name())
}

// Write writes path atomically with write.
func Write(path string, write func(*File) error) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// WriteFile writes data to path atomically.
func WriteFile(path string, data []byte) error {
	return Write(path, func(f *File) error {
		_, err := f.Write(data)
		return err
	})
}

// Dir is a temporary folder, locked until Release: Path is where its
// writer builds what goes into place.
type Dir struct {
	Path string
	lk   *os.File
}

// TempDir removes path's stale temporary files and folders and makes a
// new temporary folder beside path (mode 0755), locked until Release.
func TempDir(path string) (*Dir, error) {
	RemoveStale(path)
	p, err := os.MkdirTemp(filepath.Dir(path), tempPattern(path))
	if err != nil {
		return nil, err
	}
	d := &Dir{Path: p}
	if err := os.Chmod(p, 0o755); err != nil {
		os.RemoveAll(p)
		return nil, err
	}
	if d.lk, err = os.Open(p); err == nil {
		err = lock(d.lk)
	}
	if err != nil {
		d.Release()
		os.RemoveAll(p)
		return nil, err
	}
	return d, nil
}

// Release removes the folder (whatever is left in it) and its lock.
func (d *Dir) Release() {
	os.RemoveAll(d.Path)
	if d.lk != nil {
		d.lk.Close()
	}
}

// fresh is how young an unlocked temporary file must be for RemoveStale
// to leave it: its writer may be between creating it and locking it.
const fresh = 2 * time.Second

// RemoveStale removes the temporary files and folders of path that no
// living writer holds: those a killed process left. It reports how many
// it removed. Errors are ignored (a file it cannot remove stays).
func RemoveStale(path string) int {
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), globEscape(tempPattern(path))))
	n := 0
	for _, m := range matches {
		fi, err := os.Lstat(m)
		if err != nil || !(fi.Mode().IsRegular() || fi.IsDir()) {
			continue
		}
		f, err := os.Open(m)
		if err != nil {
			continue
		}
		held := lockedByOther(f)
		if !held && time.Since(fi.ModTime()) < fresh && (fi.IsDir() || fi.Size() == 0) {
			held = true
		}
		if !held {
			if fi.IsDir() {
				err = os.RemoveAll(m)
			} else {
				err = os.Remove(m)
			}
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				n++
			}
		}
		f.Close()
	}
	return n
}

// globEscape escapes the glob metacharacters of a pattern's literal part
// (file names may hold '[' or '?'); the trailing '*' stays a wildcard.
func globEscape(pattern string) string {
	lit := strings.TrimSuffix(pattern, "*")
	var b strings.Builder
	for _, r := range lit {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String() + "*"
}
