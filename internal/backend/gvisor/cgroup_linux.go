package gvisor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	cgroupRoot   = "/sys/fs/cgroup"
	cgroupParent = "withruntime"
)

// prepareCgroups makes the parent cgroup of every sandbox. On cgroup v1 a
// new cpuset cgroup starts with no CPUs and no memory nodes, and runsc
// cannot give its child any until the parent has them.
func prepareCgroups() error {
	cpuset := filepath.Join(cgroupRoot, "cpuset")
	if _, err := os.Stat(filepath.Join(cpuset, "cpuset.cpus")); err != nil {
		return nil // not cgroup v1 cpuset: nothing to prepare
	}
	dir := filepath.Join(cpuset, cgroupParent)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("making cpuset cgroup: %w", err)
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		cur, _ := os.ReadFile(filepath.Join(dir, f))
		if len(bytes.TrimSpace(cur)) > 0 {
			continue
		}
		v, err := os.ReadFile(filepath.Join(cpuset, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", f, err)
		}
	}
	return nil
}

// cgroupPath is the cgroup of sandbox id, relative to each hierarchy.
func cgroupPath(id string) string { return "/" + cgroupParent + "/" + id }

// oomKilled reports whether the kernel's OOM killer acted in the sandbox's
// memory cgroup.
func oomKilled(id string) bool {
	v1 := filepath.Join(cgroupRoot, "memory", cgroupParent, id, "memory.oom_control")
	if data, err := os.ReadFile(v1); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok && k == "oom_kill" {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				return n > 0
			}
		}
	}
	v2 := filepath.Join(cgroupRoot, cgroupParent, id, "memory.events")
	if data, err := os.ReadFile(v2); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok && k == "oom_kill" {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				return n > 0
			}
		}
	}
	return false
}

// removeCgroups removes the sandbox's cgroups in every hierarchy, once
// empty. runsc removes them on delete; this catches what a crash left.
func removeCgroups(id string) error {
	entries, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return nil
	}
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(cgroupRoot, e.Name(), cgroupParent, id)
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(filepath.Join(cgroupRoot, "unified", cgroupParent, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// leftoverCgroups lists sandbox ids that have a cgroup under the parent.
func leftoverCgroups() []string {
	seen := map[string]bool{}
	entries, _ := os.ReadDir(cgroupRoot)
	for _, e := range entries {
		subs, _ := os.ReadDir(filepath.Join(cgroupRoot, e.Name(), cgroupParent))
		for _, s := range subs {
			if s.IsDir() {
				seen[s.Name()] = true
			}
		}
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	return ids
}

// CPUTime implements sandbox.Meter: the CPU time of every process of the
// sandbox (the sentry, gofer and the stubs that run its programs), from its
// cgroup.
func (b *Backend) CPUTime(id string) (time.Duration, error) {
	for _, p := range []string{
		filepath.Join(cgroupRoot, "cpuacct", cgroupParent, id, "cpuacct.usage"),
		filepath.Join(cgroupRoot, "cpu,cpuacct", cgroupParent, id, "cpuacct.usage"),
	} {
		if data, err := os.ReadFile(p); err == nil {
			ns, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
			return time.Duration(ns), err
		}
	}
	data, err := os.ReadFile(filepath.Join(cgroupRoot, cgroupParent, id, "cpu.stat"))
	if err != nil {
		return 0, fmt.Errorf("reading CPU time of %s: %w", id, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == "usage_usec" {
			us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Duration(us) * time.Microsecond, err
		}
	}
	return 0, fmt.Errorf("no CPU time for %s", id)
}
