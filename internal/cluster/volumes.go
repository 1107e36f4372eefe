package cluster

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/withruntime/withruntime/internal/noderpc"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// A volume lives on one node (its record's Node): the node with the most
// free disk when it was made. Every call about it is forwarded there, and
// a create that mounts it is placed there, on no other node. While that
// node is lost or gone its volumes are unavailable (errVolumeGone), never
// empty.

// errVolumeGone is the refusal of a call about a volume whose node is not
// serving.
func errVolumeGone(name, node string) error {
	return sandbox.Errorf(sandbox.KindCapacityExhausted, "volume %s is on node %s, which is unavailable (lost, or its lease ran out): its files are there, and come back with the node", name, node)
}

// VolumeHost returns the client of the live node a new volume goes to:
// the one with the most free disk by its last report (less what this
// process placed since), ties by id.
func (c *Control) VolumeHost(ctx context.Context) (*noderpc.Client, error) {
	nodes, err := c.cfg.Store.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	n, ok := c.mostFreeDisk(nodes)
	if !ok {
		return nil, sandbox.Errorf(sandbox.KindCapacityExhausted, "no live node can hold a volume")
	}
	return c.client(n)
}

// mostFreeDisk is the live node of nodes with the most free disk.
func (c *Control) mostFreeDisk(nodes []store.Node) (store.Node, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	free := func(n store.Node) int64 {
		used := int64(n.Load.DiskMiB)
		if p, ok := c.placed[n.ID]; ok && p.renewedAt.Equal(n.RenewedAt) {
			used += int64(p.diskMiB)
		}
		return n.DiskMiB - used
	}
	var up []store.Node
	for _, n := range nodes {
		if live(n) {
			up = append(up, n)
		}
	}
	if len(up) == 0 {
		return store.Node{}, false
	}
	return slices.MinFunc(up, func(a, b store.Node) int {
		return cmp.Or(cmp.Compare(free(b), free(a)), cmp.Compare(a.ID, b.ID))
	}), true
}

// VolumeNode returns account's volume name and the client of the node
// that holds it, or errVolumeGone.
func (c *Control) VolumeNode(ctx context.Context, account, name string) (*noderpc.Client, *store.Volume, error) {
	v, err := c.cfg.Store.GetVolume(ctx, account, name)
	if err != nil {
		return nil, nil, err
	}
	n, err := c.volumeNode(ctx, v)
	if err != nil {
		return nil, nil, err
	}
	cl, err := c.client(n)
	return cl, v, err
}

// volumeNode is the live node that holds v, or errVolumeGone.
func (c *Control) volumeNode(ctx context.Context, v *store.Volume) (store.Node, error) {
	n, err := c.cfg.Store.GetNode(ctx, v.Node)
	if errors.Is(err, sandbox.ErrNotFound) || err == nil && !live(*n) {
		return store.Node{}, errVolumeGone(v.Name, v.Node)
	}
	if err != nil {
		return store.Node{}, err
	}
	return *n, nil
}

// MountsNode returns the node a create of account that mounts the named
// volumes goes to: theirs, which must be one node, and live.
func (c *Control) MountsNode(ctx context.Context, account string, names []string) (store.Node, error) {
	var first *store.Volume
	for _, name := range names {
		v, err := c.cfg.Store.GetVolume(ctx, account, name)
		if err != nil {
			return store.Node{}, err
		}
		if first == nil {
			first = v
		} else if v.Node != first.Node {
			return store.Node{}, sandbox.Errorf(sandbox.KindConflict, "volumes %s and %s are on different nodes (%s, %s): the volumes of one sandbox must be on one node", first.Name, v.Name, first.Node, v.Node)
		}
	}
	if first == nil {
		return store.Node{}, sandbox.Errorf(sandbox.KindInvalid, "no volume named")
	}
	return c.volumeNode(ctx, first)
}
