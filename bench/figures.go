package main

import (
	"context"
	"fmt"
	"time"

	"github.com/withruntime/withruntime/internal/manager"
)

// coldRun is what the server without a pool measured.
type coldRun struct {
	rows                []row
	rt, rtMissing       series
	spawnTrue, spawnPy  series
	codeFirst, codeWarm series
	ptyKeys             series
	idleMiB             float64
	egress              *egressFigures
	notes               []string
}

// poolRun is what the server with a warm pool measured.
type poolRun struct {
	rows      []row
	big       *row
	watch     *poolWatch
	memberMiB []float64
	notes     []string
}

func coldFigures(ctx context.Context, c config, up *upstream, fresh *freshness) (*coldRun, error) {
	s, err := startServer(ctx, c.cache, c.overcommit, nil, up)
	if err != nil {
		return nil, fmt.Errorf("cold server: %w", err)
	}
	defer s.done()
	b := &bencher{c: s.c, vcpus: c.vcpus, mem: c.mem, fresh: fresh}
	b.warm(ctx)
	r := &coldRun{}
	for _, sh := range shapes {
		r.rows = append(r.rows,
			b.sequential(ctx, sh, c.n, nil),
			b.staggered(ctx, sh, c.n, c.stagger),
			b.burst(ctx, sh, c.n, c.burst, nil))
	}
	if r.rt, r.rtMissing, r.spawnTrue, r.spawnPy, err = b.floor(ctx, c.execs, c.spawns); err != nil {
		return nil, fmt.Errorf("exec and spawn floor: %w", err)
	}
	if r.codeFirst, r.codeWarm, err = b.codeFigures(ctx, c.codeStarts, c.cells); err != nil {
		return nil, fmt.Errorf("code interpreter: %w", err)
	}
	if r.ptyKeys, err = b.ptyFigures(ctx, c.ptyKeys); err != nil {
		return nil, fmt.Errorf("terminal: %w", err)
	}
	if r.idleMiB, err = b.idleMemory(ctx, c.idle, "withruntime"); err != nil {
		return nil, err
	}
	if c.egress {
		if r.egress, err = b.egress(ctx, c.requests, c.downloads); err != nil {
			return nil, fmt.Errorf("egress: %w", err)
		}
	}
	if n := s.tap.total(); n > 0 {
		r.notes = append(r.notes, fmt.Sprintf("the cold server (no pools) logged %d %q: its rows may hold pool hits", n, poolReady))
	}
	return r, nil
}

func poolFigures(ctx context.Context, c config, up *upstream, fresh *freshness) (*poolRun, error) {
	start := time.Now()
	s, err := startServer(ctx, c.cache, c.overcommit, []manager.Pool{{VCPUs: c.vcpus, MemoryMiB: c.mem, Size: c.pool}}, up)
	if err != nil {
		return nil, fmt.Errorf("pool server: %w", err)
	}
	defer s.done()
	w := &poolWatch{tap: s.tap, size: c.pool, refill: c.refill}
	r := &poolRun{}
	msg := w.warm(start, c.settle)
	fmt.Println(msg)
	r.notes = append(r.notes, msg)
	if !w.logged {
		r.notes = append(r.notes, "pool rows skipped: the server shows no warm pool")
		return r, nil
	}
	r.watch = w
	// Warm, nothing in use: every sandbox of this server is a pool member.
	time.Sleep(2 * time.Second)
	r.memberMiB = memberMemory(s.dir)
	b := &bencher{c: s.c, vcpus: c.vcpus, mem: c.mem, fresh: fresh}
	for _, sh := range shapes {
		r.rows = append(r.rows, b.sequential(ctx, sh, c.n, w.afterClaim))
		t := time.Now()
		r.rows = append(r.rows, b.staggered(ctx, sh, c.n, c.stagger))
		w.afterBurst(t, c.n)
		r.rows = append(r.rows, b.burst(ctx, sh, c.n, c.burst, func(t time.Time) { w.afterBurst(t, c.burst) }))
	}
	big := b.burst(ctx, shapePy, c.bigBurst, c.bigBurst, func(t time.Time) { w.afterBurst(t, c.bigBurst) })
	big.name = shapePy.name
	r.big = &big
	for i := range r.rows {
		r.rows[i].hits = s.tap.hits(r.rows[i].ids)
	}
	big.hits = s.tap.hits(big.ids)
	return r, nil
}
