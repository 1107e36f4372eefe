package gvisor

import (
	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// watch closes i.done when the sandbox process of pidfd fd exits, with
// the cause read from its cgroup: out of memory when the host ended it for
// that, or when the kernel's OOM killer acted since the memory watcher's
// last look (it kills programs' stubs too, and those the sandbox
// survives). It takes fd over.
func (i *instance) watch(fd int) {
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1)
			if err == unix.EINTR {
				continue
			}
			break
		}
		i.reason, i.message = sandbox.EndError, "the sandbox stopped unexpectedly"
		if n, ok := oomKills(i.id); i.overMemory.Load() || ok && n > i.oomKills.Load() {
			i.reason, i.message = sandbox.EndOutOfMemory, "the sandbox ran out of memory"
		}
		close(i.done)
	}()
}

// alive reports whether pid is a live process (a zombie is not).
func alive(pid int) bool {
	if pid <= 0 || unix.Kill(pid, 0) != nil {
		return false
	}
	f, err := statFields("/proc", pid)
	if err != nil {
		return false
	}
	if len(f) > 0 {
		return f[0] != "Z" && f[0] != "X"
	}
	return true
}
