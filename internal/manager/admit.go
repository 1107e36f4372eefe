package manager

import (
	"github.com/withruntime/withruntime/internal/sandbox"
)

// admit reserves room for a sandbox of spec's size, or refuses with
// capacity_exhausted when the host's CPUs, memory or disk are handed out.
// The caller holds e.mu. An account's concurrency is not counted here but
// by the store (AdmitSandbox), so that it holds across every node.
//
// Disk: the quotas of live (starting and running) sandboxes, this one's
// included, must fit the free space of the data dir's file system times
// the overcommit ratio. Paused sandboxes are not counted: what they hold
// (their checkpoint and upper layer) is already written, so it is already
// missing from the free space, and it cannot grow while they are paused; a
// resume is admitted again, quota and all.
func (m *Manager) admit(e *entry, account string, spec sandbox.Spec) error {
	return m.fit(e, account, spec, false)
}

// fit is admit; withoutIdle only asks whether spec would fit once every
// idle pool member is gone, and reserves nothing.
func (m *Manager) fit(e *entry, account string, spec sandbox.Spec, withoutIdle bool) error {
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
	if withoutIdle {
		return nil
	}
	e.account, e.vcpus, e.memoryMiB, e.diskMiB = account, spec.VCPUs, spec.MemoryMiB, spec.DiskMiB
	m.live[e.id] = e
	return nil
}

// admitOrEvict is admit that, when the host is full, destroys idle pool
// members one by one to make room before it refuses, but none when even
// all of them would not make enough.
func (m *Manager) admitOrEvict(e *entry, account string, spec sandbox.Spec) error {
	for {
		err := m.admit(e, account, spec)
		if sandbox.KindOf(err) != sandbox.KindCapacityExhausted || m.fit(e, account, spec, true) != nil || !m.evictIdle() {
			return err
		}
	}
}

// admitRecovered counts a reattached sandbox; it is already running, so it
// is never refused.
func (m *Manager) admitRecovered(e *entry, rec *sandbox.Record) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.account, e.vcpus, e.memoryMiB, e.diskMiB = rec.Account, rec.Spec.VCPUs, rec.Spec.MemoryMiB, rec.Spec.DiskMiB
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
