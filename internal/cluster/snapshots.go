package cluster

import (
	"context"
	"errors"

	"github.com/withruntime/withruntime/internal/noderpc"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
)

// A snapshot lives on the disk of the node that took it (its record's
// Node): snapshots and forks are taken there, and a create from a
// snapshot is placed there, on no other node, and only while that node is
// live and still of the snapshot's compat.
var _ service.Snapshots = (*Control)(nil)

// Snapshot has the sandbox's node take a snapshot of it.
func (c *Control) Snapshot(ctx context.Context, account, id, name string) (*sandbox.Snapshot, error) {
	rec, cl, err := c.sandboxNode(ctx, account, id)
	if err != nil {
		return nil, err
	}
	sn, err := answer(cl.Snapshot(ctx, id, noderpc.SnapshotRequest{Account: account, Name: name}))
	if err != nil {
		return nil, err
	}
	return sn, trustSnapshot(sn, rec)
}

// Fork has the sandbox's node fork it: the snapshot and the forks are all
// made there, all or none, the account's concurrency checked against the
// shared store (every node's sandboxes) before anything is made.
func (c *Control) Fork(ctx context.Context, account, keyID, id string, count int, keep bool) (*sandbox.Snapshot, []*sandbox.Record, error) {
	rec, cl, err := c.sandboxNode(ctx, account, id)
	if err != nil {
		return nil, nil, err
	}
	res, err := answer(cl.Fork(ctx, id, noderpc.ForkRequest{Account: account, KeyID: keyID, Count: count, Keep: keep}))
	if err != nil {
		return nil, nil, err
	}
	if res.Snapshot != nil {
		if err := trustSnapshot(res.Snapshot, rec); err != nil {
			return nil, nil, err
		}
	}
	for _, r := range res.Sandboxes {
		if err := trust(r, "", rec.Account, []string{rec.Node}); err != nil {
			return nil, nil, err
		}
	}
	return res.Snapshot, res.Sandboxes, nil
}

// trustSnapshot checks a snapshot a node returned of the sandbox rec.
func trustSnapshot(sn *sandbox.Snapshot, rec *sandbox.Record) error {
	if sn.ID == "" || sn.SandboxID != rec.ID || sn.Account != rec.Account || sn.Node != rec.Node {
		return sandbox.Errorf(sandbox.KindInternal, "node %s answered with snapshot %q of sandbox %q on node %q, not of %s", rec.Node, sn.ID, sn.SandboxID, sn.Node, rec.ID)
	}
	return nil
}

// GetSnapshot returns a snapshot of the account from the store; another
// account's is not found, as an unknown one.
func (c *Control) GetSnapshot(ctx context.Context, account, id string) (*sandbox.Snapshot, error) {
	sn, err := c.cfg.Store.GetSnapshot(ctx, id)
	if errors.Is(err, sandbox.ErrNotFound) || err == nil && account != "" && sn.Account != account {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "snapshot %s not found", id)
	}
	return sn, err
}

// ListSnapshots returns the account's snapshots, every node's, newest
// first.
func (c *Control) ListSnapshots(ctx context.Context, account string) ([]*sandbox.Snapshot, error) {
	return c.cfg.Store.ListSnapshots(ctx, account)
}

// DeleteSnapshot has the snapshot's node remove it, files and record. A
// snapshot whose node is gone (lost, its lease over, or unregistered)
// loses its record here: its files went with the node, and a node that
// comes back removes the files no record names (the manager's sweep).
func (c *Control) DeleteSnapshot(ctx context.Context, account, id string) error {
	sn, err := c.GetSnapshot(ctx, account, id)
	if err != nil {
		return err
	}
	n, err := c.cfg.Store.GetNode(ctx, sn.Node)
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return err
	}
	if err != nil || !live(*n) {
		c.log.Info("snapshot record removed: its node is gone", "snapshot_id", id, "node", sn.Node)
		return c.cfg.Store.DeleteSnapshot(ctx, id)
	}
	cl, err := c.client(*n)
	if err != nil {
		return err
	}
	_, err = answer(struct{}{}, cl.DeleteSnapshot(ctx, sn.Account, id))
	return err
}

// snapshotNode is the one node a create from snapshot id may go to: the
// node whose disk holds it, while it is live and of the snapshot's
// compat. Anything else is refused (conflict), never started cold
// elsewhere.
func (c *Control) snapshotNode(ctx context.Context, account, id string) (store.Node, *sandbox.Snapshot, error) {
	sn, err := c.GetSnapshot(ctx, account, id)
	if err != nil {
		return store.Node{}, nil, err
	}
	n, err := c.cfg.Store.GetNode(ctx, sn.Node)
	switch {
	case errors.Is(err, sandbox.ErrNotFound) || err == nil && !live(*n):
		return store.Node{}, nil, sandbox.Errorf(sandbox.KindConflict, "snapshot %s is on the disk of node %s, which is lost: it can be started once that node is back", id, sn.Node)
	case err != nil:
		return store.Node{}, nil, err
	case n.Compat != sn.Compat:
		return store.Node{}, nil, sandbox.Errorf(sandbox.KindConflict, "snapshot %s was made with %q; its node %s now offers %q, and cannot restore it", id, sn.Compat, n.ID, n.Compat)
	}
	return *n, sn, nil
}
