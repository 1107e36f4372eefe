package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// egressFigures are what a request through the egress proxy costs, read
// against a direct connection on the same machine.
type egressFigures struct {
	direct   series // host -> upstream, Go, new connection each
	proxied  series // sandbox -> proxy -> upstream, Python, new connection each
	loopback series // sandbox -> its own 127.0.0.1, the same script
	dns      series // the name lookup alone, in the sandbox
	// MB/s of the 100 MB body, median of downloads.
	proxiedMBps, directMBps float64
	downloads               int
}

// requestScript makes N GET requests, each on a new connection, and prints
// each duration in microseconds. In mode "dns" it times only the name
// lookup that each request makes first.
const requestScript = `
import http.client, socket, sys, time
mode, host, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def get():
    c = http.client.HTTPConnection(host, port, timeout=10)
    try:
        c.request("GET", "/")
        r = c.getresponse()
        r.read()
        if r.status != 200:
            sys.exit("GET http://%s:%d/: status %d" % (host, port, r.status))
    finally:
        c.close()
def lookup():
    socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
one = lookup if mode == "dns" else get
deadline = time.monotonic() + 10
while True:  # the server may still be starting
    try:
        one()
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
for _ in range(10):  # warm up
    one()
for _ in range(n):
    t = time.perf_counter_ns()
    one()
    print((time.perf_counter_ns() - t) // 1000)
`

// egress measures request latency and download throughput from a sandbox
// through the proxy to the upstream, and directly from the host to it.
func (b *bencher) egress(ctx context.Context, requests, downloads int) (*egressFigures, error) {
	f := &egressFigures{downloads: downloads}
	var err error
	if f.direct, err = directRequests(ctx, requests); err != nil {
		return nil, fmt.Errorf("host -> upstream: %w", err)
	}
	if f.directMBps, err = directDownloads(ctx, downloads); err != nil {
		return nil, fmt.Errorf("host -> upstream download: %w", err)
	}

	sb, err := b.c.CreateSandbox(ctx, api.CreateSandboxRequest{
		VCPUs: b.vcpus, MemoryMiB: b.mem, TimeoutSeconds: 1800,
		Network: &api.Network{Internet: true, Allow: []string{upstreamName}},
	})
	if err != nil {
		return nil, err
	}
	defer b.c.StopSandbox(context.WithoutCancel(ctx), sb.ID)

	if f.proxied, err = b.scriptRequests(ctx, sb.ID, "get", upstreamName, 80, requests); err != nil {
		return nil, fmt.Errorf("sandbox -> upstream: %w", err)
	}
	if f.dns, err = b.scriptRequests(ctx, sb.ID, "dns", upstreamName, 80, requests); err != nil {
		return nil, fmt.Errorf("sandbox DNS: %w", err)
	}
	// The baseline inside: a server on the sandbox's own loopback, so that
	// gVisor's network stack and Python's cost are read apart from the
	// proxy's.
	const port = 8000
	srv, err := b.c.StartProcess(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Shell: fmt.Sprintf(
		"mkdir -p /tmp/lo && printf 'ok\\n' > /tmp/lo/index.html && "+
			"exec python3 -m http.server %d --bind 127.0.0.1 --directory /tmp/lo >/dev/null 2>&1", port)}})
	if err != nil {
		return nil, fmt.Errorf("starting the loopback server: %w", err)
	}
	defer b.c.KillProcess(context.WithoutCancel(ctx), sb.ID, srv.Pid)
	if f.loopback, err = b.scriptRequests(ctx, sb.ID, "get", "127.0.0.1", port, requests); err != nil {
		return nil, fmt.Errorf("sandbox loopback: %w", err)
	}

	if f.proxiedMBps, err = b.sandboxDownloads(ctx, sb.ID, downloads); err != nil {
		return nil, fmt.Errorf("sandbox -> upstream download: %w", err)
	}
	return f, nil
}

// scriptRequests runs requestScript once in the sandbox and reads its n
// durations.
func (b *bencher) scriptRequests(ctx context.Context, id, mode, host string, port, n int) (series, error) {
	res, err := b.c.Exec(ctx, id, api.ExecRequest{
		Cmd:       api.Command{Argv: []string{"python3", "-c", requestScript, mode, host, strconv.Itoa(port), strconv.Itoa(n)}},
		TimeoutMs: (10 * time.Minute).Milliseconds(),
	}, client.ExecOptions{})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("script exited %d: %s%s", res.ExitCode, lastLines(res.Stderr, 5), b.egressLog(ctx, id))
	}
	var s series
	for _, line := range strings.Fields(res.Stdout) {
		us, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("script printed %q", line)
		}
		s = append(s, time.Duration(us)*time.Microsecond)
	}
	if len(s) != n {
		return nil, fmt.Errorf("script printed %d durations, want %d", len(s), n)
	}
	return s, nil
}

