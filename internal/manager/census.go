package manager

import (
	"context"
	"fmt"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Observer hears what the server's metrics count of the manager's work;
// nil in Config hears nothing.
type Observer interface {
	// Created tells of a create of isolation that ended with outcome
	// ("pool_hit", "cold", or the error kind that refused it) after d.
	Created(isolation, outcome string, d time.Duration)
}

// Census is what the manager holds at one moment, for the server's
// metrics: no account, id or secret in it.
type Census struct {
	// Sandboxes counts this node's sandboxes that have not ended, by
	// isolation and state.
	Sandboxes map[[2]string]int
	// What admission handed out against the host's capacity (vCPUs and
	// MiB; capacities with the overcommit ratio; DiskMiBCapacity is -1
	// when the free space could not be read).
	VCPUsHeld, MemoryMiBHeld, DiskMiBHeld          int
	VCPUsCapacity, MemoryMiBCapacity, DiskCapacity float64
	// PoolReady is the ready members of each pool, by its --pool name
	// (without the size wanted).
	PoolReady map[string]int
}

// Census counts what the manager holds now.
func (m *Manager) Census(ctx context.Context) (Census, error) {
	c := Census{Sandboxes: map[[2]string]int{}, PoolReady: map[string]int{}}
	recs, err := m.mine(ctx, sandbox.StateStarting, sandbox.StateRunning, sandbox.StatePaused)
	if err != nil {
		return c, err
	}
	for _, r := range recs {
		c.Sandboxes[[2]string{withIsolation(r).Isolation, string(r.State)}]++
	}
	free, ferr := m.diskFree()
	m.mu.Lock()
	for _, e := range m.live {
		c.VCPUsHeld += e.vcpus
		c.MemoryMiBHeld += e.memoryMiB
		c.DiskMiBHeld += e.diskMiB
	}
	m.mu.Unlock()
	c.VCPUsCapacity = float64(m.cfg.HostCPUs) * m.cfg.Overcommit
	c.MemoryMiBCapacity = float64(m.cfg.HostMemoryMiB) * m.cfg.Overcommit
	c.DiskCapacity = -1
	if ferr == nil && free >= 0 {
		c.DiskCapacity = float64(free>>20) * m.cfg.Overcommit
	}
	for key, n := range m.pools.counts() {
		c.PoolReady[poolName(key)] = n
	}
	for _, p := range m.cfg.Pools {
		if _, ok := c.PoolReady[poolName(p.key())]; !ok {
			c.PoolReady[poolName(p.key())] = 0
		}
	}
	return c, nil
}

// poolName is a pool's --pool name without its size.
func poolName(k poolKey) string {
	s := fmt.Sprintf("%dx%d", k.vcpus, k.memoryMiB)
	if k.template != "" {
		s = k.template + ":" + s
	}
	return s
}

// observeCreate tells the observer how a create that began at start ended.
func (m *Manager) observeCreate(start time.Time, isolation string, pooled bool, err error) {
	if m.cfg.Observer == nil {
		return
	}
	outcome := "cold"
	switch {
	case err != nil:
		outcome = string(sandbox.KindOf(err))
		if outcome == "" {
			outcome = string(sandbox.KindInternal)
		}
	case pooled:
		outcome = "pool_hit"
	}
	if isolation == "" {
		isolation = "default"
	}
	m.cfg.Observer.Created(isolation, outcome, time.Since(start))
}
