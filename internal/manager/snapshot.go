package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
)

var _ service.Snapshots = (*Manager)(nil)

// maxSnapshotName bounds a snapshot's label.
const maxSnapshotName = 128

// snapshotID is the form of the ids newSnapshotID makes: nothing else is
// ever a directory name under SnapshotDir.
var snapshotID = regexp.MustCompile(`^snap_[0-9a-f]{16}$`)

func newSnapshotID() string {
	var b [8]byte
	rand.Read(b[:])
	return "snap_" + hex.EncodeToString(b[:])
}

// snapshotsOffered refuses snapshots on a manager without their store or
// directory, or whose backend cannot take them.
func (m *Manager) snapshotsOffered() error {
	if m.cfg.Snapshots == nil || m.cfg.SnapshotDir == "" {
		return sandbox.Errorf(sandbox.KindNotSupported, "this server keeps no snapshots")
	}
	return nil
}

// Snapshot saves running sandbox id of account whole (memory, processes,
// disk) under a new snapshot id; the sandbox keeps running. It is held
// (no stop, pause or other snapshot of it) meanwhile.
func (m *Manager) Snapshot(ctx context.Context, account, id, name string) (out *sandbox.Snapshot, err error) {
	ctx, span := m.startOp(ctx, "snapshot", account, id)
	defer span.end(new(*sandbox.Record), &err)
	if err := m.snapshotsOffered(); err != nil {
		return nil, err
	}
	if len(name) > maxSnapshotName || !utf8.ValidString(name) {
		return nil, invalid("a snapshot's name is at most %d bytes of UTF-8", maxSnapshotName)
	}
	e, rec, err := m.lockRunning(ctx, account, id, "snapshot")
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	return m.snapshotLocked(ctx, e, rec, name)
}

// snapshotLocked takes the snapshot; the caller holds e.mu.
func (m *Manager) snapshotLocked(ctx context.Context, e *entry, rec *sandbox.Record, name string) (*sandbox.Snapshot, error) {
	if err := snapshotVolumes(rec.Spec); err != nil {
		return nil, err
	}
	if !m.backend().Supports(sandbox.CapSnapshot) {
		return nil, sandbox.Errorf(sandbox.KindNotSupported, "the %s isolation cannot snapshot a running sandbox", rec.Spec.Isolation)
	}
	if err := m.cfg.StorageQuota.Check(ctx, rec.Account, 0); err != nil {
		return nil, err
	}
	snap := &sandbox.Snapshot{
		ID: newSnapshotID(), Account: rec.Account, Name: name, SandboxID: rec.ID, Spec: rec.Spec,
		Node: m.cfg.Node, Compat: m.cfg.NodeCompat, KeyID: rec.KeyID,
	}
	dir := filepath.Join(m.cfg.SnapshotDir, snap.ID)
	if err := os.MkdirAll(m.cfg.SnapshotDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	began := time.Now()
	err := m.backend().Snapshot(ctx, e.id, dir)
	snap.FreezeMs = time.Since(began).Milliseconds()
	if err != nil {
		os.RemoveAll(dir)
		m.log.warn(e.id, "taking a snapshot", err)
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "the snapshot could not be taken")
	}
	size, err := dirSize(dir)
	if err == nil {
		snap.SizeBytes = size
		err = m.cfg.StorageQuota.Check(ctx, rec.Account, size)
	}
	if err == nil {
		snap.CreatedAt = m.now()
		snap.ExpiresAt = snap.CreatedAt.Add(m.cfg.SnapshotRetention)
		err = m.cfg.Snapshots.PutSnapshot(context.WithoutCancel(ctx), snap)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	m.log.info(e.id, "snapshot taken", "snapshot_id", snap.ID, "size_bytes", snap.SizeBytes, "freeze_ms", snap.FreezeMs)
	return snap, nil
}

// dirSize is the bytes of the regular files under dir (what the backend
// wrote there). A sparse file (a microVM's disk) counts what it holds, not
// its holes.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blocks*512 < fi.Size() {
				n += st.Blocks*512 - fi.Size()
			}
		}
		return err
	})
	return n, err
}

