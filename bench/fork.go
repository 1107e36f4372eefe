package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/server"
)

// The fork figures (-fork N, N rounds of each): in one run, on one server,
//   - a snapshot's time (the API call), its freeze and its size against
//     the memory the sandbox's processes hold (a Python process holding
//     0, 256 and 1024 MiB of written pages);
//   - a fork of n = 1, 4 and 16 (request -> every fork answered `true`)
//     against n cold creates in parallel (request -> each answered `true`)
//     timed the same way;
//   - the host memory (PSS of every process of each sandbox) of 4 forks of
//     a sandbox holding 256 MiB against 4 cold sandboxes that each hold
//     the same 256 MiB.

// forkSizes are the fork counts measured.
var forkSizes = []int{1, 4, 16}

// forkHeldMiB are the memory figures a snapshot is measured at.
var forkHeldMiB = []int{0, 256, 1024}

func forkRun(ctx context.Context, c config) error {
	s, err := startServer(ctx, c.cache, c.overcommit, nil, nil, func(cfg *server.Config) {
		cfg.Manager.DefaultConcurrency = 64
	})
	if err != nil {
		return err
	}
	defer s.done()
	f := &forker{c: s.c, url: s.srv.URL, key: s.srv.AdminKey, vcpus: 1, mem: 2048}
	fmt.Printf("forks: %d rounds each, sandboxes of 1 vCPU and 2048 MiB\n", c.fork)
	header()
	for _, held := range forkHeldMiB {
		var took, freeze series
		var sizes []float64
		for range c.fork {
			d, fr, size, err := f.snapshotOnce(ctx, held)
			if err != nil {
				return err
			}
			took, freeze, sizes = append(took, d), append(freeze, fr), append(sizes, float64(size)/(1<<20))
		}
		took.print(fmt.Sprintf("snapshot, %d MiB held: the call", held))
		freeze.print(fmt.Sprintf("snapshot, %d MiB held: freeze", held))
		sort.Float64s(sizes)
		fmt.Printf("%-58s %8.1f MiB\n", fmt.Sprintf("snapshot, %d MiB held: size (median)", held), sizes[len(sizes)/2])
	}
	for _, n := range forkSizes {
		var forks, colds series
		for range c.fork {
			d, err := f.forkOnce(ctx, n)
			if err != nil {
				return err
			}
			forks = append(forks, d)
			d, err = f.coldOnce(ctx, n)
			if err != nil {
				return err
			}
			colds = append(colds, d)
		}
		forks.print(fmt.Sprintf("fork of %d: request -> all answer", n))
		colds.print(fmt.Sprintf("%d cold creates: request -> all answer", n))
	}
	var restored, booted, warm series
	for range c.fork {
		r, b, w, err := f.firstPython(ctx)
		if err != nil {
			return err
		}
		restored, booted, warm = append(restored, r), append(booted, b), append(warm, w)
	}
	restored.print("first python3 in a fork of a warmed sandbox")
	booted.print("first python3 in a booted sandbox")
	warm.print("python3 again in a warmed sandbox (floor)")
	forkMiB, coldMiB, err := f.memory(ctx, s.dir, 4, 256)
	if err != nil {
		return err
	}
	fmt.Printf("%-58s %8.1f MiB\n", "host memory of 4 forks (256 MiB held), PSS sum", forkMiB)
	fmt.Printf("%-58s %8.1f MiB\n", "host memory of 4 cold sandboxes (256 MiB held each)", coldMiB)
	return nil
}

type forker struct {
	c          *client.Client
	url, key   string
	vcpus, mem int
}

// post sends a JSON body and decodes a 2xx answer into out.
func (f *forker) post(ctx context.Context, path string, body, out any) error {
	data, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+f.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	ans, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, ans)
	}
	return json.Unmarshal(ans, out)
}

// source makes a sandbox whose Python process holds held MiB of written
// pages.
func (f *forker) source(ctx context.Context, held int) (string, error) {
	sb, err := f.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: f.vcpus, MemoryMiB: f.mem, TimeoutSeconds: 1800})
	if err != nil {
		return "", err
	}
	if held > 0 {
		hold := fmt.Sprintf(`python3 -c "import time; b = bytearray(%d << 20); b[::4096] = b'x' * len(b[::4096]); open('/tmp/held', 'w').close(); time.sleep(3600)" >/dev/null 2>&1 & while [ ! -e /tmp/held ]; do sleep 0.05; done`, held)
		if err := f.sh(ctx, sb.ID, hold); err != nil {
			f.c.StopSandbox(ctx, sb.ID)
			return "", err
		}
	}
	return sb.ID, nil
}

func (f *forker) sh(ctx context.Context, id, cmd string) error {
	res, err := f.c.Exec(ctx, id, api.ExecRequest{Cmd: api.Command{Shell: cmd}, TimeoutMs: 120_000}, client.ExecOptions{})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("%q exited %d: %s", cmd, res.ExitCode, res.Stderr)
	}
	return err
}

