package graph

import (
	"os"
	"syscall"
	"unsafe"
)

const canMap = true

func keyOf(fi os.FileInfo) (fileKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	return fileKey{dev: uint64(st.Dev), ino: uint64(st.Ino), size: fi.Size(),
		mtime: fi.ModTime().UnixNano(), ctime: st.Ctim.Nano()}, true
}

func mmapFile(f *os.File, size int64) ([]byte, error) {
	if size == 0 {
		return []byte{}, nil
	}
	return syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
}

type advice int

const (
	adviseDontNeed advice = iota
	advisePopulate
)

// madvPopulateRead is Linux's MADV_POPULATE_READ (5.14): fault the pages
// in; older kernels refuse it and MADV_WILLNEED starts the reads instead.
const madvPopulateRead = 22

// adviseMapped applies advice to b's pages: the whole pages inside it
// (DONTNEED: a neighbour's page stays), or every page it touches
// (POPULATE).
func adviseMapped(b []byte, a advice) {
	if len(b) == 0 {
		return
	}
	page := os.Getpagesize()
	p := unsafe.Pointer(unsafe.SliceData(b))
	off := int(uintptr(p) & uintptr(page-1))
	switch a {
	case adviseDontNeed:
		skip := (page - off) % page
		if skip >= len(b) {
			return
		}
		r := b[skip:]
		r = r[:len(r)/page*page]
		if len(r) > 0 {
			_ = syscall.Madvise(r, syscall.MADV_DONTNEED)
		}
	case advisePopulate:
		r := unsafe.Slice((*byte)(unsafe.Add(p, -off)), len(b)+off)
		if err := syscall.Madvise(r, madvPopulateRead); err != nil {
			_ = syscall.Madvise(r, syscall.MADV_WILLNEED)
		}
	}
}