// GetSnapshot returns a snapshot of the account; another account's is
// not found, as an unknown one.
func (m *Manager) GetSnapshot(ctx context.Context, account, id string) (*sandbox.Snapshot, error) {
	if err := m.snapshotsOffered(); err != nil {
		return nil, err
	}
	s, err := m.cfg.Snapshots.GetSnapshot(ctx, id)
	if errors.Is(err, sandbox.ErrNotFound) || (err == nil && s.Account != account) {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "snapshot %s not found", id)
	}
	return s, err
}

// ListSnapshots returns the account's snapshots, newest first.
func (m *Manager) ListSnapshots(ctx context.Context, account string) ([]*sandbox.Snapshot, error) {
	if err := m.snapshotsOffered(); err != nil {
		return nil, err
	}
	return m.cfg.Snapshots.ListSnapshots(ctx, account)
}

// DeleteSnapshot removes a snapshot of the account: its files, then its
// record. Sandboxes started from it do not need it.
func (m *Manager) DeleteSnapshot(ctx context.Context, account, id string) error {
	s, err := m.GetSnapshot(ctx, account, id)
	if err != nil {
		return err
	}
	if s.Node != m.cfg.Node {
		return sandbox.Errorf(sandbox.KindConflict, "snapshot %s is on the disk of node %s; only that node can remove it", id, s.Node)
	}
	return m.removeSnapshot(ctx, s)
}

func (m *Manager) removeSnapshot(ctx context.Context, s *sandbox.Snapshot) error {
	// Its last stretch goes into the ledger first: a removal that cannot
	// bill keeps the snapshot (the reaper tries again).
	if err := m.billSnapshot(ctx, s, m.now(), 0); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return err
	}
	if snapshotID.MatchString(s.ID) {
		if err := os.RemoveAll(filepath.Join(m.cfg.SnapshotDir, s.ID)); err != nil {
			return err
		}
	}
	return m.cfg.Snapshots.DeleteSnapshot(context.WithoutCancel(ctx), s.ID)
}

// snapshotBillEvery is how often the reaper bills snapshots' storage
// (one listing, one write per snapshot); a removal bills the rest at once.
const snapshotBillEvery = time.Minute

// billSnapshots puts the storage of this node's snapshots into the ledger
// up to now, at the storage price (zero by default: then only the marks
// move, so that a price set later never bills the time before it).
func (m *Manager) billSnapshots(ctx context.Context) {
	if m.snapshotsOffered() != nil {
		return
	}
	now := m.now()
	if last := m.snapshotsBilled.Load(); last != 0 && now.Sub(time.Unix(0, last)) < snapshotBillEvery {
		return
	}
	m.snapshotsBilled.Store(now.UnixNano())
	all, err := m.cfg.Snapshots.ListSnapshots(ctx, "")
	if err != nil {
		m.cfg.Logger.Warn("listing snapshots to bill", "err", err)
		return
	}
	for _, s := range all {
		if s.Node != m.cfg.Node {
			continue
		}
		if err := m.billSnapshot(ctx, s, now, snapshotBillEvery); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			m.cfg.Logger.Warn("billing a snapshot", "snapshot_id", s.ID, "err", err)
		}
	}
}

