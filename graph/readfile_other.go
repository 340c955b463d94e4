//go:build !unix

package graph

const openNonblock = 0
