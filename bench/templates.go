package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/manager"
	"github.com/withruntime/withruntime/internal/server"
	"github.com/withruntime/withruntime/internal/template"
)

// The templates mode (-templates N) measures, in one run and one data
// dir:
//
//   - a template made by snapshot of a sandbox that wrote a few MB;
//   - a small build (three run steps on the default image): cold, again
//     fully cached, and with its last step changed;
//   - create -> first command (`true`) from that template against the
//     default image, N of each alternating, on a server without pools
//     (cold), then on the same data dir served with a warm pool of each
//     (pool hit);
//   - the disk N snapshots of the default image take (each a small
//     distinct layer) against N full copies of the image's root.
//
// The cold rows come from a server without pools and the pool rows from
// one with them, run one after the other on the same data dir (the
// template is the same one): on a small host a pool's refill beside a
// cold create would slow it down, and a pool's template must exist for
// the pool to fill.

// tplName is the template made by snapshot; buildName the built one.
const (
	tplName   = "bench-tpl"
	buildName = "bench-build"
	// tplPool is the size of each of the two warm pools of the pool
	// server: the creates are sequential and wait for the refill.
	tplPool = 2
)

// tplWrite is what the snapshotted sandbox writes before the snapshot:
// 4 MiB of random data and a hundred small files.
const tplWrite = `mkdir -p /workspace/bench/small &&
head -c 4194304 /dev/urandom > /workspace/bench/blob &&
for i in $(seq 100); do echo "$i" > /workspace/bench/small/$i; done && echo ok`

// buildSpec is the small build: three run steps as root, the last
// writing last (the changed build changes it).
func buildSpec(tag, last string) map[string]any {
	run := func(cmd string) map[string]any { return map[string]any{"run": cmd, "user": "root"} }
	return map[string]any{
		"name": buildName + ":" + tag,
		"steps": []any{
			run("mkdir -p /opt/bench && head -c 2097152 /dev/urandom > /opt/bench/a"),
			run("head -c 1048576 /dev/urandom > /opt/bench/b"),
			run("echo " + last + " > /opt/bench/c"),
		},
	}
}

// buildFigure is one build: request -> its log's end, and how many of its
// steps came from the cache.
type buildFigure struct {
	name          string
	d             time.Duration
	steps, cached int
	err           error
}

// tplFigures is what the templates mode measured.
type tplFigures struct {
	snapshot, snapshots series // the 4 MiB template's snapshot; the N small ones
	builds              []buildFigure
	coldTpl, coldImg    row
	poolTpl, poolImg    row
	layersBefore        int64 // layers on disk before the N small snapshots
	layersAfter         int64
	baseRoot            int64 // the default image's root
	n                   int
	notes               []string
}

func templatesRun(ctx context.Context, c config) error {
	n := c.templates
	fmt.Printf("withruntime bench, templates, %s\n%s\n", time.Now().UTC().Format(time.RFC3339), machine(ctx, c.cache))
	fmt.Printf("sandbox %dx%d, --overcommit %g, n %d; cold server --pool none, pool server --pool %s:%dx%d=%d and %dx%d=%d on the same data dir\n\n",
		c.vcpus, c.mem, c.overcommit, n, tplName, c.vcpus, c.mem, tplPool, c.vcpus, c.mem, tplPool)
	root, err := image.Rootfs(c.cache, image.DefaultName)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "withruntime-bench-templates-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fresh := newFreshness()
	f := &tplFigures{n: n}
	if f.baseRoot, err = diskUsage(root); err != nil {
		return fmt.Errorf("the default image's root: %w", err)
	}
	if err := tplColdPhase(ctx, c, dir, fresh, f); err != nil {
		return err
	}
	if err := tplPoolPhase(ctx, c, dir, fresh, f); err != nil {
		return err
	}
	f.print()
	return fresh.verdict()
}

// onDataDir makes a bench server keep its data in dir (it outlives the
// server).
func onDataDir(dir string) func(*server.Config) {
	return func(cfg *server.Config) { cfg.DataDir = dir }
}

