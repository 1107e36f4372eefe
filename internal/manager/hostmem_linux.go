package manager

import "golang.org/x/sys/unix"

// HostMemoryMiB is the host's memory, Config.HostMemoryMiB's default (4096
// when the kernel does not say).
func HostMemoryMiB() int {
	var info unix.Sysinfo_t
	if unix.Sysinfo(&info) != nil {
		return 4096
	}
	return int(uint64(info.Totalram) * uint64(info.Unit) >> 20)
}
