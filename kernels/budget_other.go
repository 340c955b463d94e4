//go:build !linux

package kernels

// machineMemory is not read outside Linux: DefaultBudgetLimit falls back
// to its fixed figure.
func machineMemory() int64 { return 0 }
