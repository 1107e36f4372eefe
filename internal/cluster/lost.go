package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// maxStaleRetries bounds the re-reads of a record that keeps changing
// under an end: another process is busy with it, and the next pass will
// see it again.
const maxStaleRetries = 10

// endLost ends sandbox id with reason node_lost while its record still
// names node, passes want and became live under an epoch up to epoch (the
// registration given up on; 0, a record from before epochs, counts as
// old), by a conditional write: a record that moved on (resumed elsewhere,
// ended by its node, taken by the node that came back) is left as it is.
// The node's entry is read again first: one that registered again or
// renewed since is not lost, and its sandboxes are left to it. Usage is
// left as it is too: the sandbox is billed to its node's last report. It
// returns the record as last read and whether this call ended it.
func (c *Control) endLost(ctx context.Context, id, node string, epoch int64, stop bool, want func(*sandbox.Record) bool) (*sandbox.Record, bool, error) {
	for range maxStaleRetries {
		rec, err := c.cfg.Store.GetSandbox(ctx, id)
		if err != nil {
			return nil, false, err
		}
		if rec.Node != node || !want(rec) || rec.NodeEpoch > epoch {
			return rec, false, nil
		}
		if still, err := c.stillGone(ctx, node, epoch); err != nil || !still {
			return rec, false, err
		}
		if interruptedSharedResume(rec) && !stop {
			// Its checkpoint is still in the shared storage, whole: the
			// sandbox is paused again, for any compatible node to resume.
			if err := rec.Move(sandbox.StatePaused); err != nil {
				return nil, false, err
			}
			err = c.cfg.Store.PutSandbox(ctx, rec)
			if err == nil {
				c.log.Warn("sandbox paused again: its node was lost while it resumed", "sandbox_id", id, "node", node, "account", rec.Account)
				return rec, false, nil
			}
			if !errors.Is(err, store.ErrStale) {
				return nil, false, fmt.Errorf("pausing %s again: %w", id, err)
			}
			continue
		}
		now := c.now()
		if err := rec.End(sandbox.EndNodeLost, fmt.Sprintf("node %s stopped renewing its lease", node), now); err != nil {
			return nil, false, err
		}
		err = c.cfg.Store.PutSandbox(ctx, rec)
		if err == nil {
			c.log.Warn("sandbox ended: its node is lost", "sandbox_id", id, "node", node, "account", rec.Account, "cost_nanos", rec.Usage.CostNanos)
			return rec, true, nil
		}
		if !errors.Is(err, store.ErrStale) {
			return nil, false, fmt.Errorf("ending %s: %w", id, err)
		}
	}
	return nil, false, sandbox.Errorf(sandbox.KindConflict, "sandbox %s kept changing; try again", id)
}

// stillGone reports whether node's entry is still registration epoch and
// not serving (lost, or its lease over). A node without an entry is gone
// for good.
func (c *Control) stillGone(ctx context.Context, node string, epoch int64) (bool, error) {
	n, err := c.cfg.Store.GetNode(ctx, node)
	if errors.Is(err, sandbox.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return n.Epoch == epoch && !live(*n), nil
}

// interruptedSharedResume reports whether r is a resume of a shared
// checkpoint that its node had not finished: the resume's starting record
// keeps PausedAt, and the checkpoint stays in the shared storage until the
// restore is done.
func interruptedSharedResume(r *sandbox.Record) bool {
	return r.State == sandbox.StateStarting && r.PausedAt != nil && shared(r)
}