// tplColdPhase makes the templates and measures the builds, the cold
// creates and the disk on a server without pools.
func tplColdPhase(ctx context.Context, c config, dir string, fresh *freshness, f *tplFigures) error {
	s, err := startServer(ctx, c.cache, c.overcommit, nil, nil, onDataDir(dir))
	if err != nil {
		return fmt.Errorf("cold server: %w", err)
	}
	defer s.done()
	b := &bencher{c: s.c, vcpus: c.vcpus, mem: c.mem, fresh: fresh}
	b.warm(ctx)

	// The template: a sandbox writes, its file system becomes the
	// template. The freshness check runs after the snapshot, or its
	// markers would be in every sandbox of the template.
	d, err := b.snapshotAfter(ctx, tplWrite, tplName)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	f.snapshot = series{d}

	for _, bld := range []struct{ name, tag, last string }{
		{"cold", "cold", "v1"}, {"fully cached", "cached", "v1"}, {"one changed step", "changed", "v2"},
	} {
		bf := buildFigure{name: bld.name}
		bf.d, bf.steps, bf.cached, bf.err = timeBuild(ctx, s.c, buildSpec(bld.tag, bld.last))
		f.builds = append(f.builds, bf)
	}

	// Cold creates, alternating so that both series meet the same host.
	f.coldTpl, f.coldImg = b.alternate(ctx, f.n, nil)

	// Disk: N snapshots of the default image, each of a sandbox that
	// wrote one small file of its own.
	if f.layersBefore, err = diskUsage(filepath.Join(dir, "templates", "layers")); err != nil {
		return err
	}
	for i := range f.n {
		d, err := b.snapshotAfter(ctx, fmt.Sprintf("echo bench %d > /workspace/bench-%d && echo ok", i, i), fmt.Sprintf("bench-disk-%d", i))
		if err != nil {
			return fmt.Errorf("snapshot %d: %w", i, err)
		}
		f.snapshots = append(f.snapshots, d)
	}
	if f.layersAfter, err = diskUsage(filepath.Join(dir, "templates", "layers")); err != nil {
		return err
	}
	if k := s.tap.total(); k > 0 {
		f.notes = append(f.notes, fmt.Sprintf("the cold server (no pools) logged %d %q: its rows may hold pool hits", k, poolReady))
	}
	return nil
}

// tplPoolPhase serves the same data dir with a warm pool of the template
// and one of the default image, and measures pool hits of each.
func tplPoolPhase(ctx context.Context, c config, dir string, fresh *freshness, f *tplFigures) error {
	ref, err := template.ParseRef(tplName)
	if err != nil {
		return err
	}
	start := time.Now()
	pools := []manager.Pool{
		{Template: ref.String(), VCPUs: c.vcpus, MemoryMiB: c.mem, Size: tplPool},
		{VCPUs: c.vcpus, MemoryMiB: c.mem, Size: tplPool},
	}
	s, err := startServer(ctx, c.cache, c.overcommit, pools, nil, onDataDir(dir))
	if err != nil {
		return fmt.Errorf("pool server: %w", err)
	}
	defer s.done()
	w := &poolWatch{tap: s.tap, size: 2 * tplPool, refill: c.refill}
	msg := w.warm(start, c.settle)
	fmt.Println(msg)
	f.notes = append(f.notes, msg)
	if !w.logged {
		f.notes = append(f.notes, "pool rows skipped: the server shows no warm pool")
		return nil
	}
	time.Sleep(2 * time.Second)
	b := &bencher{c: s.c, vcpus: c.vcpus, mem: c.mem, fresh: fresh}
	f.poolTpl, f.poolImg = b.alternate(ctx, f.n, w.afterClaim)
	f.poolTpl.hits, f.poolImg.hits = s.tap.hits(f.poolTpl.ids), s.tap.hits(f.poolImg.ids)
	return nil
}

// snapshotAfter runs script in a new default sandbox (it must print ok),
// snapshots it as name and returns how long the snapshot took.
func (b *bencher) snapshotAfter(ctx context.Context, script, name string) (time.Duration, error) {
	sb, err := b.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: b.vcpus, MemoryMiB: b.mem, TimeoutSeconds: 600})
	if err != nil {
		return 0, err
	}
	defer b.done(ctx, []string{sb.ID})
	if err := expect(ctx, b.c, sb.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"sh", "-c", script}}}, "ok\n"); err != nil {
		return 0, err
	}
	start := time.Now()
	if _, err := b.c.Snapshot(ctx, sb.ID, name); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// alternate makes n creates from the template and n from the default
// image, one after the other, alternating; each is timed from the create
// request to `true` answered. between runs after each create (the pool's
// refill).
func (b *bencher) alternate(ctx context.Context, n int, between func(claim time.Time)) (tpl, img row) {
	tpl.name, img.name = "template "+tplName, "default image"
	for range n {
		for _, r := range []*row{&tpl, &img} {
			name := ""
			if r == &tpl {
				name = tplName
			}
			claim := time.Now()
			d, id, err := b.createTrue(ctx, name)
			if id != "" {
				b.done(ctx, []string{id})
			}
			if err != nil {
				r.errs = append(r.errs, err.Error())
			} else {
				r.s, r.ids = append(r.s, d), append(r.ids, id)
			}
			if between != nil {
				between(claim)
			}
		}
	}
	return tpl, img
}

