package manager

import (
	"context"
	"fmt"
	"time"
)

// Refilling: one member at a time, after users' work (it waits up to
// fillYield for fillQuiet without a create, a resume or an agent request
// beginning: a boot beside a claimed sandbox's first command would slow
// it down on a small host), at the backend's lowest CPU priority where it
// has one (sandbox.Warmer), and only into room that admission has free. A
// pool that found no room waits for a claim, an end or the next tick
// before it tries again.
const (
	fillQuiet = 250 * time.Millisecond
	fillYield = 2 * time.Second
	fillTick  = 5 * time.Second
	// fillBackoff follows a failed boot, so that a broken host does not
	// boot in a loop.
	fillBackoff = 2 * time.Second
)

// startFilling runs the filler until the manager closes.
func (m *Manager) startFilling() {
	if len(m.pools.target) == 0 {
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(fillTick)
		defer t.Stop()
		for {
			m.pools.pruneDead()
			m.retireOld()
			for m.fillOne() {
			}
			select {
			case <-m.stop:
				return
			case <-m.pools.wake:
			case <-t.C:
				m.pools.unblockAll()
			}
		}
	}()
}

// retireOld destroys the members older than the pool's maximum age; the
// filler replaces them.
func (m *Manager) retireOld() {
	for _, mem := range m.pools.takeOlder(m.now().Add(-m.cfg.PoolMaxAge)) {
		m.destroyMember(mem, "retired: past the pool's maximum age")
	}
}

// fillOne boots one member for a pool that is short, and reports whether
// it did (so that the caller goes on).
func (m *Manager) fillOne() bool {
	key, ok := m.pools.short()
	if !ok || m.Fenced() {
		return false
	}
	for wait := time.Duration(0); !m.pools.quiet(fillQuiet) && wait < fillYield; wait += 10 * time.Millisecond {
		select {
		case <-m.stop:
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	select {
	case <-m.stop:
		return false
	default:
	}
	// A boot Close need not wait for.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() {
		select {
		case <-m.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	spec, tpl, err := m.memberSpec(ctx, key)
	if err != nil {
		// A template pool whose template is not there (yet): try again
		// later, as after a failed boot.
		m.cfg.Logger.Warn("a pool's template", "pool", poolSize(key), "err", err)
		select {
		case <-m.stop:
		case <-time.After(fillBackoff):
		}
		return false
	}
	id := newID()
	e := m.lock(id)
	defer e.mu.Unlock()
	if err := m.admit(e, tenant{}, spec); err != nil {
		m.pools.setBlocked(key, true)
		return false
	}
	began := time.Now()
	// A backend that is no Warmer starts it like any sandbox.
	inst, err := m.backend().StartWarm(ctx, id, spec)
	if err != nil {
		m.log.warn(id, "starting a pool member", err)
		if err := m.backend().Destroy(context.Background(), id); err != nil {
			m.log.warn(id, "destroying a pool member that did not start", err)
		}
		m.release(e)
		select {
		case <-m.stop:
		case <-time.After(fillBackoff):
		}
		return false
	}
	m.attach(e, inst)
	if err := m.startTemplate(ctx, e, spec); err != nil {
		m.log.warn(id, "starting a pool member's template commands", err)
		m.destroyLocked(e, "its template's start or ready command failed", false)
		select {
		case <-m.stop:
		case <-time.After(fillBackoff):
		}
		return false
	}
	select {
	case <-m.stop:
		// Closing: Close has taken the members already.
		m.destroyLocked(e, "the server is stopping", false)
		return false
	default:
	}
	m.pools.add(&member{id: id, key: key, template: tpl, inst: inst, born: m.now()})
	m.cfg.Logger.Info("pool member ready", "sandbox", id, "size", poolSize(key), "boot_ms", time.Since(began).Milliseconds())
	return true
}

func poolSize(key poolKey) string {
	s := fmt.Sprintf("%dx%d", key.vcpus, key.memoryMiB)
	if key.template != "" {
		s = key.template + ":" + s
	}
	return s
}

// destroyMember removes a member that no claim holds any more.
func (m *Manager) destroyMember(mem *member, why string) {
	e := m.lock(mem.id)
	defer e.mu.Unlock()
	if e.inst != mem.inst {
		return // it died, and its watcher removed it
	}
	m.destroyLocked(e, why, true)
}

// destroyLocked destroys a member's sandbox and frees its room, for the
// filler too when refill says so; the caller holds e.mu.
func (m *Manager) destroyLocked(e *entry, why string, refill bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.backend().Destroy(ctx, e.id); err != nil {
		m.log.warn(e.id, "destroying a pool member", err)
	}
	m.release(e)
	m.cfg.Logger.Debug("pool member destroyed", "sandbox", e.id, "why", why)
	if refill {
		m.pools.unblockAll()
		m.pools.kick()
	}
}

// evictIdle destroys one idle member, the oldest, to make room for a
// create or resume the host had no room for; it reports whether there
// was one.
func (m *Manager) evictIdle() bool {
	for {
		mem := m.pools.takeAny()
		if mem == nil {
			return false
		}
		e := m.lock(mem.id)
		alive := e.inst == mem.inst
		if alive {
			m.destroyLocked(e, "evicted: room for a create", false)
		}
		e.mu.Unlock()
		if alive {
			return true
		}
	}
}

// closePools destroys every idle member: they belong to nobody, and a
// next server could not tell them from leftovers.
func (m *Manager) closePools() {
	for _, mem := range m.pools.takeAll() {
		m.destroyMember(mem, "the server is stopping")
	}
}
