package manager

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/template"
)

// A warm pool keeps started sandboxes of one size ready: booted, agent
// answering, network wired and offline, belonging to no account. A create
// of that size takes one (claim.go) and is answered in the time of a few
// local calls instead of a boot; the pool refills behind it (fill.go).
//
// Members are admitted like any sandbox, under no account, so they never
// push the host past admission and count toward no account's concurrency.
// They have no record in the store: listings, usage and the meter never
// see them, and a server that dies leaves them to the next one's sweep,
// which removes every sandbox without a record. So a member is handed out
// at most once, and never after a restart.

// poolKey is what a create must match to take a member: its template's
// name:tag ("" for the default image) and its size.
type poolKey struct {
	template         string
	vcpus, memoryMiB int
}

func (p Pool) key() poolKey { return poolKey{p.Template, p.VCPUs, p.MemoryMiB} }

// member is one warm sandbox. Its entry is admitted and attached (the
// watcher ends it like any sandbox if it dies); claims take it under the
// entry's lock.
type member struct {
	id  string
	key poolKey
	// template is the id of the template it started from ("": the default
	// image): a create takes it only if its name still means that one.
	template string
	inst     sandbox.Instance
	born     time.Time
}

// pools is the manager's set of warm pools.
type pools struct {
	mu      sync.Mutex
	target  map[poolKey]int
	ready   map[poolKey][]*member // oldest first
	blocked map[poolKey]bool      // the last fill found no room
	wake    chan struct{}         // a claim or an eviction: refill

	// creating counts creates and resumes under way, and busyAt is when
	// the last one, or the last request to a sandbox's agent, began
	// (unix nanoseconds): refills wait for a quiet gap, so that users'
	// starts and their first commands go first.
	creating atomic.Int32
	busyAt   atomic.Int64
}

// busy marks users' work.
func (p *pools) busy() { p.busyAt.Store(time.Now().UnixNano()) }

// quiet reports whether no create or resume runs and none began, nor an
// agent request, within gap.
func (p *pools) quiet(gap time.Duration) bool {
	return p.creating.Load() == 0 && time.Since(time.Unix(0, p.busyAt.Load())) >= gap
}

func newPools(cfg []Pool) *pools {
	p := &pools{target: map[poolKey]int{}, ready: map[poolKey][]*member{}, blocked: map[poolKey]bool{}, wake: make(chan struct{}, 1)}
	for _, c := range cfg {
		if c.Size > 0 {
			p.target[c.key()] = c.Size
		}
	}
	return p
}

// kick asks the filler to look again.
func (p *pools) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take removes and returns the oldest member of key, or nil.
func (p *pools) take(key poolKey) *member {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.ready[key]
	if len(list) == 0 {
		return nil
	}
	mem := list[0]
	p.ready[key] = list[1:]
	return mem
}

// putBack returns a member a claim could not use to the front of its
// pool, unless the pool is full again (the filler replaced it); it
// reports whether it did.
func (p *pools) putBack(mem *member) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ready[mem.key]) >= p.target[mem.key] {
		return false
	}
	p.ready[mem.key] = append([]*member{mem}, p.ready[mem.key]...)
	return true
}

func (p *pools) add(mem *member) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ready[mem.key] = append(p.ready[mem.key], mem)
}

// takeAny removes and returns the oldest member of any pool, or nil: room
// for a create that found the host full.
func (p *pools) takeAny() *member {
	p.mu.Lock()
	defer p.mu.Unlock()
	var oldest *member
	for _, list := range p.ready {
		if len(list) > 0 && (oldest == nil || list[0].born.Before(oldest.born)) {
			oldest = list[0]
		}
	}
	if oldest != nil {
		p.ready[oldest.key] = p.ready[oldest.key][1:]
	}
	return oldest
}

// takeOlder removes and returns the members born before cutoff.
func (p *pools) takeOlder(cutoff time.Time) []*member {
	p.mu.Lock()
	defer p.mu.Unlock()
	var old []*member
	for key, list := range p.ready {
		n := 0
		for n < len(list) && list[n].born.Before(cutoff) {
			n++
		}
		old = append(old, list[:n]...)
		p.ready[key] = list[n:]
	}
	return old
}

