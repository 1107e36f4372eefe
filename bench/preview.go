package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// The preview figures (-preview N): what the path-form preview proxy
// (/v1/sandboxes/{id}/ports/{port}/...: API server -> a new agent
// connection -> the sandbox's 127.0.0.1) costs, against a direct
// connection to the same in-sandbox server from inside the sandbox's own
// network (its loopback, what the agent dials). Both ends are
// bench/previewload, built here static: its server runs in the sandbox,
// and the same client code measures once on the host through the proxy
// and once in the sandbox (exec) against 127.0.0.1, in the same run.
// Both clients keep their connections alive; the proxy opens a
// connection into the sandbox per request all the same.

const (
	previewBenchPort = 8000
	previewBigSize   = 100 << 20
	// previewConns is the parallel clients of the requests/s figure.
	previewConns = 8
	// previewRateSeconds is how long a requests/s figure runs.
	previewRateSeconds = 5
)

type previewFigures struct {
	proxied, direct         series
	proxiedRate, directRate float64
	proxiedMBps, directMBps float64
	n, downloads            int
}

func previewRun(ctx context.Context, c config) error {
	tmp, err := os.MkdirTemp("", "withruntime-bench-preview-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	load := filepath.Join(tmp, "previewload")
	build := exec.CommandContext(ctx, "go", "build", "-o", load, "./bench/previewload")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building bench/previewload (run the bench from the checkout's root): %v\n%s", err, out)
	}
	s, err := startServer(ctx, c.cache, c.overcommit, nil, nil)
	if err != nil {
		return err
	}
	defer s.done()
	b := &bencher{c: s.c, vcpus: c.vcpus, mem: c.mem, fresh: newFreshness()}
	f, err := b.preview(ctx, load, s.srv.URL, s.srv.AdminKey, c.preview, c.downloads)
	if err != nil {
		return err
	}
	f.print()
	return nil
}

func (b *bencher) preview(ctx context.Context, load, apiURL, key string, n, downloads int) (*previewFigures, error) {
	sb, err := b.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: b.vcpus, MemoryMiB: b.mem, TimeoutSeconds: 1800})
	if err != nil {
		return nil, err
	}
	defer b.c.StopSandbox(context.WithoutCancel(ctx), sb.ID)
	bin, err := os.Open(load)
	if err != nil {
		return nil, err
	}
	defer bin.Close()
	if _, err := b.c.WriteFile(ctx, sb.ID, "/tmp/previewload", bin, 0o755); err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(previewBenchPort)
	if _, err := b.c.StartProcess(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"/tmp/previewload", "serve", addr}}, Background: true}); err != nil {
		return nil, err
	}
	proxied := fmt.Sprintf("%s/v1/sandboxes/%s/ports/%d/", apiURL, sb.ID, previewBenchPort)
	direct := "http://" + addr + "/"
	auth := "Authorization: Bearer " + key
	// Until the server in the sandbox answers through the proxy.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := hostLoad(ctx, load, "get", proxied, "1", auth)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the in-sandbox server never answered through the proxy: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	inSandbox := func(args ...string) ([]string, error) {
		res, err := b.c.Exec(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Argv: append([]string{"/tmp/previewload"}, args...)}, TimeoutMs: (10 * time.Minute).Milliseconds()}, client.ExecOptions{})
		if err != nil {
			return nil, err
		}
		if res.ExitCode != 0 {
			return nil, fmt.Errorf("previewload %v in the sandbox exited %d: %s", args, res.ExitCode, lastLines(res.Stderr, 5))
		}
		return strings.Fields(res.Stdout), nil
	}
	f := &previewFigures{n: n, downloads: downloads}
	// Latency: the two series interleaved in halves, so that neither
	// gets the quieter half of the run.
	for half := 0; half < 2; half++ {
		out, err := hostLoad(ctx, load, "get", proxied, strconv.Itoa(n/2), auth)
		if err != nil {
			return nil, err
		}
		if f.proxied, err = appendMicros(f.proxied, out); err != nil {
			return nil, err
		}
		if out, err = inSandbox("get", direct, strconv.Itoa(n/2)); err != nil {
			return nil, err
		}
		if f.direct, err = appendMicros(f.direct, out); err != nil {
			return nil, err
		}
	}
	conns, secs := strconv.Itoa(previewConns), strconv.Itoa(previewRateSeconds)
	out, err := hostLoad(ctx, load, "rate", proxied, conns, secs, auth)
	if err != nil {
		return nil, err
	}
	f.proxiedRate = floats(out)[0]
	if out, err = inSandbox("rate", direct, conns, secs); err != nil {
		return nil, err
	}
	f.directRate = floats(out)[0]
	big := fmt.Sprintf("big?n=%d", previewBigSize)
	if out, err = hostLoad(ctx, load, "download", proxied+big, strconv.Itoa(downloads), auth); err != nil {
		return nil, err
	}
	f.proxiedMBps = median(floats(out))
	if out, err = inSandbox("download", direct+big, strconv.Itoa(downloads)); err != nil {
		return nil, err
	}
	f.directMBps = median(floats(out))
	return f, nil
}

// hostLoad runs previewload on the host and returns its output's fields.
func hostLoad(ctx context.Context, load string, args ...string) ([]string, error) {
	cmd := exec.CommandContext(ctx, load, args...)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("previewload %s on the host: %v: %s", args[0], err, errb.String())
	}
	return strings.Fields(string(out)), nil
}

func appendMicros(s series, fields []string) (series, error) {
	for _, f := range fields {
		us, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("previewload printed %q", f)
		}
		s = append(s, time.Duration(us)*time.Microsecond)
	}
	return s, nil
}

func floats(fields []string) []float64 {
	v := make([]float64, 0, len(fields))
	for _, f := range fields {
		x, _ := strconv.ParseFloat(f, 64)
		v = append(v, x)
	}
	if len(v) == 0 {
		v = append(v, 0)
	}
	return v
}

func (f *previewFigures) print() {
	fmt.Printf("%-62s %10s %10s %10s %6s\n", "preview figure (same Go client and server, same run)", "p50", "p90", "p99", "n")
	row := func(name string, s series) {
		fmt.Printf("%-62s %10s %10s %10s %6d\n", name, fineMs(s.pct(0.5)), fineMs(s.pct(0.9)), fineMs(s.pct(0.99)), len(s))
	}
	row("GET 1 KB: host -> path-form proxy -> agent -> sandbox 127.0.0.1", f.proxied)
	row("GET 1 KB: in the sandbox -> its own 127.0.0.1 (direct)", f.direct)
	fmt.Printf("%-62s %10s\n", "proxy adds (median)", fineMs(f.proxied.pct(0.5)-f.direct.pct(0.5)))
	fmt.Printf("%-62s %10.0f req/s\n", fmt.Sprintf("GET 1 KB, %d clients for %ds: through the proxy", previewConns, previewRateSeconds), f.proxiedRate)
	fmt.Printf("%-62s %10.0f req/s\n", fmt.Sprintf("GET 1 KB, %d clients for %ds: direct, in the sandbox", previewConns, previewRateSeconds), f.directRate)
	fmt.Printf("%-62s %10.0f MB/s (median of %d)\n", "100 MB download: through the proxy", f.proxiedMBps, f.downloads)
	fmt.Printf("%-62s %10.0f MB/s (median of %d)\n", "100 MB download: direct, in the sandbox", f.directMBps, f.downloads)
}
