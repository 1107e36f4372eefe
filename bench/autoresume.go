package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/withruntime/withruntime/api"
)

// The auto-resume figures (-autoresume N): what the first call on a paused
// sandbox created with auto_resume costs (the wake: a restore of its
// checkpoint, then the call), against the same call on it running, and
// against an explicit resume call followed by the command, in the same
// run, samples interleaved. Calls are an exec of `echo ok` and a GET of a
// page that python3 -m http.server serves in the sandbox, through the
// path-form preview.

const autoResumePort = 8000

type autoResumeFigures struct {
	execWoken, execRunning, resumeThenExec series
	previewWoken, previewRunning           series
}

func autoResumeRun(ctx context.Context, c config) error {
	fmt.Printf("withruntime bench -autoresume, %s\n%s\n", time.Now().UTC().Format(time.RFC3339), machine(ctx, c.cache))
	s, err := startServer(ctx, c.cache, c.overcommit, nil, nil)
	if err != nil {
		return err
	}
	defer s.done()
	b := &bencher{c: s.c, vcpus: c.vcpus, mem: c.mem, fresh: newFreshness()}
	f, err := b.autoResume(ctx, s.srv.URL, s.srv.AdminKey, c.autoResume)
	if err != nil {
		return err
	}
	fmt.Printf("sandbox %dx%d, n %d, one sandbox paused by a call before each woken sample\n\n", c.vcpus, c.mem, c.autoResume)
	fmt.Printf("%-58s %10s %10s %10s %6s\n", "figure", "median", "p95", "p99", "n")
	f.execRunning.print("exec echo, running")
	f.execWoken.print("exec echo, paused with auto_resume (wake + exec)")
	f.resumeThenExec.print("resume call, then exec echo (explicit)")
	f.previewRunning.print("preview GET, running")
	f.previewWoken.print("preview GET, paused with auto_resume (wake + GET)")
	return nil
}

func (b *bencher) autoResume(ctx context.Context, apiURL, key string, n int) (*autoResumeFigures, error) {
	sb, err := b.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: b.vcpus, MemoryMiB: b.mem, TimeoutSeconds: 3600, AutoResume: true})
	if err != nil {
		return nil, err
	}
	defer b.done(context.WithoutCancel(ctx), []string{sb.ID})
	serve := api.Command{Argv: []string{"python3", "-m", "http.server", strconv.Itoa(autoResumePort), "--bind", "127.0.0.1", "--directory", "/etc"}}
	if _, err := b.c.StartProcess(ctx, sb.ID, api.ExecRequest{Cmd: serve, Background: true}); err != nil {
		return nil, err
	}
	page := fmt.Sprintf("%s/v1/sandboxes/%s/ports/%d/hostname", apiURL, sb.ID, autoResumePort)
	hc := &http.Client{Timeout: time.Minute}
	get := func() (time.Duration, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, page, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("GET %s: %s %s", page, resp.Status, body)
		}
		return time.Since(start), nil
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if _, err := get(); err == nil {
			break
		} else if time.Now().After(deadline) {
			return nil, fmt.Errorf("the in-sandbox server never answered: %v", err)
		}
	}
	exec := func() (time.Duration, error) {
		start := time.Now()
		err := expect(ctx, b.c, sb.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"echo", "ok"}}}, "ok\n")
		return time.Since(start), err
	}
	pause := func() error {
		_, err := b.c.PauseSandbox(ctx, sb.ID)
		return err
	}
	add := func(s *series, d time.Duration, err error) error {
		if err == nil {
			*s = append(*s, d)
		}
		return err
	}
	f := &autoResumeFigures{}
	for range n {
		steps := []func() error{
			pause,
			func() error { d, err := exec(); return add(&f.execWoken, d, err) },
			func() error { d, err := exec(); return add(&f.execRunning, d, err) },
			pause,
			func() error {
				start := time.Now()
				if _, err := b.c.ResumeSandbox(ctx, sb.ID); err != nil {
					return err
				}
				_, err := exec()
				return add(&f.resumeThenExec, time.Since(start), err)
			},
			pause,
			func() error { d, err := get(); return add(&f.previewWoken, d, err) },
			func() error { d, err := get(); return add(&f.previewRunning, d, err) },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return nil, err
			}
		}
	}
	return f, nil
}
