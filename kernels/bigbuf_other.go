//go:build !linux

package kernels

func mapAnon(int) []byte { return nil }

func unmapAnon([]byte) {}
