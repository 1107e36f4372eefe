package manager

import (
	"context"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// admit reserves room for a sandbox of spec's size, or refuses with
// capacity_exhausted when the host's CPUs, memory or disk are handed out.
// The caller holds e.mu. An account's concurrency is not counted here but
// by the store (AdmitSandbox), so that it holds across every node; the
// shares of the host that trial accounts and each account may hold are
// (checkShares, share.go).
//
// Disk: the quotas of live (starting and running) sandboxes, this one's
// included, must fit the free space of the data dir's file system times
// the overcommit ratio. Paused sandboxes are not counted: what they hold
// (their checkpoint and upper layer) is already written, so it is already
// missing from the free space, and it cannot grow while they are paused; a
// resume is admitted again, quota and all.
func (m *Manager) admit(e *entry, t tenant, spec sandbox.Spec) error {
	return m.reserveRoom(e, t, spec, false)
}

// reserveRoom is admit: it reserves spec's room when it fits. withoutIdle
// only asks whether spec would fit once every idle pool member is gone, and
// reserves nothing.
func (m *Manager) reserveRoom(e *entry, t tenant, spec sandbox.Spec, withoutIdle bool) error {
	free, freeErr := m.diskFree()
	var idle map[string]bool
	if withoutIdle {
		idle = m.pools.idleIDs()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var cpus, mem, disk int
	for _, o := range m.live {
		if idle[o.id] {
			continue
		}
		cpus += o.vcpus
		mem += o.memoryMiB
		disk += o.diskMiB
	}
	maxCPU := float64(m.cfg.HostCPUs) * m.cfg.Overcommit
	maxMem := float64(m.cfg.HostMemoryMiB) * m.cfg.Overcommit
	if float64(cpus+spec.VCPUs) > maxCPU || float64(mem+spec.MemoryMiB) > maxMem {
		return sandbox.Errorf(sandbox.KindCapacityExhausted,
			"this host is full: %d of %.0f vCPUs and %d of %.0f MiB are in use", cpus, maxCPU, mem, maxMem)
	}
	if freeErr != nil {
		return sandbox.Wrap(sandbox.KindInternal, freeErr, "could not read the data dir's free disk space")
	}
	if free >= 0 {
		maxDisk := float64(free>>20) * m.cfg.Overcommit
		if float64(disk+spec.DiskMiB) > maxDisk {
			return sandbox.Errorf(sandbox.KindCapacityExhausted,
				"this host's disk is full: live sandboxes hold %d MiB of disk quotas and this one needs %d MiB more, past %.0f MiB (the data dir's %d MiB free times the overcommit ratio %g)",
				disk, spec.DiskMiB, maxDisk, free>>20, m.cfg.Overcommit)
		}
	}
	// Idle pool members are nobody's: a share is full with or without them.
	if err := m.checkShares(t, spec, m.hostRoom(free), nil); err != nil {
		return err
	}
	if withoutIdle {
		return nil
	}
	e.account, e.trial, e.vcpus, e.memoryMiB, e.diskMiB = t.account, t.trial, spec.VCPUs, spec.MemoryMiB, spec.DiskMiB
	m.live[e.id] = e
	return nil
}

// admitOrEvict is admit that, when the host is full, destroys idle pool
// members one by one to make room before it refuses, but none when even
// all of them would not make enough.
func (m *Manager) admitOrEvict(e *entry, t tenant, spec sandbox.Spec) error {
	for {
		err := m.admit(e, t, spec)
		if sandbox.KindOf(err) != sandbox.KindCapacityExhausted || m.reserveRoom(e, t, spec, true) != nil || !m.evictIdle() {
			return err
		}
	}
}

// admitRecovered counts a reattached sandbox; it is already running, so it
// is never refused. Whether its account is a trial's is read from the
// store, so that the trials' share counts it after a restart.
func (m *Manager) admitRecovered(ctx context.Context, e *entry, rec *sandbox.Record) bool {
	t := m.tenantIn(ctx, rec.Account)
	m.mu.Lock()
	defer m.mu.Unlock()
	e.account, e.trial, e.vcpus, e.memoryMiB, e.diskMiB = t.account, t.trial, rec.Spec.VCPUs, rec.Spec.MemoryMiB, rec.Spec.DiskMiB
	m.live[e.id] = e
	return true
}

// diskFree is the free space, in bytes, of the file system that holds
// sandboxes' disks; -1 when the manager does not know it (no data dir).
func (m *Manager) diskFree() (int64, error) {
	if m.cfg.DiskFree == nil {
		return -1, nil
	}
	return m.cfg.DiskFree()
}
