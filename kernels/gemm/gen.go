package gemm

//go:generate go run asmgen.go
