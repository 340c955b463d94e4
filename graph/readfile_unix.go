//go:build unix

package graph

import "syscall"

// openNonblock makes opening a FIFO return at once instead of waiting for
// a writer (OpenRegular refuses it then).
const openNonblock = syscall.O_NONBLOCK
