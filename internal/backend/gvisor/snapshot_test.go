package gvisor

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/sandbox/backendtest"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestSnapshotForks snapshots a running sandbox with egress and starts two
// sandboxes from the snapshot: each has the source's file and the secret
// a process kept only in its memory, each writes its own files, each has
// its own address, boot id and kernel randomness, and the source runs on
// unchanged.
func TestSnapshotForks(t *testing.T) {
	testenv.RequiresGvisor(t)
	b, err := New(Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir(), Egress: backendtest.Egress(t, "s")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx := t.Context()
	base := fmt.Sprintf("sbx5b%012x", os.Getpid())
	src, forkA, forkB := base+"00", base+"0a", base+"0b"
	for _, id := range []string{src, forkA, forkB} {
		t.Cleanup(func() { b.Destroy(context.Background(), id) })
	}
	spec := sandbox.Spec{Image: image.DefaultName, VCPUs: 1, MemoryMiB: 512, DiskMiB: 1024, PidsLimit: 256}
	inst, err := b.Start(ctx, src, spec)
	if err != nil {
		t.Fatal(err)
	}
	hc := agentClient(inst)
	run(t, hc, "sh", "-c", "echo from-source > /root/note")
	background(t, hc, "sh", "-c", `s=$(cat /proc/sys/kernel/random/uuid); trap 'echo $s > /root/said' USR1; echo $$ > /root/keeper.pid; while :; do sleep 0.1; done`)
	secret := say(t, hc)
	hc.CloseIdleConnections()

	dir := t.TempDir()
	if err := b.Snapshot(ctx, src, dir); err != nil {
		t.Fatal(err)
	}
	// The source answers again at once, with its state.
	if got := run(t, hc, "cat", "/root/note"); got != "from-source\n" {
		t.Fatalf("source after the snapshot: note %q", got)
	}
	if got := say(t, hc); got != secret {
		t.Fatalf("source after the snapshot: the process's secret %q, want %q", got, secret)
	}
	srcAddr, _ := b.SandboxAddr(src)
	boots := map[string]string{src: run(t, hc, "cat", "/proc/sys/kernel/random/boot_id")}
	rands := map[string]string{src: run(t, hc, "sh", "-c", "head -c 16 /dev/urandom | od -An -tx1")}
	addrs := map[string]string{srcAddr.String(): src}
	for _, id := range []string{forkA, forkB} {
		fi, err := b.StartSnapshot(ctx, id, spec, dir)
		if err != nil {
			t.Fatalf("starting %s from the snapshot: %v", id, err)
		}
		fc := agentClient(fi)
		if got := run(t, fc, "cat", "/root/note"); got != "from-source\n" {
			t.Fatalf("%s: note %q", id, got)
		}
		if got := say(t, fc); got != secret {
			t.Fatalf("%s: the process's secret %q, want %q", id, got, secret)
		}
		run(t, fc, "sh", "-c", "echo "+id+" > /root/own")
		if got := run(t, fc, "cat", "/root/own"); got != id+"\n" {
			t.Fatalf("%s: its own file %q", id, got)
		}
		// Its own address, on the host and inside.
		addr, ok := b.SandboxAddr(id)
		if !ok || addrs[addr.String()] != "" {
			t.Fatalf("%s: address %v (%v) is another sandbox's (%v)", id, addr, ok, addrs)
		}
		addrs[addr.String()] = id
		if inside := run(t, fc, "ip", "-4", "addr", "show", "eth0"); !strings.Contains(inside, addr.String()+"/") {
			t.Fatalf("%s: the host gave it %s, inside it has %q", id, addr, inside)
		}
		boots[id] = run(t, fc, "cat", "/proc/sys/kernel/random/boot_id")
		rands[id] = run(t, fc, "sh", "-c", "head -c 16 /dev/urandom | od -An -tx1")
		fc.CloseIdleConnections()
	}
	backendtest.AllDiffer(t, boots)
	backendtest.AllDiffer(t, rands)
	if strings.Contains(run(t, hc, "sh", "-c", "cat /root/own 2>&1 || true"), base) {
		t.Fatal("a fork's write reached the source")
	}
}
