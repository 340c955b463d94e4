//go:build !amd64 || purego

package gemm

func nativeArchs() []*arch { return nil }
