package agent

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// killRounds bounds killTree: processes may fork while it scans.
const killRounds = 50

// killTree SIGKILLs process group pgid (when not 0) and every process whose
// environment carries tag ("NAME=value"), scanning /proc in rounds until a
// round finds none left alive. The tag catches descendants that left the
// group with setsid or a double fork; only one that rewrote or cleared its
// environment escapes, and the sandbox's end still takes it.
func killTree(pgid int, tag string) {
	if tag == "" {
		return // an empty tag would match every environment
	}
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	needle := []byte("\x00" + tag + "\x00")
	for round := 0; round < killRounds; round++ {
		if killScan(pgid, needle) == 0 {
			return
		}
		time.Sleep(time.Duration(round+1) * time.Millisecond)
	}
}

// killScan kills the live processes of group pgid or carrying needle in
// their environment, and returns how many it found.
func killScan(pgid int, needle []byte) int {
	d, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	self := os.Getpid()
	found := 0
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		state, pgrp, ok := procStat(pid)
		if !ok || state == 'Z' || state == 'X' {
			continue
		}
		if (pgid > 0 && pgrp == pgid) || hasTag(pid, needle) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			found++
		}
	}
	return found
}

// procStat reads a process's state and process group from /proc/PID/stat.
func procStat(pid int) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name may hold spaces and parentheses: fields resume after
	// the last ')'. They are: state ppid pgrp ...
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pgrp, err = strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pgrp, true
}

func hasTag(pid int, needle []byte) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil || len(env) == 0 {
		return false
	}
	env = append([]byte{0}, env...)
	if env[len(env)-1] != 0 {
		env = append(env, 0)
	}
	return bytes.Contains(env, needle)
}
