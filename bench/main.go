// Command bench measures withruntime on this machine and prints the figures
// side by side with the baselines measured in the same run:
//
//   - create request to the first command answered, through the API on
//     loopback, in two shapes (first `python3 -c 'print(1)'`; an `echo`
//     probe then `python3 --version`, the public leaderboard's) and three
//     modes (sequential; staggered, a create every 200 ms; bursts of
//     parallel creates), on a server with a warm pool (pool-hit rows) and
//     one without (`--pool none`, cold rows), and one burst larger than
//     the pool that must degrade to cold starts without errors;
//   - a freshness check on every sandbox handed out: no marker file of an
//     earlier user, no boot id seen twice (FAIL and exit status 1 if not);
//   - exec round trip of `true`, next to the in-sandbox spawn floor of
//     /bin/true and python3;
//   - host memory per idle sandbox and per idle pool member, the pool's
//     refill times (from the server's "pool member ready" log records);
//   - raw runsc CLI (create, start, exec) with the same runsc and image;
//   - request latency and 100 MB download throughput through the egress
//     proxy, against a direct connection to the same upstream (an HTTP
//     server in a network namespace of its own, on 198.18.99.2).
//
// It needs root, runsc and the image (`withruntime setup`). Run:
//
//	go run ./bench -n 30
//
// With -microvm N it compares the microVM tier with raw QEMU booting the
// same guest and with gVisor, all in the same run (see microvm.go).
//
// With -templates N it measures templates instead (see templates.go):
// builds cold, fully cached and with one changed step; create -> first
// command from a template against the default image, cold and pool hit;
// the disk of N templates sharing the default base.
//
// With -preview N it measures the preview URLs instead (see preview.go):
// request latency, requests per second and 100 MB downloads through the
// path-form proxy, against the same in-sandbox server reached directly
// from inside the sandbox, by the same client code.
//
// With -autoresume N it measures auto-resume instead (see autoresume.go):
// the first exec and preview request on a paused sandbox created with
// auto_resume, against the same calls on it running.
//
// With -ab DIR,DIR,... it compares caches (another agent or runsc) instead,
// samples interleaved: first python3 on a pool hit, exec of `true` and of
// a command not found, the spawn floor, and idle pool member memory.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

type config struct {
	n, burst, pool, bigBurst, execs, spawns, idle, requests, downloads int
	codeStarts, cells                                                  int
	ptyKeys                                                            int
	vcpus, mem                                                         int
	overcommit                                                         float64
	stagger, settle, refill                                            time.Duration
	cache                                                              string
	egress                                                             bool
	ab                                                                 string
	abProcs                                                            int
	microvm                                                            int
	microvmAccel                                                       string
	templates                                                          int
	preview                                                            int
	fork                                                               int
	autoResume                                                         int
}

