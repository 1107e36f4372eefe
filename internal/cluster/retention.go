package cluster

import (
	"context"

	"github.com/withruntime/withruntime/internal/noderpc"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// endRetained removes the shared checkpoints whose node is lost (or has
// no entry) once their retention is over, as that node's reaper would
// have: a compatible live node stops each with reason retention_ended,
// which removes the checkpoint from the shared storage. One that no live
// node can restore (nor so remove) is left for a later pass, and said
// once. entries are the registry's nodes as this pass left them.
func (c *Control) endRetained(ctx context.Context, entries []store.Node) {
	byID := map[string]store.Node{}
	for _, n := range entries {
		byID[n.ID] = n
	}
	recs, err := c.cfg.Store.ListSandboxes(ctx, store.SandboxFilter{States: []sandbox.State{sandbox.StatePaused}})
	if err != nil {
		c.log.Warn("failure detector: listing paused sandboxes", "err", err)
		return
	}
	now := c.now()
	seen := map[string]bool{}
	for _, r := range recs {
		n, ok := byID[r.Node]
		if !shared(r) || r.RetentionEndsAt == nil || now.Before(*r.RetentionEndsAt) || ok && !n.Lost {
			continue
		}
		seen[r.ID] = true
		nodes, err := c.compatible(ctx, r)
		if err != nil {
			c.log.Warn("failure detector: listing nodes", "err", err)
			return
		}
		if len(nodes) == 0 {
			if c.unremovable(r.ID, true) {
				c.log.Warn("retention of a lost node's shared checkpoint is over, but no live node can remove it; it stays until one can",
					"sandbox_id", r.ID, "node", r.Node, "compat", r.Checkpoint.Compat)
			}
			continue
		}
		c.unremovable(r.ID, false)
		req := noderpc.OpRequest{Reason: sandbox.EndRetentionEnded}
		rec, err := c.onEachReq(ctx, nodes, r.ID, noderpc.OpStop, req, r.Node)
		if err != nil {
			c.log.Warn("failure detector: removing a lost node's shared checkpoint at the end of its retention", "sandbox_id", r.ID, "node", r.Node, "err", err)
			continue
		}
		if rec.EndReason != sandbox.EndRetentionEnded {
			// A node that does not know the reason stops it all the same.
			c.log.Warn("shared checkpoint of a lost node removed at the end of its retention, under another end reason", "sandbox_id", r.ID, "node", r.Node, "end_reason", rec.EndReason)
			continue
		}
		c.log.Info("shared checkpoint of a lost node removed: its retention ended", "sandbox_id", r.ID, "node", r.Node)
	}
	// Forget what no longer waits (removed, resumed, ended).
	c.mu.Lock()
	for id := range c.unremoved {
		if !seen[id] {
			delete(c.unremoved, id)
		}
	}
	c.mu.Unlock()
}

// unremovable records whether sandbox id waits for a node that can remove
// its checkpoint, and reports whether that is new.
func (c *Control) unremovable(id string, waits bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !waits {
		delete(c.unremoved, id)
		return false
	}
	if c.unremoved[id] {
		return false
	}
	c.unremoved[id] = true
	return true
}

// expireLostSnapshots removes the records of snapshots whose retention is
// over and whose node is lost (or has no entry): a live node's reaper
// removes its own, files and record, but a lost node's would stay listed
// and counted in its account's storage quota. The node sweeps the files
// no record names when it comes back. entries are the registry's nodes as
// this pass left them.
func (c *Control) expireLostSnapshots(ctx context.Context, entries []store.Node) {
	live := map[string]bool{}
	for _, n := range entries {
		if !n.Lost {
			live[n.ID] = true
		}
	}
	snaps, err := c.cfg.Store.ListSnapshots(ctx, "")
	if err != nil {
		c.log.Warn("failure detector: listing snapshots", "err", err)
		return
	}
	now := c.now()
	for _, sn := range snaps {
		if live[sn.Node] || sn.ExpiresAt.IsZero() || now.Before(sn.ExpiresAt) {
			continue
		}
		if err := c.cfg.Store.DeleteSnapshot(ctx, sn.ID); err != nil {
			c.log.Warn("failure detector: removing the record of a lost node's expired snapshot", "snapshot_id", sn.ID, "node", sn.Node, "err", err)
			continue
		}
		c.log.Info("record of a lost node's snapshot removed: its retention ended", "snapshot_id", sn.ID, "node", sn.Node)
	}
}
