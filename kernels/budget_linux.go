//go:build linux

package kernels

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// machineMemory is what the process may use: the smallest of the
// machine's memory (/proc/meminfo), its cgroup's limit (memory.max, v2;
// memory.limit_in_bytes, v1) and its address-space and data limits
// (ulimit -v, -d). 0 when none can be read.
func machineMemory() int64 {
	var best int64
	take := func(n int64) {
		if n > 0 && (best == 0 || n < best) {
			best = n
		}
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				take(kb * 1024)
			}
		}
		f.Close()
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(p); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n < 1<<60 {
				take(n)
			}
		}
	}
	for _, r := range []int{syscall.RLIMIT_AS, syscall.RLIMIT_DATA} {
		var lim syscall.Rlimit
		if syscall.Getrlimit(r, &lim) == nil && lim.Cur < 1<<62 {
			take(int64(lim.Cur))
		}
	}
	return best
}
