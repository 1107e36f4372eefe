package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// machine describes the host the figures were measured on.
func machine(ctx context.Context, cache string) string {
	host, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	mem := "?"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				mem = strings.TrimSpace(v)
			}
		}
	}
	out, err := exec.CommandContext(ctx, filepath.Join(cache, "bin", "runsc"), "--version").Output()
	runsc := strings.Join(strings.Fields(string(out)), " ")
	if err != nil {
		runsc = "runsc --version: " + err.Error()
	}
	return "host " + host + ", nproc " + strconv.Itoa(runtime.NumCPU()) + ", memory " + mem +
		", kernel " + strings.TrimSpace(string(kernel)) + ", " + runtime.Version() + "\n" + runsc
}
