package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

type bencher struct {
	c          *client.Client
	vcpus, mem int
}

var python = api.ExecRequest{Cmd: api.Command{Argv: []string{"python3", "-c", "print(1)"}}}

// firstCommand creates a sandbox and runs the first Python command in it,
// returning the time from the create request to the answer.
func (b *bencher) firstCommand(ctx context.Context) (time.Duration, string, error) {
	start := time.Now()
	sb, err := b.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: b.vcpus, MemoryMiB: b.mem, TimeoutSeconds: 600})
	if err != nil {
		return 0, "", err
	}
	res, err := b.c.Exec(ctx, sb.ID, python, client.ExecOptions{})
	d := time.Since(start)
	if err != nil {
		return 0, sb.ID, err
	}
	if res.Stdout != "1\n" {
		return 0, sb.ID, fmt.Errorf("python answered %q", res.Stdout)
	}
	return d, sb.ID, nil
}

// warm runs one sandbox so that caches (page cache of the image and runsc)
// are as they are on a host in use.
func (b *bencher) warm(ctx context.Context) {
	if _, id, err := b.firstCommand(ctx); id != "" && err == nil {
		b.c.StopSandbox(ctx, id)
	}
}

func (b *bencher) firstCommandSequential(ctx context.Context, n int) (series, error) {
	var s series
	for i := 0; i < n; i++ {
		d, id, err := b.firstCommand(ctx)
		if id != "" {
			b.c.StopSandbox(ctx, id)
		}
		if err != nil {
			return nil, err
		}
		s = append(s, d)
	}
	return s, nil
}

func (b *bencher) firstCommandBursts(ctx context.Context, n, burst int) (series, error) {
	var s series
	for len(s) < n {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		ids := []string{}
		for i := 0; i < burst; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, id, err := b.firstCommand(ctx)
				mu.Lock()
				defer mu.Unlock()
				if id != "" {
					ids = append(ids, id)
				}
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					s = append(s, d)
				}
			}()
		}
		wg.Wait()
		for _, id := range ids {
			b.c.StopSandbox(ctx, id)
		}
		if firstErr != nil {
			return nil, firstErr
		}
	}
	return s, nil
}

func (b *bencher) execRoundTrip(ctx context.Context, n int) (series, error) {
	sb, err := b.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: b.vcpus, MemoryMiB: b.mem, TimeoutSeconds: 600})
	if err != nil {
		return nil, err
	}
	defer b.c.StopSandbox(ctx, sb.ID)
	req := api.ExecRequest{Cmd: api.Command{Argv: []string{"true"}}}
	var s series
	for i := 0; i < n+10; i++ {
		start := time.Now()
		res, err := b.c.Exec(ctx, sb.ID, req, client.ExecOptions{})
		if err != nil {
			return nil, err
		}
		if res.ExitCode != 0 {
			return nil, fmt.Errorf("true exited %d", res.ExitCode)
		}
		if i >= 10 { // the first calls open connections
			s = append(s, time.Since(start))
		}
	}
	return s, nil
}

// idleMemory starts n idle sandboxes and returns the mean memory their
// cgroups hold on the host, in MiB.
func (b *bencher) idleMemory(ctx context.Context, n int) (float64, error) {
	var ids []string
	defer func() {
		for _, id := range ids {
			b.c.StopSandbox(ctx, id)
		}
	}()
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
		data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory/withruntime", id, "memory.usage_in_bytes"))
		if err != nil {
			data, err = os.ReadFile(filepath.Join("/sys/fs/cgroup/withruntime", id, "memory.current"))
		}
		if err != nil {
			return 0, fmt.Errorf("reading memory of %s: %w", id, err)
		}
		v, _ := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
		total += v
	}
	return total / float64(len(ids)) / (1 << 20), nil
}
