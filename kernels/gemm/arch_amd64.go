//go:build amd64 && !purego

package gemm

import "golang.org/x/sys/cpu"

var avx512Arch = &arch{
	name: "avx512", mr: 12, nr: 32, kc: 256, mc: 96, nc: 4096,
	kernels: kernelsAVX512[:],
	small:   &smallKernels{lanes: 16, bcast: smallBcastAVX512[:], dot: smallDotAVX512[:]},
}

var avx2Arch = &arch{
	name: "avx2", mr: 6, nr: 16, kc: 256, mc: 96, nc: 4096,
	kernels: kernelsAVX2[:],
	small:   &smallKernels{lanes: 8, bcast: smallBcastAVX2[:], dot: smallDotAVX2[:]},
}

func nativeArchs() []*arch {
	var as []*arch
	if cpu.X86.HasAVX512F {
		as = append(as, avx512Arch)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		as = append(as, avx2Arch)
	}
	return as
}
