//go:build !unix

package atomicfile

import (
	"os"
	"time"
)

// lock is a no-op where there is no flock.
func lock(*os.File) error { return nil }

// lockedByOther cannot see locks here: a temporary file is taken as held
// for a day after its last change.
func lockedByOther(f *os.File) bool {
	fi, err := f.Stat()
	return err != nil || time.Since(fi.ModTime()) < 24*time.Hour
}
