package httpapi

import (
	"context"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// testSnapshotID is the snapshot the fake answers for every account's
// sandbox sbx-1's (the manager's own tests hold the real ones).
const testSnapshotID = "snap_0123456789abcdef"

var _ service.Snapshots = (*fakeSandboxes)(nil)

// fakeSnapshot is a snapshot of the caller's sandbox id.
func fakeSnapshot(account, id string) *sandbox.Snapshot {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return &sandbox.Snapshot{
		ID: testSnapshotID, Account: account, SandboxID: id, SizeBytes: 1 << 20,
		Spec:      sandbox.Spec{Isolation: sandbox.IsolationGVisor, Image: "default", VCPUs: 2, MemoryMiB: 4096},
		CreatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour),
	}
}

func (f *fakeSandboxes) Snapshot(ctx context.Context, account, id, name string) (*sandbox.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.lookup("Snapshot", account, id); err != nil {
		return nil, err
	}
	return fakeSnapshot(account, id), nil
}

func (f *fakeSandboxes) Fork(ctx context.Context, account, keyID, id string, count int, keep bool) (*sandbox.Snapshot, []*sandbox.Record, error) {
	f.mu.Lock()
	_, err := f.lookup("Fork", account, id)
	f.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	var recs []*sandbox.Record
	for range count {
		r, err := f.Create(ctx, account, keyID, service.CreateRequest{Snapshot: testSnapshotID})
		if err != nil {
			return nil, nil, err
		}
		recs = append(recs, r)
	}
	if !keep {
		return nil, recs, nil
	}
	return fakeSnapshot(account, id), recs, nil
}

func (f *fakeSandboxes) GetSnapshot(ctx context.Context, account, id string) (*sandbox.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "GetSnapshot "+account+" "+id)
	if id != testSnapshotID {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "snapshot %s not found", id)
	}
	return fakeSnapshot(account, "sbx-1"), nil
}

func (f *fakeSandboxes) ListSnapshots(ctx context.Context, account string) ([]*sandbox.Snapshot, error) {
	return []*sandbox.Snapshot{fakeSnapshot(account, "sbx-1")}, nil
}

func (f *fakeSandboxes) DeleteSnapshot(ctx context.Context, account, id string) error {
	_, err := f.GetSnapshot(ctx, account, id)
	return err
}