// billSnapshot bills s's storage from its mark (or its creation) to now,
// never past its retention's end, when that stretch is at least min. Its
// mark moves in the same write, so no stretch is billed twice; a biller
// that was first makes this one read the record again.
func (m *Manager) billSnapshot(ctx context.Context, s *sandbox.Snapshot, now time.Time, min time.Duration) error {
	ctx = context.WithoutCancel(ctx)
	for range 3 {
		start := s.BilledUntil
		if start.IsZero() {
			start = s.CreatedAt
		}
		until := now
		if until.After(s.ExpiresAt) {
			until = s.ExpiresAt
		}
		if !until.After(start) || until.Sub(start) < min {
			return nil
		}
		cost := m.cfg.Prices.Stored(s.SizeBytes, until.Sub(start).Milliseconds())
		err := m.cfg.Snapshots.BillSnapshot(ctx, s.ID, s.BilledUntil, until,
			store.UsageDelta{Day: day(until), Account: s.Account, KeyID: s.KeyID, CostNanos: cost})
		if sandbox.KindOf(err) != sandbox.KindConflict {
			return err
		}
		if s, err = m.cfg.Snapshots.GetSnapshot(ctx, s.ID); err != nil {
			return err
		}
	}
	return sandbox.Errorf(sandbox.KindConflict, "snapshot %s: billed by another meanwhile, three times", s.ID)
}

// expireSnapshots removes this node's snapshots whose retention is over.
func (m *Manager) expireSnapshots(ctx context.Context) {
	if m.snapshotsOffered() != nil {
		return
	}
	old, err := m.cfg.Snapshots.ExpiredSnapshots(ctx, m.now())
	if err != nil {
		m.cfg.Logger.Warn("listing expired snapshots", "err", err)
		return
	}
	for _, s := range old {
		if s.Node != m.cfg.Node {
			continue
		}
		if err := m.removeSnapshot(ctx, s); err != nil {
			m.cfg.Logger.Warn("removing an expired snapshot", "snapshot_id", s.ID, "err", err)
			continue
		}
		m.cfg.Logger.Info("snapshot removed: its retention ended", "snapshot_id", s.ID, "account", s.Account)
	}
}

// sweepSnapshots removes what SnapshotDir holds that no snapshot record
// of this node names: a snapshot cut short by a server's end.
func (m *Manager) sweepSnapshots(ctx context.Context) {
	if m.snapshotsOffered() != nil {
		return
	}
	entries, err := os.ReadDir(m.cfg.SnapshotDir)
	if err != nil {
		return
	}
	for _, de := range entries {
		s, err := m.cfg.Snapshots.GetSnapshot(ctx, de.Name())
		if errors.Is(err, sandbox.ErrNotFound) || (err == nil && s.Node != m.cfg.Node) {
			os.RemoveAll(filepath.Join(m.cfg.SnapshotDir, de.Name()))
		}
	}
}

// fromSnapshot is the spec of a sandbox that req starts from a snapshot,
// and the snapshot: its isolation, image, size and environment, with
// req's lease, network, metadata and cost cap (checked as any create's),
// and req's env over the snapshot's (for the commands it runs from now).
func (m *Manager) fromSnapshot(ctx context.Context, account string, req service.CreateRequest) (sandbox.Spec, *sandbox.Snapshot, error) {
	snap, err := m.GetSnapshot(ctx, account, req.Snapshot)
	if err != nil {
		return sandbox.Spec{}, nil, err
	}
	if err := sameVolumes(snap, req.Volumes); err != nil {
		return sandbox.Spec{}, nil, err
	}
	s := snap.Spec
	// The same volumes, as this create resolved (and claimed) them.
	s.Volumes = req.Volumes
	switch {
	case req.Image != "" && req.Image != s.Image, req.Isolation != "" && req.Isolation != s.Isolation,
		req.VCPUs != 0 && req.VCPUs != s.VCPUs, req.MemoryMiB != 0 && req.MemoryMiB != s.MemoryMiB, req.DiskGiB != nil:
		return sandbox.Spec{}, nil, invalid("a sandbox started from a snapshot has the snapshot's image, isolation, vcpus, memory and disk; leave them out")
	case snap.Node != m.cfg.Node:
		return sandbox.Spec{}, nil, sandbox.Errorf(sandbox.KindConflict, "snapshot %s is on the disk of node %s; only that node can start it", snap.ID, snap.Node)
	case snap.Compat != m.cfg.NodeCompat:
		return sandbox.Spec{}, nil, sandbox.Errorf(sandbox.KindConflict, "snapshot %s was made with %q; this host offers %q, and cannot restore it", snap.ID, snap.Compat, m.cfg.NodeCompat)
	}
	r := req
	// Its size is the snapshot's, checked when its source was made.
	r.Snapshot, r.Image, r.Isolation, r.VCPUs, r.MemoryMiB = "", "", "", 0, 0
	checked, err := m.checkSpec(r)
	if err != nil {
		return sandbox.Spec{}, nil, err
	}
	s.Timeout, s.OnLeaseEnd, s.Metadata = checked.Timeout, checked.OnLeaseEnd, checked.Metadata
	s.Network, s.MaxCostMicros = checked.Network, checked.MaxCostMicros
	s.AutoResume = checked.AutoResume
	if len(req.Env) > 0 {
		env := maps.Clone(s.Env)
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, checked.Env)
		s.Env = env
	}
	return s, snap, nil
}

