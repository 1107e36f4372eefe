package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

type bencher struct {
	c          *client.Client
	vcpus, mem int
	fresh      *freshness
}

// warm runs one sandbox so that caches (page cache of the image and runsc)
// are as they are on a host in use.
func (b *bencher) warm(ctx context.Context) {
	if _, id, _ := b.measure(ctx, shapePy); id != "" {
		b.done(ctx, []string{id})
	}
}

// floor measures, in one sandbox, the exec round trip of `true` through
// the API, that of a command not found (no process: the platform's own
// path) and the in-sandbox spawn floor under them.
func (b *bencher) floor(ctx context.Context, execs, spawns int) (rt, rtMissing, spawnTrue, spawnPy series, err error) {
	sb, err := b.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: b.vcpus, MemoryMiB: b.mem, TimeoutSeconds: 600})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	defer b.done(ctx, []string{sb.ID})
	if rt, err = b.execRoundTrip(ctx, sb.ID, execs); err != nil {
		return nil, nil, nil, nil, err
	}
	if rtMissing, err = b.execSeries(ctx, sb.ID, execs, missing); err != nil {
		return nil, nil, nil, nil, err
	}
	if spawnTrue, err = spawnFloor(ctx, b.c, sb.ID, spawns, "/bin/true"); err != nil {
		return nil, nil, nil, nil, err
	}
	if spawnPy, err = spawnFloor(ctx, b.c, sb.ID, spawns, "/usr/bin/python3", "-c", "print(1)"); err != nil {
		return nil, nil, nil, nil, err
	}
	return rt, rtMissing, spawnTrue, spawnPy, nil
}

// floorRT times n exec round trips of `true` on a new sandbox.
func (b *bencher) floorRT(ctx context.Context, n int) (series, error) {
	sb, err := b.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: b.vcpus, MemoryMiB: b.mem, TimeoutSeconds: 600})
	if err != nil {
		return nil, err
	}
	defer b.done(ctx, []string{sb.ID})
	return b.execRoundTrip(ctx, sb.ID, n)
}

// pauseResume times n pauses of one sandbox, and the resumes after them
// up to a command answered.
func (b *bencher) pauseResume(ctx context.Context, n int) (pause, resume series, err error) {
	sb, err := b.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: b.vcpus, MemoryMiB: b.mem, TimeoutSeconds: 3600})
	if err != nil {
		return nil, nil, err
	}
	defer b.done(ctx, []string{sb.ID})
	for range n {
		start := time.Now()
		if _, err := b.c.PauseSandbox(ctx, sb.ID); err != nil {
			return nil, nil, err
		}
		pause = append(pause, time.Since(start))
		start = time.Now()
		if _, err := b.c.ResumeSandbox(ctx, sb.ID); err != nil {
			return nil, nil, err
		}
		if err := expect(ctx, b.c, sb.ID, echoProbe, "probe\n"); err != nil {
			return nil, nil, err
		}
		resume = append(resume, time.Since(start))
	}
	return pause, resume, nil
}

func (b *bencher) execRoundTrip(ctx context.Context, id string, n int) (series, error) {
	return b.execSeries(ctx, id, n, api.ExecRequest{Cmd: api.Command{Argv: []string{"true"}}})
}

// execSeries times n execs of req, after 10 that open connections; a
// command that is not found must answer 127.
func (b *bencher) execSeries(ctx context.Context, id string, n int, req api.ExecRequest) (series, error) {
	var s series
	for i := 0; i < n+10; i++ {
		start := time.Now()
		res, err := b.c.Exec(ctx, id, req, client.ExecOptions{})
		if err != nil {
			return nil, err
		}
		if want := wantExit(req); res.ExitCode != want {
			return nil, fmt.Errorf("%v exited %d, want %d", req.Cmd.Argv, res.ExitCode, want)
		}
		if i >= 10 { // the first calls open connections
			s = append(s, time.Since(start))
		}
	}
	return s, nil
}

// missing is a command no sandbox has: its exec starts no process.
var missing = api.ExecRequest{Cmd: api.Command{Argv: []string{"withruntime-bench-no-such-command"}}}

func wantExit(req api.ExecRequest) int {
	if req.Cmd.Argv[0] == missing.Cmd.Argv[0] {
		return 127
	}
	return 0
}

// idleMemory starts n idle sandboxes and returns the mean memory their
// cgroups (under parent: withruntime, or withruntime-vm for microVMs)
// hold on the host, in MiB.
func (b *bencher) idleMemory(ctx context.Context, n int, parent string) (float64, error) {
	var ids []string
	defer func() { b.done(ctx, ids) }()
	for i := 0; i < n; i++ {
		sb, err := b.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: b.vcpus, MemoryMiB: b.mem, TimeoutSeconds: 600})
		if err != nil {
			return 0, err
		}
		ids = append(ids, sb.ID)
		if _, err := b.c.Exec(ctx, sb.ID, python, client.ExecOptions{}); err != nil {
			return 0, err
		}
	}
	time.Sleep(2 * time.Second)
	var total float64
	for _, id := range ids {
		data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", parent, id, "memory.usage_in_bytes"))
		if err != nil {
			data, err = os.ReadFile(filepath.Join("/sys/fs/cgroup", parent, id, "memory.current"))
		}
		if err != nil {
			return 0, fmt.Errorf("reading memory of %s: %w", id, err)
		}
		v, _ := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
		total += v
	}
	return total / float64(len(ids)) / (1 << 20), nil
}
