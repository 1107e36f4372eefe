package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/withruntime/withruntime/internal/image"
)

// rawRunsc measures the same runsc and image through its own CLI: create,
// start, then exec the first Python command, with the network stack on as
// in the platform. It is the baseline the platform's overhead is read
// against.
func rawRunsc(ctx context.Context, cache string, n int) (series, error) {
	rootfs, err := image.Rootfs(cache, image.DefaultName)
	if err != nil {
		return nil, err
	}
	runsc := filepath.Join(cache, "bin", "runsc")
	dir, err := os.MkdirTemp("", "withruntime-raw-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// runsc pins an empty namespace for its gofers in its state root.
	defer func() {
		for syscall.Unmount(filepath.Join(dir, "state", "null-netns"), syscall.MNT_DETACH) == nil {
		}
	}()
	spec := map[string]any{
		"ociVersion": "1.0.0",
		"process": map[string]any{
			"user": map[string]int{"uid": 0, "gid": 0},
			"args": []string{"sleep", "infinity"},
			"env":  []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			"cwd":  "/",
		},
		"root":     map[string]any{"path": rootfs, "readonly": true},
		"hostname": "raw",
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc"},
			{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs"},
		},
		"linux": map[string]any{"namespaces": []map[string]string{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}}},
	}
	data, _ := json.Marshal(spec)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644); err != nil {
		return nil, err
	}
	root := filepath.Join(dir, "state")
	base := []string{"--root", root, "--platform", "systrap", "--network", "none"}
	// The sandbox inherits runsc's stdio: a file, never a pipe, or the
	// command would not be seen to end while the sandbox lives.
	logPath := filepath.Join(dir, "runsc.log")
	cmd := func(args ...string) error {
		log, err := os.Create(logPath)
		if err != nil {
			return err
		}
		defer log.Close()
		c := exec.CommandContext(ctx, runsc, append(base, args...)...)
		c.Stdout, c.Stderr = log, log
		if err := c.Run(); err != nil {
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("runsc %s: %v: %s", args[0], err, out)
		}
		return nil
	}
	var s series
	for i := 0; i < n+1; i++ {
		id := fmt.Sprintf("raw%d", i)
		start := time.Now()
		if err := cmd("create", "--bundle", dir, "--pid-file", filepath.Join(dir, "pid"), id); err != nil {
			return nil, err
		}
		if err := cmd("start", id); err != nil {
			return nil, err
		}
		if err := cmd("exec", id, "python3", "-c", "print(1)"); err != nil {
			return nil, err
		}
		d := time.Since(start)
		// As the platform does: kill, then delete (a graceful delete of a
		// live sandbox takes seconds).
		if pid, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(pid))); err == nil {
				syscall.Kill(n, syscall.SIGKILL)
			}
		}
		cmd("delete", "--force", id)
		if i > 0 { // the first run warms caches
			s = append(s, d)
		}
	}
	return s, nil
}
