package manager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/billing"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/storagequota"
	"github.com/withruntime/withruntime/internal/store"
)

// snapRig is a rig that keeps snapshots in a directory of the test's.
func snapRig(t *testing.T, config func(*Config)) (*rig, string) {
	dir := t.TempDir()
	r := newRig(t, func(c *Config) {
		c.SnapshotDir = dir
		c.Snapshots = nil // set below: the rig's store
		if config != nil {
			config(c)
		}
	})
	r.m.cfg.Snapshots = r.st
	return r, dir
}

func wantErrKind(t *testing.T, what string, err error, kind sandbox.Kind) {
	t.Helper()
	if err == nil || sandbox.KindOf(err) != kind {
		t.Fatalf("%s: got %v, want a %s error", what, err, kind)
	}
}

// TestSnapshotOutlivesItsSource snapshots a sandbox, ends it, and starts
// a sandbox from the snapshot a day later: the new one has its own id,
// lease and billing, and the snapshot's size; when the retention ends the
// reaper removes the snapshot's files and record, and it starts nothing
// more.
func TestSnapshotOutlivesItsSource(t *testing.T) {
	r, dir := snapRig(t, func(c *Config) { c.SnapshotRetention = 48 * time.Hour })
	ctx := t.Context()
	src := r.create(service.CreateRequest{TimeoutSeconds: 600, Metadata: map[string]string{"run": "1"}})
	snap, err := r.m.Snapshot(ctx, "acct", src.ID, "before the change")
	if err != nil {
		t.Fatal(err)
	}
	if !snapshotID.MatchString(snap.ID) || snap.SandboxID != src.ID || snap.SizeBytes == 0 || snap.Name != "before the change" {
		t.Fatalf("the snapshot: %+v", snap)
	}
	if want := r.clock.Now().Add(48 * time.Hour); !snap.ExpiresAt.Equal(want) {
		t.Fatalf("expires at %v, want %v", snap.ExpiresAt, want)
	}
	if _, err := os.Stat(filepath.Join(dir, snap.ID, fakeImage)); err != nil {
		t.Fatalf("the snapshot's files: %v", err)
	}
	if got := r.record(src.ID); got.State != sandbox.StateRunning {
		t.Fatalf("the source after its snapshot: %s", got.State)
	}
	if _, err := r.m.Stop(ctx, "acct", src.ID); err != nil {
		t.Fatal(err)
	}

	r.clock.Advance(24 * time.Hour)
	r.m.Reap(ctx)
	rec, err := r.m.Create(ctx, "acct", "", service.CreateRequest{Snapshot: snap.ID, TimeoutSeconds: 120})
	if err != nil {
		t.Fatalf("a create from the snapshot a day later: %v", err)
	}
	if rec.ID == src.ID || rec.State != sandbox.StateRunning || rec.Usage.CostNanos != 0 || !rec.LeaseEndsAt.Equal(r.clock.Now().Add(2*time.Minute)) {
		t.Fatalf("the sandbox started from it: %+v", rec)
	}
	if rec.Spec.Metadata["run"] != "" || rec.Spec.VCPUs != src.Spec.VCPUs || rec.Spec.MemoryMiB != src.Spec.MemoryMiB {
		t.Fatalf("its spec: %+v (source %+v)", rec.Spec, src.Spec)
	}
	if from := r.be.startedFrom(rec.ID); from != "snapshot of "+src.ID {
		t.Fatalf("the backend started it from %q", from)
	}

	r.clock.Advance(25 * time.Hour)
	r.m.Reap(ctx)
	if _, err := os.Stat(filepath.Join(dir, snap.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the snapshot's files after its retention: %v", err)
	}
	_, err = r.m.GetSnapshot(ctx, "acct", snap.ID)
	wantErrKind(t, "the snapshot after its retention", err, sandbox.KindNotFound)
	_, err = r.m.Create(ctx, "acct", "", service.CreateRequest{Snapshot: snap.ID})
	wantErrKind(t, "a create from an expired snapshot", err, sandbox.KindNotFound)
}

// TestSnapshotRefusals: another account's snapshot is not found as an
// unknown one is; a paused sandbox is a conflict; a create from a
// snapshot may not name another size or image; one of another runsc
// build is refused; past the storage quota nothing is kept.
func TestSnapshotRefusals(t *testing.T) {
	r, dir := snapRig(t, func(c *Config) { c.NodeCompat = "runsc-a" })
	ctx := t.Context()
	src := r.create(service.CreateRequest{})
	snap, err := r.m.Snapshot(ctx, "acct", src.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{snap.ID, "snap_0000000000000000", "../x"} {
		_, err := r.m.GetSnapshot(ctx, "other", id)
		wantErrKind(t, "another account's or an unknown snapshot", err, sandbox.KindNotFound)
		wantErrKind(t, "removing it", r.m.DeleteSnapshot(ctx, "other", id), sandbox.KindNotFound)
		_, err = r.m.Create(ctx, "other", "", service.CreateRequest{Snapshot: id})
		wantErrKind(t, "starting it", err, sandbox.KindNotFound)
	}
	if list, _ := r.m.ListSnapshots(ctx, "other"); len(list) != 0 {
		t.Fatalf("another account lists %d snapshots", len(list))
	}
	_, err = r.m.Snapshot(ctx, "other", src.ID, "")
	wantErrKind(t, "another account's sandbox", err, sandbox.KindNotFound)
	_, err = r.m.Create(ctx, "acct", "", service.CreateRequest{Snapshot: snap.ID, MemoryMiB: 8192})
	wantErrKind(t, "another size", err, sandbox.KindInvalid)
	_, err = r.m.Snapshot(ctx, "acct", src.ID, strings.Repeat("n", 129))
	wantErrKind(t, "a name too long", err, sandbox.KindInvalid)

	if _, err := r.m.Pause(ctx, "acct", src.ID); err != nil {
		t.Fatal(err)
	}
	_, err = r.m.Snapshot(ctx, "acct", src.ID, "")
	wantErrKind(t, "a paused sandbox", err, sandbox.KindConflict)

	r.m.cfg.NodeCompat = "runsc-b"
	_, err = r.m.Create(ctx, "acct", "", service.CreateRequest{Snapshot: snap.ID})
	wantErrKind(t, "a snapshot of another runsc build", err, sandbox.KindConflict)
	r.m.cfg.NodeCompat = "runsc-a"

	other := r.create(service.CreateRequest{})
	r.m.cfg.StorageQuota = &storagequota.Quota{Bytes: snap.SizeBytes + 1}
	r.m.cfg.StorageQuota.Add("snapshots", storagequota.Snapshots(r.st))
	_, err = r.m.Snapshot(ctx, "acct", other.ID, "")
	wantErrKind(t, "past the storage quota", err, sandbox.KindForbidden)
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("past the quota, the snapshot dir holds %d entries, want the first snapshot's only", len(entries))
	}
	if err := r.m.DeleteSnapshot(ctx, "acct", snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.m.Snapshot(ctx, "acct", other.ID, ""); err != nil {
		t.Fatalf("with the first removed, the quota has room: %v", err)
	}
}

// TestForkAllOrNothing: a fork that does not fit the account's
// concurrency makes nothing; one that fits answers its sandboxes and
// removes its snapshot (unless kept); one whose start fails stops the
// forks that started and keeps nothing.
func TestForkAllOrNothing(t *testing.T) {
	r, dir := snapRig(t, func(c *Config) { c.DefaultConcurrency = 3 })
	ctx := t.Context()
	src := r.create(service.CreateRequest{TimeoutSeconds: 300, Metadata: map[string]string{"k": "v"}})
	_, _, err := r.m.Fork(ctx, "acct", "", src.ID, 3, false)
	wantErrKind(t, "3 forks with room for 2", err, sandbox.KindConcurrency)
	if n := r.be.count("snapshot"); n != 0 {
		t.Fatalf("a fork refused whole took %d snapshots", n)
	}
	for _, n := range []int{0, MaxForks + 1} {
		_, _, err := r.m.Fork(ctx, "acct", "", src.ID, n, false)
		wantErrKind(t, "a count out of bounds", err, sandbox.KindInvalid)
	}

	snap, recs, err := r.m.Fork(ctx, "acct", "", src.ID, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	if snap != nil || len(recs) != 2 || recs[0].ID == recs[1].ID {
		t.Fatalf("fork: %v, %v", snap, recs)
	}
	for _, rec := range recs {
		if rec.State != sandbox.StateRunning || rec.Spec.Metadata["k"] != "v" || rec.Spec.Timeout != 300*time.Second || r.be.startedFrom(rec.ID) != "snapshot of "+src.ID {
			t.Fatalf("a fork: %+v", rec)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a fork that kept no snapshot left %d entries", len(entries))
	}
	for _, rec := range recs {
		r.m.Stop(ctx, "acct", rec.ID)
	}

	// The second start fails: the first fork is stopped.
	r.be.fail = func(op, id string) error {
		if op == "start_snapshot" && r.be.count("start_snapshot") > 3 {
			return errors.New("restore failed")
		}
		return nil
	}
	_, _, err = r.m.Fork(ctx, "acct", "", src.ID, 2, true)
	if err == nil {
		t.Fatal("a fork whose start failed succeeded")
	}
	live, _ := r.m.list(ctx, "acct", sandbox.StateStarting, sandbox.StateRunning)
	if len(live) != 1 || live[0].ID != src.ID {
		t.Fatalf("after a failed fork, live: %d records, want the source only", len(live))
	}
	if list, _ := r.m.ListSnapshots(ctx, "acct"); len(list) != 0 {
		t.Fatalf("a failed fork kept %d snapshots", len(list))
	}
	r.be.fail = nil
	snap, recs, err = r.m.Fork(ctx, "acct", "", src.ID, 1, true)
	if err != nil || snap == nil || len(recs) != 1 {
		t.Fatalf("a fork that keeps its snapshot: %v, %v, %v", snap, recs, err)
	}
	if _, err := r.m.GetSnapshot(ctx, "acct", snap.ID); err != nil {
		t.Fatalf("the kept snapshot: %v", err)
	}
}

// TestSnapshotSweep: a snapshot directory no record names (a server ended
// while it was written) goes when the manager recovers.
func TestSnapshotSweep(t *testing.T) {
	r, dir := snapRig(t, nil)
	src := r.create(service.CreateRequest{})
	snap, err := r.m.Snapshot(t.Context(), "acct", src.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(dir, "snap_00000000000000aa")
	os.Mkdir(left, 0o700)
	r.m.sweepSnapshots(context.Background())
	if _, err := os.Stat(left); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a leftover: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, snap.ID)); err != nil {
		t.Fatalf("a recorded snapshot was swept: %v", err)
	}
}

// TestDirSize: a snapshot's size is what its files hold; a sparse file
// (a microVM's disk) counts its data, not its holes.
func TestDirSize(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "small"), []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 64<<10), 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	n, err := dirSize(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n < 10+64<<10 || n > 10+4<<20 {
		t.Fatalf("got %d bytes, want 10 and the sparse disk's 64 KiB (give or take its blocks), not its 1 GiB", n)
	}
}

// TestSnapshotStorageBilled: a snapshot's storage is billed at the storage
// price to the source's account and key: by the reaper once a stretch is
// a minute or more, the rest at its removal, and never past its retention.
func TestSnapshotStorageBilled(t *testing.T) {
	const price = 1_024_000_000 // nanos per GiB-hour: whole hours bill whole nanos
	r, _ := snapRig(t, func(c *Config) {
		c.SnapshotRetention = 24 * time.Hour
		c.Prices = &billing.Prices{StorageNanosPerGiBHour: price}
	})
	ctx := t.Context()
	src, err := r.m.Create(ctx, "acct", "key_snapper", service.CreateRequest{TimeoutSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	snapCost := func(s *sandbox.Snapshot, d time.Duration) int64 {
		mib := (s.SizeBytes + 1<<20 - 1) >> 20
		return (mib*d.Milliseconds()*price + 1024*3_600_000/2) / (1024 * 3_600_000)
	}
	storage := func() int64 {
		rows, err := r.st.Usage(ctx, store.UsageFilter{Account: "acct", KeyID: "key_snapper"})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, row := range rows {
			n += row.CostNanos
		}
		return n
	}
	// The sandbox itself costs nothing at these prices: the ledger is
	// the snapshots'.
	a, err := r.m.Snapshot(ctx, "acct", src.ID, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.m.Snapshot(ctx, "acct", src.ID, "b")
	if err != nil {
		t.Fatal(err)
	}
	if a.KeyID != "key_snapper" {
		t.Fatalf("the snapshot is billed to %q", a.KeyID)
	}
	r.clock.Advance(2 * time.Hour)
	r.m.Reap(ctx)
	want := snapCost(a, 2*time.Hour) + snapCost(b, 2*time.Hour)
	if got := storage(); got != want || want == 0 {
		t.Fatalf("after 2 h: %d nanos, want %d", got, want)
	}
	r.clock.Advance(30 * time.Second)
	r.m.Reap(ctx)
	if got := storage(); got != want {
		t.Fatalf("30 s later, under a stretch: %d nanos, want still %d", got, want)
	}
	if err := r.m.DeleteSnapshot(ctx, "acct", a.ID); err != nil {
		t.Fatal(err)
	}
	want += snapCost(a, 30*time.Second)
	if got := storage(); got != want {
		t.Fatalf("after the removal: %d nanos, want %d (the last 30 s)", got, want)
	}

	r.clock.Advance(30 * time.Hour)
	r.m.Reap(ctx)
	want += snapCost(b, 22*time.Hour)
	if got := storage(); got != want {
		t.Fatalf("past b's retention: %d nanos, want %d (its 24 h, not 32)", got, want)
	}
	if _, err := r.m.GetSnapshot(ctx, "acct", b.ID); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("the expired snapshot: %v", err)
	}
}

// TestSnapshotVolumes: a sandbox with a writable volume is not
// snapshotted (its copies would all be writers), one with read-only
// volumes is, and every sandbox started from it mounts exactly those
// volumes: none, other paths or modes are invalid, a volume removed and
// made again under its name a conflict; a fork carries them.
func TestSnapshotVolumes(t *testing.T) {
	// Volumes mount on gVisor (and microVMs): the rig's backends are
	// fakes named so.
	r, vm := isoRig(t, func(c *Config) { c.SnapshotDir = t.TempDir() })
	r.m.cfg.Snapshots = r.st
	ctx := t.Context()
	ro := sandbox.VolumeMount{ID: "vol_00000000000000aa", Name: "refs", Path: "/refs", ReadOnly: true, HostDir: "/run/x/vol_00000000000000aa"}
	rw := sandbox.VolumeMount{ID: "vol_00000000000000bb", Name: "out", Path: "/out", HostDir: "/run/x/vol_00000000000000bb"}

	writer := r.create(service.CreateRequest{TimeoutSeconds: 600, Volumes: []sandbox.VolumeMount{ro, rw}})
	_, err := r.m.Snapshot(ctx, "acct", writer.ID, "")
	if sandbox.KindOf(err) != sandbox.KindNotSupported || !strings.Contains(err.Error(), "out") {
		t.Fatalf("a snapshot of a sandbox with a writable volume: %v, want not_supported naming it", err)
	}

	src := r.create(service.CreateRequest{TimeoutSeconds: 600, Volumes: []sandbox.VolumeMount{ro}})
	snap, err := r.m.Snapshot(ctx, "acct", src.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	again := ro
	again.HostDir = "/run/x/resolved-again"
	rec, err := r.m.Create(ctx, "acct", "", service.CreateRequest{Snapshot: snap.ID, Volumes: []sandbox.VolumeMount{again}})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.record(rec.ID).Spec.Volumes; len(got) != 1 || got[0] != again {
		t.Fatalf("the restored sandbox mounts %+v, want %+v", got, again)
	}
	otherPath, writable, replaced := ro, ro, ro
	otherPath.Path, writable.ReadOnly, replaced.ID = "/elsewhere", false, "vol_00000000000000cc"
	for name, c := range map[string]struct {
		vols []sandbox.VolumeMount
		kind sandbox.Kind
	}{
		"no volumes":        {nil, sandbox.KindInvalid},
		"another path":      {[]sandbox.VolumeMount{otherPath}, sandbox.KindInvalid},
		"writable":          {[]sandbox.VolumeMount{writable}, sandbox.KindInvalid},
		"one more":          {[]sandbox.VolumeMount{ro, rw}, sandbox.KindInvalid},
		"a volume replaced": {[]sandbox.VolumeMount{replaced}, sandbox.KindConflict},
	} {
		_, err := r.m.Create(ctx, "acct", "", service.CreateRequest{Snapshot: snap.ID, Volumes: c.vols})
		wantErrKind(t, "a create from the snapshot with "+name, err, c.kind)
	}
	_, forks, err := r.m.Fork(ctx, "acct", "", src.ID, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range forks {
		if got := r.record(f.ID).Spec.Volumes; len(got) != 1 || got[0] != ro {
			t.Fatalf("fork %s mounts %+v, want the source's %+v", f.ID, got, ro)
		}
	}
	vmSrc := r.create(service.CreateRequest{Isolation: sandbox.IsolationMicroVM, Volumes: []sandbox.VolumeMount{ro}})
	_, err = r.m.Snapshot(ctx, "acct", vmSrc.ID, "")
	vm.mu.Lock()
	calls := vm.calls["snapshot"]
	vm.mu.Unlock()
	if sandbox.KindOf(err) != sandbox.KindNotSupported || calls != 0 {
		t.Fatalf("a snapshot of a microVM with a volume: %v (backend calls %d), want not_supported before the backend", err, calls)
	}
}