func main() {
	var c config
	flag.IntVar(&c.n, "n", 30, "creates per series")
	flag.IntVar(&c.burst, "burst", 10, "parallel creates per burst")
	flag.IntVar(&c.pool, "pool", 10, "warm pool size of the pool server (--pool VCPUSxMEMORY=N)")
	flag.IntVar(&c.bigBurst, "big-burst", 0, "size of the burst beyond the pool (default twice the pool)")
	flag.DurationVar(&c.stagger, "stagger", 200*time.Millisecond, "interval between creates in staggered mode")
	flag.DurationVar(&c.settle, "settle", 90*time.Second, "longest wait for the pool to be warm")
	flag.DurationVar(&c.refill, "refill", 30*time.Second, "longest wait for the pool to refill between pool-hit samples (the fixed wait when the server logs no refills)")
	flag.IntVar(&c.execs, "execs", 300, "exec round trips")
	flag.IntVar(&c.spawns, "spawns", 100, "spawns per in-sandbox floor figure")
	flag.IntVar(&c.codeStarts, "code-starts", 5, "new code contexts timed to their first cell (kernel start)")
	flag.IntVar(&c.cells, "cells", 50, "cells timed on a warm kernel")
	flag.IntVar(&c.ptyKeys, "pty-keys", 100, "keystrokes timed to their echo on a terminal")
	flag.IntVar(&c.idle, "idle", 10, "idle sandboxes for the memory figure")
	flag.StringVar(&c.cache, "cache-dir", "/var/cache/withruntime", "shared cache with runsc and the image")
	flag.IntVar(&c.vcpus, "vcpus", 2, "sandbox size: vCPUs")
	flag.IntVar(&c.mem, "memory", 4096, "sandbox size: MiB")
	flag.Float64Var(&c.overcommit, "overcommit", 64, "the servers' --overcommit (bursts of default-size sandboxes exceed a 2-core host)")
	flag.IntVar(&c.requests, "requests", 1000, "HTTP requests per egress latency series")
	flag.IntVar(&c.downloads, "downloads", 3, "100 MB downloads per egress throughput figure")
	flag.BoolVar(&c.egress, "egress", true, "measure the egress proxy")
	flag.StringVar(&c.ab, "ab", "", "comma-separated cache dirs to compare (A/B): only first python3 on a pool hit, exec `true` and spawn /bin/true, interleaved")
	flag.IntVar(&c.abProcs, "ab-procs", 0, "with -ab: processes (sleeps) left running in each exec sandbox before the exec series")
	flag.IntVar(&c.microvm, "microvm", 0, "instead of the main run: compare the microVM tier (N creates, pauses and raw boots) with raw QEMU and gVisor, measured in the same run")
	flag.StringVar(&c.microvmAccel, "microvm-accel", "auto", "with -microvm: kvm, tcg, or auto (kvm when it boots the guest here)")
	flag.IntVar(&c.templates, "templates", 0, "instead of the main run: templates (snapshot, builds cold, cached and with a changed step, N creates from a template against N of the default image, cold and pool hit, and the disk of N templates sharing the base), measured in the same run")
	flag.IntVar(&c.preview, "preview", 0, "instead of the main run: preview URLs (N requests per latency series, -downloads 100 MB downloads), the path-form proxy against a direct connection to the same server in the sandbox, measured in the same run")
	flag.IntVar(&c.fork, "fork", 0, "instead of the main run: snapshots and forks (N rounds of each): a snapshot's time, freeze and size against the memory held, forks of 1, 4 and 16 against as many cold creates, and the host memory of 4 forks against 4 cold sandboxes, measured in the same run")
	flag.IntVar(&c.autoResume, "autoresume", 0, "instead of the main run: auto-resume (N samples of the first exec and preview request on a paused sandbox created with auto_resume, against the same on it running and an explicit resume then exec), measured in the same run")
	flag.Parse()
	if c.bigBurst == 0 {
		c.bigBurst = 2 * c.pool
	}
	if c.microvm > 0 {
		if err := microvmRun(context.Background(), c); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if c.autoResume > 0 {
		if err := autoResumeRun(context.Background(), c); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if c.preview > 0 {
		if err := previewRun(context.Background(), c); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if c.fork > 0 {
		if err := forkRun(context.Background(), c); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if c.templates > 0 {
		if err := templatesRun(context.Background(), c); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if c.ab != "" {
		if err := abRun(context.Background(), c, strings.Split(c.ab, ",")); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	fmt.Printf("withruntime bench, %s\n%s\n", time.Now().UTC().Format(time.RFC3339), machine(ctx, c.cache))
	fmt.Printf("sandbox %dx%d, --overcommit %g, pool server --pool %dx%d=%d, cold server --pool none, n %d, burst %d, big burst %d, settle wait up to %v, refill wait up to %v\n\n",
		c.vcpus, c.mem, c.overcommit, c.vcpus, c.mem, c.pool, c.n, c.burst, c.bigBurst, c.settle, c.refill)

	raw, err := rawRunsc(ctx, c.cache, c.n)
	if err != nil {
		return fmt.Errorf("raw runsc baseline: %w", err)
	}
	up, err := startUpstream()
	if err != nil {
		return fmt.Errorf("egress upstream: %w", err)
	}
	defer up.Close()
	fresh := newFreshness()

	cold, err := coldFigures(ctx, c, up, fresh)
	if err != nil {
		return err
	}
	pool, err := poolFigures(ctx, c, up, fresh)
	if err != nil {
		return err
	}

	fmt.Println()
	header()
	for _, r := range pool.rows {
		r.print("pool-hit")
	}
	if pool.big != nil {
		pool.big.print(fmt.Sprintf("pool, burst of %d > pool of %d", c.bigBurst, c.pool))
	}
	for _, r := range cold.rows {
		r.print("cold")
	}
	raw.print("raw runsc create+start+exec python3 (baseline)")
	cold.rt.print("exec round trip `true` on a live sandbox")
	cold.rtMissing.print("exec round trip of a command not found (no process)")
	cold.spawnTrue.print("in-sandbox spawn /bin/true (floor)")
	cold.spawnPy.print("in-sandbox spawn python3 -c 'print(1)' (floor)")
	cold.codeFirst.print("run_code `1 + 1` in a new context (kernel start)")
	cold.codeWarm.print("run_code `1 + 1` on a warm kernel")
	cold.ptyKeys.print("terminal keystroke round trip (typed to its echo)")
	if pool.watch != nil {
		pool.watch.report()
	}
	if cold.egress != nil {
		cold.egress.print()
	}
	fmt.Println()
	fmt.Printf("%-58s %10.1f MiB (cgroup memory of %d idle sandboxes, each)\n", "host memory per idle sandbox", cold.idleMiB, c.idle)
	if len(pool.memberMiB) > 0 {
		fmt.Printf("%-58s %10.1f MiB (PSS of its host processes, median of %d)\n", "host memory per idle pool member", median(pool.memberMiB), len(pool.memberMiB))
	} else {
		fmt.Printf("%-58s %10s\n", "host memory per idle pool member", "n/a")
	}
	fmt.Printf("%-58s %10s\n", "product documents' headline (create -> first cmd)", "351 ms")
	for _, note := range append(cold.notes, pool.notes...) {
		fmt.Println("note:", note)
	}
	return fresh.verdict()
}