// sandboxDownloads fetches /big with curl in the sandbox, through the
// proxy, and returns the median speed in MB/s.
func (b *bencher) sandboxDownloads(ctx context.Context, id string, n int) (float64, error) {
	var speeds []float64
	for i := 0; i < n; i++ {
		res, err := b.c.Exec(ctx, id, api.ExecRequest{
			Cmd: api.Command{Argv: []string{"curl", "-sS", "-o", "/dev/null",
				"-w", "%{http_code} %{size_download} %{speed_download}",
				"http://" + upstreamName + "/big"}},
			TimeoutMs: (5 * time.Minute).Milliseconds(),
		}, client.ExecOptions{})
		if err != nil {
			return 0, err
		}
		if res.ExitCode != 0 {
			return 0, fmt.Errorf("curl exited %d: %s%s", res.ExitCode, lastLines(res.Stderr, 5), b.egressLog(ctx, id))
		}
		var code, size int64
		var speed float64
		if _, err := fmt.Sscan(res.Stdout, &code, &size, &speed); err != nil {
			return 0, fmt.Errorf("curl printed %q", res.Stdout)
		}
		if code != 200 || size != bigSize {
			return 0, fmt.Errorf("curl got status %d, %d bytes; want 200, %d", code, size, bigSize)
		}
		speeds = append(speeds, speed/1e6)
	}
	return median(speeds), nil
}

// hostClient talks to the upstream directly: a new connection per request,
// and never a proxy from the environment.
func hostClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}, Timeout: 5 * time.Minute}
}

func getDirect(ctx context.Context, c *http.Client, path string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+upstreamAddr.String()+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return n, err
	}
	if resp.StatusCode != http.StatusOK {
		return n, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return n, nil
}

func directRequests(ctx context.Context, n int) (series, error) {
	c := hostClient()
	var s series
	for i := 0; i < n+10; i++ {
		start := time.Now()
		if _, err := getDirect(ctx, c, "/"); err != nil {
			return nil, err
		}
		if i >= 10 { // warm-up, as in the script
			s = append(s, time.Since(start))
		}
	}
	return s, nil
}

func directDownloads(ctx context.Context, n int) (float64, error) {
	c := hostClient()
	var speeds []float64
	for i := 0; i < n; i++ {
		start := time.Now()
		size, err := getDirect(ctx, c, "/big")
		if err != nil {
			return 0, err
		}
		if size != bigSize {
			return 0, fmt.Errorf("got %d bytes, want %d", size, bigSize)
		}
		speeds = append(speeds, float64(size)/1e6/time.Since(start).Seconds())
	}
	return median(speeds), nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// egressLog is the end of the sandbox's egress log, for an error message.
func (b *bencher) egressLog(ctx context.Context, id string) string {
	events, err := b.c.Egress(ctx, id)
	if err != nil {
		return "\n(egress log: " + err.Error() + ")"
	}
	if len(events) > 5 {
		events = events[len(events)-5:]
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\negress log, last %d events:", len(events))
	for _, ev := range events {
		fmt.Fprintf(&sb, "\n  %s %s %s %s:%d %s %s", ev.Time.Format("15:04:05.000"), ev.Kind, ev.Name, ev.Address, ev.Port, ev.Verdict, ev.Reason)
	}
	return sb.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// fineMs is ms with the resolution that sub-millisecond figures need.
func fineMs(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000) }

func (s series) printFine(name string) {
	fmt.Printf("%-58s %10s %10s %10s %6d\n", name, fineMs(s.pct(0.5)), fineMs(s.pct(0.95)), fineMs(s.pct(0.99)), len(s))
}

// print writes the figures' lines of the table.
func (f *egressFigures) print() {
	f.direct.printFine("GET, new conn: host -> upstream (direct)")
	f.proxied.printFine("GET, new conn: sandbox -> proxy -> upstream")
	f.loopback.printFine("GET, new conn: sandbox -> own 127.0.0.1 (baseline)")
	f.dns.printFine("  name lookup alone (part of sandbox -> upstream)")
	fmt.Printf("%-58s %10s\n", "proxy adds (sandbox->upstream - loopback, median)", fineMs(f.proxied.pct(0.5)-f.loopback.pct(0.5)))
	fmt.Printf("%-58s %10.0f MB/s (median of %d)\n", "100 MB download: sandbox -> proxy -> upstream (curl)", f.proxiedMBps, f.downloads)
	fmt.Printf("%-58s %10.0f MB/s (median of %d)\n", "100 MB download: host -> upstream (direct, Go)", f.directMBps, f.downloads)
}