// startBackend boots sandbox id: from the snapshot's files when from is
// set, else afresh.
func (m *Manager) startBackend(ctx context.Context, id string, spec sandbox.Spec, from *sandbox.Snapshot) (sandbox.Instance, error) {
	if from == nil {
		return m.backend().Start(ctx, id, spec)
	}
	return m.backend().StartSnapshot(ctx, id, spec, filepath.Join(m.cfg.SnapshotDir, from.ID))
}

// afterStart runs a new sandbox's template commands; one started from a
// snapshot ran them already (its processes go on), and takes the
// create's environment when it named one. The caller holds e.mu.
func (m *Manager) afterStart(ctx context.Context, e *entry, spec sandbox.Spec, from *sandbox.Snapshot, env bool) error {
	if from == nil {
		return m.startTemplate(ctx, e, spec)
	}
	if env {
		if err := m.putEnv(ctx, e, spec.Env); err != nil {
			return sandbox.Wrap(sandbox.KindInternal, err, "the sandbox's environment could not be set")
		}
	}
	return nil
}

// snapshotVolumes refuses a snapshot of a sandbox whose volumes its
// copies could not mount: a writable one (each copy would be a writer,
// past the rule of one), and any on a microVM (whose machine cannot be
// saved with them). Read-only volumes are mounted again, read-only, by
// every sandbox started from the snapshot.
func snapshotVolumes(s sandbox.Spec) error {
	if err := pausable(s); err != nil {
		return sandbox.Errorf(sandbox.KindNotSupported, "a microVM that mounts volumes cannot be snapshotted or forked (its virtio-fs devices cannot be saved)")
	}
	for _, v := range s.Volumes {
		if !v.ReadOnly {
			return sandbox.Errorf(sandbox.KindNotSupported, "a sandbox that mounts volume %s writable cannot be snapshotted or forked: each copy would be a writer; mount it read_only", v.Name)
		}
	}
	return nil
}

// sameVolumes checks that a create from snap mounts exactly the
// snapshot's volumes (the restored processes hold files under their
// paths): the same volumes, paths and modes, in order. The API fills
// them in from the snapshot when a create names none.
func sameVolumes(snap *sandbox.Snapshot, got []sandbox.VolumeMount) error {
	want := snap.Spec.Volumes
	if len(got) != len(want) {
		if len(got) == 0 {
			return sandbox.Errorf(sandbox.KindInvalid, "snapshot %s mounts %d volumes; a sandbox started from it mounts them too", snap.ID, len(want))
		}
		return invalid("a sandbox started from a snapshot mounts the snapshot's volumes; leave volumes out")
	}
	for i, w := range want {
		g := got[i]
		switch {
		case g.Name != w.Name || g.Path != w.Path || g.ReadOnly != w.ReadOnly:
			return invalid("a sandbox started from a snapshot mounts the snapshot's volumes; leave volumes out")
		case g.ID != w.ID:
			return sandbox.Errorf(sandbox.KindConflict, "volume %s of snapshot %s was removed since (a volume of that name is another)", w.Name, snap.ID)
		}
	}
	return nil
}
