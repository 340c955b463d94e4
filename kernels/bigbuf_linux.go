package kernels

import "syscall"

// madvHugepage is MADV_HUGEPAGE: back the range with transparent huge
// pages (in the kernel's "madvise" mode, only such ranges get them).
const madvHugepage = 14

// mapAnon maps n bytes of anonymous memory (nil when the kernel refuses).
func mapAnon(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	_ = syscall.Madvise(b, madvHugepage)
	return b
}

func unmapAnon(b []byte) { _ = syscall.Munmap(b) }
