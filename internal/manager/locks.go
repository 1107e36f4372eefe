package manager

import (
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// entry is one sandbox id's lifecycle lock and, while the sandbox is live
// (starting or running), the host resources it holds.
//
// Every lifecycle operation (create, stop, pause, resume, extend, network
// change, reap, meter tick, the watcher's end) holds the entry's lock for
// its whole length and re-reads the record once it has it, whatever the
// sandbox's state: paused and ended sandboxes are serialized as well as
// running ones, so two operations never both act on the backend for one
// id. The entry of an id exists while the sandbox is live or while someone
// holds or awaits its lock (refs); then it is forgotten, so ids that are
// not live cost no memory.
type entry struct {
	mu   entryLock
	id   string
	refs int // guarded by Manager.mu

	// Guarded by Manager.mu. trial says account is a trial account's
	// (admission's trial share counts it).
	account   string
	trial     bool
	vcpus     int
	memoryMiB int
	diskMiB   int
	network   sandbox.Network
	addr      netip.Addr

	// Written with both e.mu and Manager.mu held (attach, release), so
	// that a lifecycle operation may read them under e.mu and Agent under
	// Manager.mu.
	inst      sandbox.Instance
	transport *http.Transport

	// cpuWarned says the CPU counter's failure was logged once; guarded
	// by e.mu.
	cpuWarned bool
	// frozen says Fence froze the instance, and frozenAt since when
	// (what the meter bills up to); guarded by Manager.mu.
	frozen   bool
	frozenAt time.Time
	// fz orders the backend's Freeze and Thaw of the instance with the
	// frozen flag: a Fence that runs while an Unfence thaws freezes after
	// the thaw, never before it. Taken after e.mu when both are held.
	fz sync.Mutex
}

// entryLock is an entry's mutex. Its Unlock also drops the reference that
// Manager.lock took.
type entryLock struct {
	sync.Mutex
	m *Manager
	e *entry
}

// Unlock releases the lock and the caller's reference to the entry.
func (l *entryLock) Unlock() {
	l.Mutex.Unlock()
	l.m.unref(l.e)
}

// lock returns the entry of id, locked, making one when the id has none.
// Release it with e.mu.Unlock().
func (m *Manager) lock(id string) *entry {
	e := m.ref(id)
	e.mu.Lock()
	return e
}

// ref returns the entry of id with one more reference, making one when the
// id has none.
func (m *Manager) ref(id string) *entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[id]
	if e == nil {
		e = &entry{id: id}
		e.mu.m, e.mu.e = m, e
		m.entries[id] = e
	}
	e.refs++
	return e
}

// tryLock is lock without the wait: nil when an operation holds id.
func (m *Manager) tryLock(id string) *entry {
	e := m.ref(id)
	if !e.mu.TryLock() {
		m.unref(e)
		return nil
	}
	return e
}

// runLockedOrLater runs f with id locked: at once when the lock is free,
// else in the background once it is, so that the reaper's and the meter's
// passes never wait on one sandbox's long operation (a pause whose agent
// stalls, a large checkpoint) while the other sandboxes' leases and limits
// are due. At most one background wait per id; the next pass covers a
// dropped one.
func (m *Manager) runLockedOrLater(id string, f func(e *entry)) {
	if e := m.tryLock(id); e != nil {
		defer e.mu.Unlock()
		f(e)
		return
	}
	m.mu.Lock()
	if m.waiting[id] {
		m.mu.Unlock()
		return
	}
	m.waiting[id] = true
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer func() {
			m.mu.Lock()
			delete(m.waiting, id)
			m.mu.Unlock()
		}()
		e := m.lock(id)
		defer e.mu.Unlock()
		f(e)
	}()
}

// unref drops one reference and forgets the entry when it was the last
// and the sandbox holds nothing.
func (m *Manager) unref(e *entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.refs--
	if e.refs == 0 && m.live[e.id] != e && m.entries[e.id] == e {
		delete(m.entries, e.id)
	}
}

// entryCount is how many entries the manager keeps (for tests: no leak).
func (m *Manager) entryCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}
