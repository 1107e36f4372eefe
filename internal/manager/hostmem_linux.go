package manager

import "golang.org/x/sys/unix"

func hostMemoryMiB() int {
	var info unix.Sysinfo_t
	if unix.Sysinfo(&info) != nil {
		return 4096
	}
	return int(uint64(info.Totalram) * uint64(info.Unit) >> 20)
}
