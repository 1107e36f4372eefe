package volume

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/storagequota"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// TestServiceRules: one writer at a time (a live record's mount and a
// create in flight both count), readers alongside, delete refused while
// either holds the volume, the quota, an unknown and another account's
// volume alike.
func TestServiceRules(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts file systems")
	}
	h, _ := openTestHost(t)
	st := storetest.OpenBolt(t)
	ctx := t.Context()
	svc, err := NewService(ctx, Config{Store: st, Host: h, Quota: storagequota.New(2)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, "acct", "data", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, "acct", "big", 2); sandbox.KindOf(err) != sandbox.KindForbidden {
		t.Fatalf("past the quota: %v", err)
	}
	if _, err := svc.Create(ctx, "acct", "data", 1); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("same name: %v", err)
	}
	w := []Mount{{Name: "data", Path: "/data"}}
	ro := []Mount{{Name: "data", Path: "/ro", ReadOnly: true}}

	mounts, release, err := svc.Resolve(ctx, "acct", w)
	if err != nil || len(mounts) != 1 || mounts[0].HostDir != h.Dir(mounts[0].ID) {
		t.Fatalf("first writer: %+v %v", mounts, err)
	}
	if _, _, err := svc.Resolve(ctx, "acct", w); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("second writer while the first is being created: %v", err)
	}
	if err := svc.Delete(ctx, "acct", "data"); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("delete while a create claims it: %v", err)
	}
	_, releaseRO, err := svc.Resolve(ctx, "acct", ro)
	if err != nil {
		t.Fatalf("a reader beside the writer: %v", err)
	}
	releaseRO()
	// The create made its record live; its claim goes.
	rec := &sandbox.Record{ID: "sbx0000000000000001", Account: "acct", Spec: sandbox.Spec{Volumes: mounts}, CreatedAt: time.Now()}
	if err := rec.Move(sandbox.StateStarting); err != nil {
		t.Fatal(err)
	}
	if err := st.PutSandbox(ctx, rec); err != nil {
		t.Fatal(err)
	}
	release()
	release() // twice is once
	if _, _, err := svc.Resolve(ctx, "acct", w); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("second writer while the first runs: %v", err)
	}
	v, err := svc.Get(ctx, "acct", "data")
	if err != nil || len(v.MountedBy) != 1 || v.MountedBy[0] != rec.ID {
		t.Fatalf("mounted_by: %+v %v", v, err)
	}
	if err := svc.Delete(ctx, "acct", "data"); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("delete while mounted: %v", err)
	}
	for _, acct := range []string{"other", "acct"} {
		name := map[string]string{"other": "data", "acct": "nope"}[acct]
		if _, _, err := svc.Resolve(ctx, acct, []Mount{{Name: name, Path: "/x"}}); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Errorf("%s's %s: %v, want not_found", acct, name, err)
		}
	}
	if err := rec.End(sandbox.EndStopped, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := st.PutSandbox(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := svc.Delete(ctx, "acct", "data"); err != nil {
		t.Fatalf("delete once its sandbox ended: %v", err)
	}
	if imgs, _ := filepath.Glob(filepath.Join(h.images, "vol_*.img")); len(imgs) != 1 {
		// openTestHost's own volume stays; the service's is gone.
		t.Fatalf("images left: %v", imgs)
	}
}

// TestServiceDiskAdmission: a volume's whole size must fit the data dir's
// free disk besides what the live sandboxes were promised.
func TestServiceDiskAdmission(t *testing.T) {
	h, _ := openTestHost(t)
	st := storetest.OpenBolt(t)
	var promised int64
	svc, err := NewService(t.Context(), Config{Store: st, Host: h, DiskPromised: func() int64 { return promised }})
	if err != nil {
		t.Fatal(err)
	}
	promised = 1 << 60
	if _, err := svc.Create(t.Context(), "acct", "data", 1); sandbox.KindOf(err) != sandbox.KindCapacityExhausted {
		t.Fatalf("with the disk promised away: %v, want capacity_exhausted", err)
	}
	promised = 0
	if _, err := svc.Create(t.Context(), "acct", "data", 1); err != nil {
		t.Fatalf("with the disk free: %v", err)
	}
}
