package cluster

import (
	"context"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// detectorLock is the installation-wide lock of the failure detector: of
// many API servers, one looks at a time (what it does holds without it:
// every write is conditional).
const detectorLock = "node-detector"

// RunDetector runs the failure detector every DetectInterval until ctx
// ends: it declares lost the nodes whose lease ran out and ends their
// sandboxes node_lost. A process that does not get the lock tries again
// at its next tick.
func (c *Control) RunDetector(ctx context.Context) {
	t := time.NewTicker(c.cfg.DetectInterval)
	defer t.Stop()
	for {
		c.detect(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// detect is one pass of the failure detector.
func (c *Control) detect(ctx context.Context) {
	unlock, ok, err := c.cfg.Store.TryLock(ctx, detectorLock)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("failure detector: taking its lock", "err", err)
		}
		return
	}
	if !ok {
		return
	}
	defer unlock()
	nodes, err := c.cfg.Store.ListNodes(ctx)
	if err != nil {
		c.log.Warn("failure detector: listing nodes", "err", err)
		return
	}
	for i := range nodes {
		n := &nodes[i] // marked lost here for endRetained too
		if n.Expired && !n.Lost {
			won, err := c.cfg.Store.MarkNodeLost(ctx, n.ID, n.Epoch)
			if err != nil {
				c.log.Warn("failure detector: marking a node lost", "node", n.ID, "err", err)
				continue
			}
			if won {
				c.log.Warn("node lost: its lease ran out", "node", n.ID, "epoch", n.Epoch, "addr", n.Addr, "renewed_at", n.RenewedAt)
			}
			// A renewal that came in between keeps the node; a detector
			// elsewhere that won has marked it: the next pass sees which.
			if !won {
				continue
			}
			n.Lost = true
		}
		if n.Lost {
			c.endSandboxesOf(ctx, n.ID, n.Epoch)
		}
	}
	c.endRetained(ctx, nodes)
	c.expireLostSnapshots(ctx, nodes)
}

// endSandboxesOf ends node id's sandboxes that nothing can bring back
// elsewhere: those that ran there, and those paused with the checkpoint
// on its own disk. Paused sandboxes with a shared checkpoint stay: any
// compatible node may resume them. Only records of registrations up to
// epoch go: a node that came back (a later epoch) keeps what it took since.
func (c *Control) endSandboxesOf(ctx context.Context, id string, epoch int64) {
	recs, err := c.cfg.Store.ListSandboxes(ctx, store.SandboxFilter{
		Node: id, States: []sandbox.State{sandbox.StateStarting, sandbox.StateRunning, sandbox.StatePaused},
	})
	if err != nil {
		c.log.Warn("failure detector: listing a lost node's sandboxes", "node", id, "err", err)
		return
	}
	for _, r := range recs {
		if _, _, err := c.endLost(ctx, r.ID, id, epoch, false, lostWithNode); err != nil {
			c.log.Warn("failure detector: ending a sandbox of a lost node", "sandbox_id", r.ID, "node", id, "err", err)
		}
	}
}

// lostWithNode reports whether a record goes with its lost node.
func lostWithNode(r *sandbox.Record) bool {
	return r.Live() || r.State == sandbox.StatePaused && !shared(r)
}
