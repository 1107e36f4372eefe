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
// names node and passes want, by a conditional write: a record that moved
// on (resumed elsewhere, ended by its node) is left as it is. Usage is
// left as it is too: the sandbox is billed to its node's last report. It
// returns the record as last read and whether this call ended it.
func (c *Control) endLost(ctx context.Context, id, node string, want func(*sandbox.Record) bool) (*sandbox.Record, bool, error) {
	for range maxStaleRetries {
		rec, err := c.cfg.Store.GetSandbox(ctx, id)
		if err != nil {
			return nil, false, err
		}
		if rec.Node != node || !want(rec) {
			return rec, false, nil
		}
		now := c.now()
		rec.State, rec.EndedAt = sandbox.StateEnded, &now
		rec.EndReason, rec.EndMessage = sandbox.EndNodeLost, fmt.Sprintf("node %s stopped renewing its lease", node)
		rec.RetentionEndsAt = nil
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
