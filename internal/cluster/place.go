package cluster

import (
	"cmp"
	"context"
	"slices"

	"github.com/withruntime/withruntime/internal/defaults"
	"github.com/withruntime/withruntime/internal/noderpc"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
)

// size is what a create asks of a node's admission.
type size struct{ vcpus, memoryMiB, diskMiB int }

// sizeOf is what req asks of a node, with the nodes' defaults for what it
// leaves out: read from the create as the API edge converted it
// (service.CreateRequest), the one form a node's manager reads it in.
func (c *Control) sizeOf(req service.CreateRequest) size {
	s := size{req.VCPUs, req.MemoryMiB, c.cfg.DefaultDiskMiB}
	if s.vcpus == 0 {
		s.vcpus = c.cfg.DefaultVCPUs
	}
	if s.memoryMiB == 0 {
		s.memoryMiB = c.cfg.DefaultMemoryMiB
	}
	if req.DiskGiB != nil {
		s.diskMiB = *req.DiskGiB << 10
	}
	return s
}

// candidate is a node with room for a create, and how loaded it is.
type candidate struct {
	node store.Node
	load float64
}

// Create places the sandbox on the least loaded live node with room and
// asks it to create it. A node without room (capacity_exhausted) or that
// cannot be reached is passed over for the next; a node that may have
// received the create is never: no sandbox is made twice.
func (c *Control) Create(ctx context.Context, account, keyID string, req service.CreateRequest) (*sandbox.Record, error) {
	// Checked here, not left to the node: with no node that runs it, the
	// answer would be not_supported where the value is no isolation at all.
	if err := sandbox.CheckIsolation(req.Isolation); err != nil {
		return nil, err
	}
	if req.Snapshot != "" || len(req.Volumes) > 0 {
		return c.createFrom(ctx, account, keyID, req)
	}
	nodes, err := c.cfg.Store.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	sz := c.sizeOf(req)
	cands := c.candidates(nodes, sz, req.Isolation, false)
	if len(cands) == 0 {
		// No node has room by its last report. The least loaded one is
		// asked all the same: it checks the request (a size beyond every
		// node's limits is invalid there, not a want of room), and it may
		// have freed room since.
		cands = c.candidates(nodes, sz, req.Isolation, true)
		if len(cands) == 0 && slices.ContainsFunc(nodes, live) {
			// Live nodes, none of which runs it: room will not help.
			return nil, sandbox.Errorf(sandbox.KindNotSupported, "isolation %s is run by no node of this cluster", req.Isolation)
		}
		cands = cands[:min(len(cands), 1)]
	}
	body := noderpc.CreateRequest{Account: account, KeyID: keyID, Request: req}
	for _, cd := range cands {
		cl, err := c.client(cd.node)
		if err != nil {
			return nil, err
		}
		rec, err := cl.Create(ctx, body)
		if err == nil {
			if err := trust(rec, "", account, []string{cd.node.ID}); err != nil {
				c.log.Error("node answered a create with a record not its own", "node", cd.node.ID, "err", err)
				return nil, err
			}
		}
		switch {
		case err == nil:
			c.place(cd.node, sz)
			c.log.Info("sandbox placed", "sandbox_id", rec.ID, "node", cd.node.ID, "load", cd.load)
			return rec, nil
		case noderpc.IsDialError(err):
			c.log.Warn("node unreachable; trying the next", "node", cd.node.ID, "addr", cd.node.Addr, "err", err)
		case noderpc.IsTransportError(err):
			c.log.Error("create sent but not answered", "node", cd.node.ID, "err", err)
			return nil, sandbox.Wrap(sandbox.KindInternal, err, "node "+cd.node.ID+" did not answer; the sandbox may exist")
		case sandbox.KindOf(err) == sandbox.KindCapacityExhausted:
			c.log.Info("node full; trying the next", "node", cd.node.ID, "err", err)
		default:
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, sandbox.Errorf(sandbox.KindCapacityExhausted, "no node has room for a sandbox of %d vCPUs and %d MiB", sz.vcpus, sz.memoryMiB)
}

// createFrom places a create from a snapshot on the snapshot's node
// (snapshotNode), the one node that can start it; one that mounts volumes
// on theirs (MountsNode). A refusal there (no room, say) is the answer,
// never a start on another node. A snapshot's sandbox mounts the
// snapshot's read-only volumes, which live on the snapshot's node (its
// source was placed there); the node resolves them again.
func (c *Control) createFrom(ctx context.Context, account, keyID string, req service.CreateRequest) (*sandbox.Record, error) {
	var n store.Node
	var sz size
	var err error
	what := "the volumes it mounts"
	if req.Snapshot != "" {
		var sn *sandbox.Snapshot
		n, sn, err = c.snapshotNode(ctx, account, req.Snapshot)
		if err != nil {
			return nil, err
		}
		sz, what = size{sn.Spec.VCPUs, sn.Spec.MemoryMiB, sn.Spec.DiskMiB}, "snapshot "+sn.ID
	} else {
		names := make([]string, 0, len(req.Volumes))
		for _, m := range req.Volumes {
			names = append(names, m.Name)
		}
		n, err = c.MountsNode(ctx, account, names)
		sz = c.sizeOf(req)
	}
	if err != nil {
		return nil, err
	}
	cl, err := c.client(n)
	if err != nil {
		return nil, err
	}
	rec, err := cl.Create(ctx, noderpc.CreateRequest{Account: account, KeyID: keyID, Request: req})
	if err != nil && noderpc.IsDialError(err) {
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "node "+n.ID+", which holds "+what+", cannot be reached")
	}
	if err != nil && noderpc.IsTransportError(err) {
		return nil, sandbox.Wrap(sandbox.KindInternal, err, "node "+n.ID+" did not answer; the sandbox may exist")
	}
	if err != nil {
		return nil, err
	}
	if err := trust(rec, "", account, []string{n.ID}); err != nil {
		c.log.Error("node answered a create with a record not its own", "node", n.ID, "err", err)
		return nil, err
	}
	c.place(n, sz)
	c.log.Info("sandbox placed on the node of "+what, "sandbox_id", rec.ID, "node", n.ID)
	return rec, nil
}

// candidates are the live nodes that run isolation ("": any) and whose
// capacity after overcommit, less what they reported and what this process
// placed since, fits sz (all such nodes when all is set): least loaded
// first (the fuller of CPU and memory), ties by id.
func (c *Control) candidates(nodes []store.Node, sz size, isolation string, all bool) []candidate {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []candidate
	for _, n := range nodes {
		if !live(n) || !runs(n, isolation) {
			continue
		}
		used := size{n.Load.VCPUs, n.Load.MemoryMiB, n.Load.DiskMiB}
		if p, ok := c.placed[n.ID]; ok && p.renewedAt.Equal(n.RenewedAt) {
			used.vcpus += p.vcpus
			used.memoryMiB += p.memoryMiB
			used.diskMiB += p.diskMiB
		}
		oc := n.Overcommit
		if oc <= 0 {
			oc = 1
		}
		cpus, mem, disk := float64(n.CPUs)*oc, float64(n.MemoryMiB)*oc, float64(n.DiskMiB)*oc
		// A node that reports no disk capacity does not admit disk.
		fits := float64(used.vcpus+sz.vcpus) <= cpus && float64(used.memoryMiB+sz.memoryMiB) <= mem &&
			(n.DiskMiB <= 0 || float64(used.diskMiB+sz.diskMiB) <= disk)
		if !fits && !all {
			continue
		}
		out = append(out, candidate{n, max(float64(used.vcpus)/cpus, float64(used.memoryMiB)/mem)})
	}
	slices.SortFunc(out, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.load, b.load), cmp.Compare(a.node.ID, b.node.ID))
	})
	return out
}

// runs reports whether n runs isolation ("": the node's default, which any
// node runs). A node registered before nodes named their isolations runs
// the isolation every server runs only (defaults.Isolation).
func runs(n store.Node, isolation string) bool {
	switch {
	case isolation == "":
		return true
	case len(n.Isolations) == 0:
		return isolation == defaults.Isolation
	}
	return slices.Contains(n.Isolations, isolation)
}

// place counts a create on n until n reports its load again.
func (c *Control) place(n store.Node, sz size) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.placed[n.ID]
	if !p.renewedAt.Equal(n.RenewedAt) {
		p = placement{renewedAt: n.RenewedAt}
	}
	p.vcpus += sz.vcpus
	p.memoryMiB += sz.memoryMiB
	p.diskMiB += sz.diskMiB
	c.placed[n.ID] = p
}