// createTrue creates a sandbox of template name ("" the default image)
// and runs `true` in it; the sandbox is returned even when that fails.
func (b *bencher) createTrue(ctx context.Context, name string) (time.Duration, string, error) {
	start := time.Now()
	sb, err := b.c.CreateSandbox(ctx, api.CreateSandboxRequest{Template: name, VCPUs: b.vcpus, MemoryMiB: b.mem, TimeoutSeconds: 600})
	if err != nil {
		return 0, "", fmt.Errorf("create: %w", err)
	}
	res, err := b.c.Exec(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"true"}}}, client.ExecOptions{})
	if err != nil {
		return 0, sb.ID, err
	}
	if res.ExitCode != 0 {
		return 0, sb.ID, fmt.Errorf("true exited %d", res.ExitCode)
	}
	return time.Since(start), sb.ID, nil
}

// timeBuild starts a build of spec and follows its log to the end: the
// time from the request to the last event, the build's steps and how many
// came from the cache.
func timeBuild(ctx context.Context, c *client.Client, spec map[string]any) (time.Duration, int, int, error) {
	start := time.Now()
	bld, err := c.BuildTemplate(ctx, spec, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	if err := c.TemplateBuildLogs(ctx, bld.ID, true, func(api.BuildLogEvent) error { return nil }); err != nil {
		return 0, 0, 0, err
	}
	d := time.Since(start)
	if bld, err = c.GetTemplateBuild(ctx, bld.ID); err != nil {
		return 0, 0, 0, err
	}
	if bld.State != api.BuildSucceeded {
		msg := bld.State
		if bld.Error != nil {
			msg += ": " + bld.Error.Message
		}
		return 0, bld.Steps, bld.CachedSteps, errors.New("build " + msg)
	}
	return d, bld.Steps, bld.CachedSteps, nil
}

// diskUsage is what du(1) says of root: the blocks of every file and
// directory, a file of several hard links counted once.
func diskUsage(root string) (int64, error) {
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var total int64
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		key := inode{uint64(st.Dev), st.Ino}
		if seen[key] {
			return nil
		}
		seen[key] = true
		total += st.Blocks * 512
		return nil
	})
	return total, err
}

// mib writes a size in MiB, or in KiB under one MiB (a small layer).
func mib(b int64) string {
	if b < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// print writes the templates mode's table: median, p90 and max.
func (f *tplFigures) print() {
	fmt.Println()
	fmt.Printf("%-58s %10s %10s %10s %6s %6s %6s\n", "figure", "median", "p90", "max", "n", "errors", "hits")
	line := func(name string, s series, errs, hits int) {
		if len(s) == 0 {
			fmt.Printf("%-58s %10s %10s %10s %6d %6d %6d\n", name, "-", "-", "-", 0, errs, hits)
			return
		}
		fmt.Printf("%-58s %10s %10s %10s %6d %6d %6d\n", name, ms(s.pct(0.5)), ms(s.pct(0.9)), ms(s.pct(1)), len(s), errs, hits)
	}
	rowLine := func(group string, r row) {
		line(group+": "+r.name+", create -> `true`", r.s, len(r.errs), r.hits)
		seen := map[string]int{}
		for _, e := range r.errs {
			seen[e]++
		}
		for e, k := range seen {
			fmt.Printf("    error x%d: %s\n", k, e)
		}
	}
	rowLine("cold", f.coldTpl)
	rowLine("cold", f.coldImg)
	rowLine("pool-hit", f.poolTpl)
	rowLine("pool-hit", f.poolImg)
	line("snapshot of a sandbox that wrote 4 MiB + 100 files", f.snapshot, 0, 0)
	line("snapshot of a sandbox that wrote one small file", f.snapshots, 0, 0)
	for _, b := range f.builds {
		if b.err != nil {
			fmt.Printf("%-58s %10s  %v\n", "build (3 run steps), "+b.name, "error", b.err)
			continue
		}
		fmt.Printf("%-58s %10s  (%d steps, %d from the cache)\n", "build (3 run steps), "+b.name, ms(b.d), b.steps, b.cached)
	}
	fmt.Println()
	ratio := func(name string, t, i row) {
		if len(t.s) == 0 || len(i.s) == 0 {
			fmt.Printf("%-58s %10s\n", name, "n/a")
			return
		}
		fmt.Printf("%-58s %10.2f (median %s / %s)\n", name, float64(t.s.pct(0.5))/float64(i.s.pct(0.5)), ms(t.s.pct(0.5)), ms(i.s.pct(0.5)))
	}
	ratio("cold: template / default image", f.coldTpl, f.coldImg)
	ratio("pool-hit: template / default image", f.poolTpl, f.poolImg)
	added := f.layersAfter - f.layersBefore
	fmt.Printf("%-58s %10s (%s each; all layers of the data dir %s)\n", fmt.Sprintf("disk: %d templates sharing the default base", f.n), mib(added), mib(added/int64(max(f.n, 1))), mib(f.layersAfter))
	fmt.Printf("%-58s %10s (the default image's root %s, du)\n", fmt.Sprintf("disk: %d full copies of the default image", f.n), mib(f.baseRoot*int64(f.n)), mib(f.baseRoot))
	for _, note := range f.notes {
		fmt.Println("note:", note)
	}
}
