//go:build unix

package atomicfile

import (
	"os"
	"syscall"
)

// lock takes an exclusive advisory lock on f, held until f is closed (or
// its process ends).
func lock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

// lockedByOther reports whether another open file holds f's lock; when it
// does not, f now holds it.
func lockedByOther(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil
}
