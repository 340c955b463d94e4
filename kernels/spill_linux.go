package kernels

import (
	"os"
	"syscall"
)

const canSpill = true

// spillBytes writes b to a new temporary file, maps it read-only and
// removes the file (the mapping keeps its blocks until unmapped); the
// written pages are dropped from the page cache's hold on the process.
func spillBytes(b []byte) ([]byte, error) {
	f, err := os.CreateTemp("", "onnxpe-spill-*")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		return nil, err
	}
	return syscall.Mmap(int(f.Fd()), 0, len(b), syscall.PROT_READ, syscall.MAP_SHARED)
}

// spillFile maps a new temporary file of n zero bytes read-write (shared:
// what is written goes to the file, and pages released from the process
// are the page cache's) and removes the file.
func spillFile(n int) ([]byte, error) {
	f, err := os.CreateTemp("", "onnxpe-spill-*")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	defer os.Remove(f.Name())
	if err := f.Truncate(int64(n)); err != nil {
		return nil, err
	}
	return syscall.Mmap(int(f.Fd()), 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
}

func releaseSpilled(b []byte) { _ = syscall.Madvise(b, syscall.MADV_DONTNEED) }

func unmapSpilled(b []byte) { _ = syscall.Munmap(b) }
