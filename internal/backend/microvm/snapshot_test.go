package microvm

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/sandbox/backendtest"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestSnapshotForks snapshots a running microVM with a network and starts
// two from the snapshot: each has the source's file and the secret a
// process kept only in its memory, each writes its own files, each has
// its own address (its traffic reaches the egress proxy from it), boot id
// and kernel randomness, and the source runs on unchanged.
func TestSnapshotForks(t *testing.T) {
	testenv.RequiresMicroVM(t)
	egress, got := proxyRig(t, "f")
	b, err := New(Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir(), Accel: "tcg", Egress: egress})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx := t.Context()
	const src, forkA, forkB = "sbx_vmsnap00", "sbx_vmsnap0a", "sbx_vmsnap0b"
	for _, id := range []string{src, forkA, forkB} {
		t.Cleanup(func() { b.Destroy(context.Background(), id) })
	}
	spec := testSpec()
	t0 := time.Now()
	inst, err := b.Start(ctx, src, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cold start took %s", time.Since(t0))
	hc := agentClient(inst)
	agentSh(t, hc, "echo from-source > /home/user/note; echo in-memory > /tmp/mem")
	agentSh(t, hc, `nohup sh -c 's=$(cat /proc/sys/kernel/random/uuid); trap "echo \$s > /home/user/said" USR1; touch /tmp/keeper.ready; while :; do sleep 0.2; done' >/dev/null 2>&1 & echo $! > /tmp/keeper.pid
for i in $(seq 100); do test -e /tmp/keeper.ready && break; sleep 0.1; done`)
	secret := saySecret(t, agentClient(inst))
	if len(secret) < 32 {
		t.Fatalf("the keeper said %q; %s", secret, agentSh(t, hc, "cat /tmp/keeper.pid; ps -ef; ls -la /home/user"))
	}

	// Linux makes its boot id at the first read: one made before the
	// snapshot is in the forks' memory.
	srcBoot := agentSh(t, hc, "cat /proc/sys/kernel/random/boot_id")
	dir := t.TempDir()
	t0 = time.Now()
	if err := b.Snapshot(ctx, src, dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot took %s (machine %s, disk %s of %d MiB)", time.Since(t0), fileSize(t, filepath.Join(dir, snapMachine)), fileSize(t, filepath.Join(dir, snapDisk)), spec.DiskMiB)
	// The source answers again, with its state.
	hc = agentClient(inst)
	if got := agentSh(t, hc, "cat /home/user/note /tmp/mem"); got != "from-source\nin-memory" {
		t.Fatalf("source after the snapshot: %q", got)
	}
	if got := saySecret(t, hc); got != secret {
		t.Fatalf("source after the snapshot: the process's secret %q, want %q", got, secret)
	}
	srcAddr, _ := b.SandboxAddr(src)
	boots := map[string]string{src: agentSh(t, hc, "cat /proc/sys/kernel/random/boot_id")}
	if boots[src] != srcBoot {
		t.Fatalf("the source's boot id changed with the snapshot: %s, then %s", srcBoot, boots[src])
	}
	rands := map[string]string{src: agentSh(t, hc, "head -c 16 /dev/urandom | od -An -tx1")}
	addrs := map[netip.Addr]string{srcAddr: src}
	for _, id := range []string{forkA, forkB} {
		t0 := time.Now()
		fi, err := b.StartSnapshot(ctx, id, spec, dir)
		if err != nil {
			t.Fatalf("starting %s from the snapshot: %v", id, err)
		}
		t.Logf("%s: start from the snapshot took %s", id, time.Since(t0))
		// Random bytes first: nothing else has run in the fork yet.
		fc := agentClient(fi)
		rands[id] = agentSh(t, fc, "head -c 16 /dev/urandom | od -An -tx1")
		boots[id] = agentSh(t, fc, "cat /proc/sys/kernel/random/boot_id")
		if got := agentSh(t, fc, "cat /home/user/note /tmp/mem"); got != "from-source\nin-memory" {
			t.Fatalf("%s: %q, want the source's disk and /tmp", id, got)
		}
		if got := saySecret(t, fc); got != secret {
			t.Fatalf("%s: the process's secret %q, want %q", id, got, secret)
		}
		agentSh(t, fc, "echo "+id+" > /home/user/own")
		if got := agentSh(t, fc, "cat /home/user/own"); got != id {
			t.Fatalf("%s: its own file %q", id, got)
		}
		addr, ok := b.SandboxAddr(id)
		if !ok || addrs[addr] != "" {
			t.Fatalf("%s: address %v (%v) is another sandbox's (%v)", id, addr, ok, addrs)
		}
		addrs[addr] = id
		if ip := agentSh(t, fc, "ip -4 -o addr show eth0 | awk '{print $4}'"); !strings.HasPrefix(ip, addr.String()+"/") {
			t.Fatalf("%s: the host gave it %s, inside it has %q", id, addr, ip)
		}
		if err := b.SetOnline(id, true); err != nil {
			t.Fatal(err)
		}
		agentSh(t, fc, `timeout 10 bash -c "echo `+id+` > /dev/tcp/198.18.0.9/80"`)
		select {
		case c := <-got:
			if c != (proxied{id, addr.String()}) {
				t.Fatalf("%s: the proxy got %q from %s, want %q from %s", id, c.line, c.from, id, addr)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the proxy got no connection", id)
		}
	}
	backendtest.AllDiffer(t, boots)
	backendtest.AllDiffer(t, rands)
	if got := agentSh(t, hc, "cat /home/user/own 2>&1 || true; cat /home/user/note"); strings.Contains(got, "sbx_") || !strings.HasSuffix(got, "from-source") {
		t.Fatalf("the source after the forks: %q", got)
	}
}

// saySecret has the keeper process write the secret it holds in memory,
// and reads it.
func saySecret(t *testing.T, hc *http.Client) string {
	t.Helper()
	return agentSh(t, hc, `rm -f /home/user/said; kill -USR1 $(cat /tmp/keeper.pid) || exit 1
for i in $(seq 100); do test -s /home/user/said && break; sleep 0.1; done; cat /home/user/said`)
}

func fileSize(t *testing.T, path string) string {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%.1f MiB (%.1f MiB allocated)", float64(st.Size)/(1<<20), float64(st.Blocks*512)/(1<<20))
}
