package agent

import (
	"fmt"
	"time"
)

// MemFSWatch ends a microVM whose memory file systems (/tmp, /dev/shm)
// hold its memory: the guest kernel's OOM killer frees none of it, so
// the machine would limp on with nothing left for any program. The
// gVisor tier ends such a sandbox from the host; a VM's memory is its own
// kernel's, so the guest ends itself and says why on its console, which
// the host reads as out_of_memory (a guest's root can print the same line
// and lie only about its own end).
type MemFSWatch struct {
	// Proc is the proc mount; default /proc.
	Proc string
	// End reports the reason and powers the guest off (the agent's main
	// prints agentlink.OOMMark before it, which the host reads).
	End func(reason string)
}

// memFSGrace is how long memory must stay exhausted by the file systems.
const memFSGrace = 2 * time.Second

// Run looks every 250 ms, forever.
func (w *MemFSWatch) Run() {
	var over time.Duration
	const tick = 250 * time.Millisecond
	for {
		time.Sleep(tick)
		if reason, full := w.full(); full {
			over += tick
			if over >= memFSGrace {
				w.End(reason)
				return
			}
		} else {
			over = 0
		}
	}
}

// full reports whether memory is all but gone and memory file systems
// hold most of it.
func (w *MemFSWatch) full() (string, bool) {
	proc := w.Proc
	if proc == "" {
		proc = "/proc"
	}
	m := readMeminfo(proc)
	total, avail, shmem := m["MemTotal"], m["MemAvailable"], m["Shmem"]
	if total == 0 || avail >= total/50 || shmem < total*85/100 {
		return "", false
	}
	return fmt.Sprintf("memory file systems hold %d of %d MiB", shmem>>20, total>>20), true
}