func (f *forker) snapshotOnce(ctx context.Context, held int) (time.Duration, time.Duration, int64, error) {
	id, err := f.source(ctx, held)
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.c.StopSandbox(context.WithoutCancel(ctx), id)
	var snap api.Snapshot
	began := time.Now()
	if err := f.post(ctx, "/v1/sandboxes/"+id+"/snapshots", api.CreateSnapshotRequest{}, &snap); err != nil {
		return 0, 0, 0, err
	}
	d := time.Since(began)
	f.remove(ctx, snap.ID)
	return d, time.Duration(snap.FreezeMs) * time.Millisecond, snap.SizeBytes, nil
}

func (f *forker) remove(ctx context.Context, snapID string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, f.url+"/v1/snapshots/"+snapID, nil)
	req.Header.Set("Authorization", "Bearer "+f.key)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// answered runs `true` in every sandbox of ids, in parallel.
func (f *forker) answered(ctx context.Context, ids []string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f.sh(ctx, id, "true")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (f *forker) stopAll(ctx context.Context, ids []string) {
	for _, id := range ids {
		f.c.StopSandbox(context.WithoutCancel(ctx), id)
	}
}

// forkOnce times a fork of n, from the request until every fork answered.
func (f *forker) forkOnce(ctx context.Context, n int) (time.Duration, error) {
	src, err := f.source(ctx, 0)
	if err != nil {
		return 0, err
	}
	defer f.stopAll(ctx, []string{src})
	var res api.ForkResult
	began := time.Now()
	if err := f.post(ctx, "/v1/sandboxes/"+src+"/fork", api.ForkRequest{Count: n}, &res); err != nil {
		return 0, err
	}
	ids := make([]string, 0, n)
	for _, sb := range res.Sandboxes {
		ids = append(ids, sb.ID)
	}
	defer f.stopAll(ctx, ids)
	err = f.answered(ctx, ids)
	return time.Since(began), err
}

// coldOnce times n creates in parallel until each answered.
func (f *forker) coldOnce(ctx context.Context, n int) (time.Duration, error) {
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	errs := make([]error, n)
	began := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := f.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: f.vcpus, MemoryMiB: f.mem, TimeoutSeconds: 1800})
			if err != nil {
				errs[i] = err
				return
			}
			mu.Lock()
			ids = append(ids, sb.ID)
			mu.Unlock()
			errs[i] = f.sh(ctx, sb.ID, "true")
		}()
	}
	wg.Wait()
	d := time.Since(began)
	defer f.stopAll(ctx, ids)
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return d, nil
}

// memory is the host memory (PSS sums) of n forks of a sandbox that
// holds held MiB, and of n cold sandboxes that each hold as much; the
// source is stopped before the forks are measured.
func (f *forker) memory(ctx context.Context, dataDir string, n, held int) (forkMiB, coldMiB float64, err error) {
	sum := func() float64 {
		var t float64
		for _, v := range memberMemory(dataDir) {
			t += v
		}
		return t
	}
	src, err := f.source(ctx, held)
	if err != nil {
		return 0, 0, err
	}
	var res api.ForkResult
	err = f.post(ctx, "/v1/sandboxes/"+src+"/fork", api.ForkRequest{Count: n}, &res)
	f.c.StopSandbox(ctx, src)
	if err != nil {
		return 0, 0, err
	}
	var ids []string
	for _, sb := range res.Sandboxes {
		ids = append(ids, sb.ID)
	}
	time.Sleep(2 * time.Second)
	forkMiB = sum()
	f.stopAll(ctx, ids)
	ids = ids[:0]
	for range n {
		id, err := f.source(ctx, held)
		if err != nil {
			f.stopAll(ctx, ids)
			return 0, 0, err
		}
		ids = append(ids, id)
	}
	time.Sleep(2 * time.Second)
	coldMiB = sum()
	f.stopAll(ctx, ids)
	return forkMiB, coldMiB, nil
}

// pyOnce is the exec whose time the warm-restore figures compare.
const pyOnce = "python3 -c 'print(1)'"

// timed runs cmd in id and returns how long the exec took.
func (f *forker) timed(ctx context.Context, id, cmd string) (time.Duration, error) {
	began := time.Now()
	err := f.sh(ctx, id, cmd)
	return time.Since(began), err
}

// firstPython times, in one round: the first python3 in a fork of a
// sandbox that ran sh, python3 and node once (its caches warm when it was
// saved), the first python3 in a sandbox booted afresh, and python3 run
// again in the warmed source (the floor a warm sandbox gives).
func (f *forker) firstPython(ctx context.Context) (restored, booted, warm time.Duration, err error) {
	src, err := f.source(ctx, 0)
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.stopAll(ctx, []string{src})
	if err := f.sh(ctx, src, "sh -c true && "+pyOnce+" && node -e 0"); err != nil {
		return 0, 0, 0, err
	}
	if warm, err = f.timed(ctx, src, pyOnce); err != nil {
		return 0, 0, 0, err
	}
	var res api.ForkResult
	if err := f.post(ctx, "/v1/sandboxes/"+src+"/fork", api.ForkRequest{Count: 1}, &res); err != nil {
		return 0, 0, 0, err
	}
	defer f.stopAll(ctx, []string{res.Sandboxes[0].ID})
	if restored, err = f.timed(ctx, res.Sandboxes[0].ID, pyOnce); err != nil {
		return 0, 0, 0, err
	}
	cold, err := f.source(ctx, 0)
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.stopAll(ctx, []string{cold})
	booted, err = f.timed(ctx, cold, pyOnce)
	return restored, booted, warm, err
}
