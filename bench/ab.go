package main

import (
	"context"
	"fmt"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/manager"
)

// abRun compares variants of the sandbox's start in one run: each variant
// is a cache directory (its runsc, agent and image), served by a pool
// server of its own; samples alternate between the variants, so that a
// noisy moment of a shared machine falls on all of them alike. A variant's
// directory is laid out as the shared cache: bin/runsc, bin/sandbox-agent
// and images/ (a bind mount of the shared cache's images: a sandbox does
// not start from a root behind a symbolic link).
func abRun(ctx context.Context, c config, caches []string) error {
	up, err := startUpstream()
	if err != nil {
		return fmt.Errorf("egress upstream: %w", err)
	}
	defer up.Close()
	fresh := newFreshness()
	type variant struct {
		name  string
		s     *benchServer
		b     *bencher
		w     *poolWatch
		first series
		rt    series
		miss  series // exec of a command that is not found: no process
		spawn series
		errs  []string
		mem   []float64 // PSS of each idle pool member, MiB
	}
	var vs []*variant
	defer func() {
		for _, v := range vs {
			v.s.done()
		}
	}()
	for _, cache := range caches {
		start := time.Now()
		s, err := startServer(ctx, cache, c.overcommit, []manager.Pool{{VCPUs: c.vcpus, MemoryMiB: c.mem, Size: c.pool}}, up)
		if err != nil {
			return fmt.Errorf("server of %s: %w", cache, err)
		}
		v := &variant{name: cache, s: s, b: &bencher{c: s.c, vcpus: c.vcpus, mem: c.mem, fresh: fresh},
			w: &poolWatch{tap: s.tap, size: c.pool, refill: c.refill}}
		vs = append(vs, v)
		fmt.Println(cache+":", v.w.warm(start, c.settle))
		v.mem = memberMemory(s.dir)
	}
	for i := 0; i < c.n; i++ {
		for _, v := range vs {
			claim := time.Now()
			d, id, err := v.b.measure(ctx, shapePy)
			if id != "" {
				v.b.done(ctx, []string{id})
			}
			if err != nil {
				v.errs = append(v.errs, err.Error())
			} else {
				v.first = append(v.first, d)
			}
			v.w.afterClaim(claim)
		}
	}
	// Exec round trips: one sandbox per variant, rounds of 20 alternating.
	ids := make([]string, len(vs))
	for i, v := range vs {
		sb, err := v.b.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: c.vcpus, MemoryMiB: c.mem, TimeoutSeconds: 600})
		if err != nil {
			return err
		}
		ids[i] = sb.ID
		defer v.b.done(ctx, []string{sb.ID})
	}
	if n := c.abProcs; n > 0 {
		for i, v := range vs {
			req := api.ExecRequest{Cmd: api.Command{Shell: fmt.Sprintf("for i in $(seq %d); do sleep 600 >/dev/null 2>&1 & done", n)}}
			if _, err := v.b.c.Exec(ctx, ids[i], req, client.ExecOptions{}); err != nil {
				return fmt.Errorf("starting %d sleeps: %w", n, err)
			}
		}
		time.Sleep(2 * time.Second)
	}
	for round := 0; round < max(1, c.execs/20); round++ {
		for i, v := range vs {
			s, err := v.b.execRoundTrip(ctx, ids[i], 20)
			if err != nil {
				return err
			}
			v.rt = append(v.rt, s...)
			if s, err = v.b.execSeries(ctx, ids[i], 20, missing); err != nil {
				return err
			}
			v.miss = append(v.miss, s...)
		}
	}
	for round := 0; round < 5; round++ {
		for i, v := range vs {
			s, err := spawnFloor(ctx, v.b.c, ids[i], max(1, c.spawns/5), "/bin/true")
			if err != nil {
				return err
			}
			v.spawn = append(v.spawn, s...)
		}
	}
	fmt.Println()
	header()
	for _, v := range vs {
		r := row{name: "first python3, sequential", s: v.first, errs: v.errs}
		r.print(v.name)
		v.rt.print(v.name + ": exec `true`")
		v.miss.print(v.name + ": exec of a command not found")
		fmt.Printf("%-58s %10s %10s\n", v.name+": p10 exec true / not found / spawn", ms(v.rt.pct(0.1)), ms(v.miss.pct(0.1))+" / "+ms(v.spawn.pct(0.1)))
		v.spawn.print(v.name + ": spawn /bin/true")
		if len(v.mem) > 0 {
			fmt.Printf("%-58s %10.1f MiB (PSS, median of %d)\n", v.name+": idle pool member", median(v.mem), len(v.mem))
		}
	}
	return fresh.verdict()
}