// pruneDead forgets members whose sandbox stopped by itself (their
// watcher has destroyed them), so that the filler replaces them.
func (p *pools) pruneDead() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, list := range p.ready {
		alive := list[:0]
		for _, mem := range list {
			if !isDone(mem.inst) {
				alive = append(alive, mem)
			}
		}
		p.ready[key] = alive
	}
}

// takeAll removes and returns every member.
func (p *pools) takeAll() []*member {
	return p.takeOlder(time.Unix(1<<62, 0))
}

// short returns a pool that has fewer members than its target and whose
// last fill found room, or false.
func (p *pools) short() (poolKey, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, n := range p.target {
		if len(p.ready[key]) < n && !p.blocked[key] {
			return key, true
		}
	}
	return poolKey{}, false
}

func (p *pools) setBlocked(key poolKey, blocked bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked[key] = blocked
}

// unblockAll lets every pool try again (room may have come free).
func (p *pools) unblockAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.blocked)
}

// idleIDs is the set of ready members' ids.
func (p *pools) idleIDs() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := map[string]bool{}
	for _, list := range p.ready {
		for _, mem := range list {
			ids[mem.id] = true
		}
	}
	return ids
}

// counts is the number of ready members per pool (tests, logs).
func (p *pools) counts() map[poolKey]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[poolKey]int{}
	for key, list := range p.ready {
		out[key] = len(list)
	}
	return out
}

// poolKeyOf is the pool a spec can be taken from: the pools hold sandboxes
// of the default isolation, disk and process limit, of the default image
// or of one template, with nothing set at boot but their size (and their
// template's defaults).
func (m *Manager) poolKeyOf(spec sandbox.Spec) (poolKey, bool) {
	key := poolKey{"", spec.VCPUs, spec.MemoryMiB}
	if len(spec.Volumes) > 0 {
		return key, false // a member booted without them
	}
	if spec.Root != nil {
		key.template = spec.Image
	} else if spec.Image != image.DefaultName {
		return key, false
	}
	if _, ok := m.pools.target[key]; !ok {
		return key, false
	}
	return key, spec.Isolation == m.backend().Name() && spec.DiskMiB == m.cfg.DiskMiB && spec.PidsLimit == m.cfg.PidsLimit
}

// memberSpec is what a member of key boots as, and the id of its
// template ("" for the default image). A template pool's name is
// resolved now, as the admin account's: a name that moved to another
// template fills the pool with the new one from then on.
func (m *Manager) memberSpec(ctx context.Context, key poolKey) (sandbox.Spec, string, error) {
	spec := sandbox.Spec{
		Isolation: m.backend().Name(),
		Image:     image.DefaultName, VCPUs: key.vcpus, MemoryMiB: key.memoryMiB,
		DiskMiB: m.cfg.DiskMiB, PidsLimit: m.cfg.PidsLimit,
		Timeout: m.cfg.DefaultTimeout, OnLeaseEnd: sandbox.OnLeaseEndStop,
	}
	if key.template == "" {
		return spec, "", nil
	}
	ref, err := template.ParseRef(key.template)
	if err != nil {
		return spec, "", err
	}
	if m.cfg.Templates == nil {
		return spec, "", fmt.Errorf("no template %s: this server keeps none", ref)
	}
	t, err := m.cfg.Templates.Resolve(ctx, m.cfg.AdminAccount, ref)
	if err != nil {
		return spec, "", err
	}
	spec.Image = ref.String()
	spec.Root = &sandbox.Root{Template: t.ID, Base: t.Base, Layers: t.Layers}
	// The start command runs at boot, in the template's environment; a
	// claim gives the create's (over the template's) through the agent.
	spec.Env = maps.Clone(t.Defaults.Env)
	return spec, t.ID, withDefaults(&spec, t.Defaults)
}

// PoolTemplates lists the ids of the templates the warm pools' members
// started from: their layers are in use as long as those members live.
func (m *Manager) PoolTemplates() []string {
	m.pools.mu.Lock()
	defer m.pools.mu.Unlock()
	var ids []string
	for _, list := range m.pools.ready {
		for _, mem := range list {
			if mem.template != "" {
				ids = append(ids, mem.template)
			}
		}
	}
	return ids
}
