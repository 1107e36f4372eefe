// Command bench measures withruntime on this machine and prints the figures
// side by side with the raw runsc baseline measured in the same run:
//
//   - create request to first `python3 -c 'print(1)'` answered, through the
//     API on loopback, sequentially and in bursts of parallel creates;
//   - exec round trip of `true` on a live sandbox;
//   - resident memory per idle sandbox on the host;
//   - raw runsc CLI (create, start, exec) with the same runsc and image;
//   - request latency and 100 MB download throughput through the egress
//     proxy, against a direct connection to the same upstream (an HTTP
//     server in a network namespace of its own, on 198.18.99.2).
//
// It needs root, runsc and the image (`withruntime setup`). Run:
//
//	go run ./bench -n 30
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"time"

	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/manager"
	"github.com/withruntime/withruntime/internal/server"
)

func main() {
	n := flag.Int("n", 30, "sandboxes per first-command series")
	burst := flag.Int("burst", 10, "parallel creates per burst")
	execs := flag.Int("execs", 300, "exec round trips")
	idle := flag.Int("idle", 10, "idle sandboxes for the memory figure")
	cache := flag.String("cache-dir", server.DefaultCacheDir, "shared cache with runsc and the image")
	vcpus := flag.Int("vcpus", 2, "sandbox size: vCPUs")
	mem := flag.Int("memory", 4096, "sandbox size: MiB")
	requests := flag.Int("requests", 1000, "HTTP requests per egress latency series")
	downloads := flag.Int("downloads", 3, "100 MB downloads per egress throughput figure")
	flag.Parse()
	if err := run(*n, *burst, *execs, *idle, *cache, *vcpus, *mem, *requests, *downloads); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(n, burst, execs, idle int, cache string, vcpus, mem, requests, downloads int) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "withruntime-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	up, err := startUpstream()
	if err != nil {
		return fmt.Errorf("egress upstream: %w", err)
	}
	defer up.Close()
	srv, err := server.Start(ctx, server.Config{
		Listen: "127.0.0.1:0", DataDir: dir, CacheDir: cache, Quiet: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		// Bursts of default-size sandboxes exceed a 2-core host's real
		// size; the benchmark measures start-up, not admission.
		Manager: manager.Config{Overcommit: 64},
		// What `serve --egress-hosts` does: the resolver knows the
		// upstream's name.
		EgressHosts: up.hostsFile,
		// The upstream's prefix is on the blocklist; serve
		// --egress-permit opens it.
		EgressPermit: []netip.Prefix{upstreamNet},
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	c, err := client.New(client.WithBaseURL(srv.URL), client.WithAPIKey(srv.AdminKey))
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	fmt.Printf("withruntime bench: %s, %d CPUs, %s, sandbox %d vCPU %d MiB, %s\n\n",
		host, runtime.NumCPU(), runtime.Version(), vcpus, mem, time.Now().UTC().Format(time.RFC3339))

	b := &bencher{c: c, vcpus: vcpus, mem: mem}
	b.warm(ctx)
	seq, err := b.firstCommandSequential(ctx, n)
	if err != nil {
		return err
	}
	par, err := b.firstCommandBursts(ctx, n, burst)
	if err != nil {
		return err
	}
	rt, err := b.execRoundTrip(ctx, execs)
	if err != nil {
		return err
	}
	rss, err := b.idleMemory(ctx, idle)
	if err != nil {
		return err
	}
	raw, err := rawRunsc(ctx, cache, n)
	if err != nil {
		return fmt.Errorf("raw runsc baseline: %w", err)
	}
	eg, err := b.egress(ctx, requests, downloads)
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}

	fmt.Printf("%-52s %10s %10s %10s %6s\n", "figure", "median", "p95", "p99", "n")
	seq.print("create -> first python3 answered (sequential)")
	par.print(fmt.Sprintf("create -> first python3 answered (bursts of %d)", burst))
	raw.print("raw runsc create+start+exec python3 (baseline)")
	rt.print("exec round trip `true` on a live sandbox")
	eg.print()
	fmt.Printf("\n%-52s %10.1f MiB (cgroup memory of %d idle sandboxes, each)\n", "host memory per idle sandbox", rss, idle)
	fmt.Printf("%-52s %10s\n", "product documents' headline (create -> first cmd)", "351 ms")
	return nil
}
