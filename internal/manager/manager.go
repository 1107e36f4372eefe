package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// Manager runs sandboxes on one host.
type Manager struct {
	cfg Config
	log *sandboxLogger

	mu     sync.Mutex // guards live, byAddr and the entries' account, network and addr
	live   map[string]*entry
	byAddr map[netip.Addr]*entry

	stop chan struct{}
	wg   sync.WaitGroup
}

// entry is a sandbox that holds host resources (starting or running) or
// is being changed. Its mutex serializes lifecycle operations on it.
type entry struct {
	mu        sync.Mutex
	id        string
	account   string
	vcpus     int
	memoryMiB int
	network   sandbox.Network
	addr      netip.Addr
	inst      sandbox.Instance
	transport *http.Transport
}

// New makes a manager. Call Recover before serving and Close at the end.
func New(cfg Config) (*Manager, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Manager{
		cfg:    cfg,
		log:    &sandboxLogger{cfg.Logger},
		live:   map[string]*entry{},
		byAddr: map[netip.Addr]*entry{},
		stop:   make(chan struct{}),
	}, nil
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return "sbx" + hex.EncodeToString(b[:])
}

func (m *Manager) now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// get loads a record of the account; another account's sandbox is not
// found, so ids leak nothing.
func (m *Manager) get(ctx context.Context, account, id string) (*sandbox.Record, error) {
	rec, err := m.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if account != "" && rec.Account != account {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "sandbox %s not found", id)
	}
	return rec, nil
}

// lock returns the entry of id, making one for a sandbox that holds no
// resources yet, locked.
func (m *Manager) lock(id string) *entry {
	m.mu.Lock()
	e := m.live[id]
	if e == nil {
		e = &entry{id: id}
	}
	m.mu.Unlock()
	e.mu.Lock()
	return e
}

// admit reserves room for a sandbox of the given size, or refuses with
// concurrency_limit_reached when the account runs concurrency sandboxes
// already, or capacity_exhausted when the host is full.
func (m *Manager) admit(e *entry, account string, concurrency, vcpus, memoryMiB int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var cpus, mem, running int
	for _, o := range m.live {
		cpus += o.vcpus
		mem += o.memoryMiB
		if o.account == account {
			running++
		}
	}
	if concurrency > 0 && running >= concurrency {
		return sandbox.Errorf(sandbox.KindConcurrency, "account %s runs %d sandboxes, its limit", account, running)
	}
	maxCPU := float64(m.cfg.HostCPUs) * m.cfg.Overcommit
	maxMem := float64(m.cfg.HostMemoryMiB) * m.cfg.Overcommit
	if float64(cpus+vcpus) > maxCPU || float64(mem+memoryMiB) > maxMem {
		return sandbox.Errorf(sandbox.KindCapacityExhausted,
			"this host is full: %d of %.0f vCPUs and %d of %.0f MiB are in use", cpus, maxCPU, mem, maxMem)
	}
	e.account, e.vcpus, e.memoryMiB = account, vcpus, memoryMiB
	m.live[e.id] = e
	return nil
}

// release forgets a sandbox's resources.
func (m *Manager) release(e *entry) {
	m.mu.Lock()
	if m.live[e.id] == e {
		delete(m.live, e.id)
	}
	m.unindexAddrLocked(e)
	m.mu.Unlock()
	if e.transport != nil {
		e.transport.CloseIdleConnections()
	}
	e.inst, e.transport = nil, nil
}

// attach records a live instance in the entry and watches it.
func (m *Manager) attach(e *entry, inst sandbox.Instance) {
	e.inst = inst
	e.transport = newAgentTransport(inst)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		select {
		case <-inst.Done():
			reason, msg := inst.Cause()
			m.ended(e, inst, reason, msg)
		case <-m.stop:
		}
	}()
}

// ended handles a sandbox that stopped by itself.
func (m *Manager) ended(e *entry, inst sandbox.Instance, reason sandbox.EndReason, msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.inst != inst {
		return // stopped or paused on purpose meanwhile
	}
	ctx := context.Background()
	m.finish(ctx, e, reason, msg)
}

// finish settles the sandbox's usage, destroys it on the backend and
// records its end. The caller holds e.mu.
func (m *Manager) finish(ctx context.Context, e *entry, reason sandbox.EndReason, msg string) (*sandbox.Record, error) {
	ctx = context.WithoutCancel(ctx)
	rec, err := m.cfg.Store.GetSandbox(ctx, e.id)
	if err != nil {
		return nil, err
	}
	now := m.now()
	if rec.State != sandbox.StateEnded {
		// Before the teardown: the CPU counter goes with the sandbox.
		m.settle(ctx, e, rec, now)
	}
	if err := m.cfg.Backend.Destroy(ctx, e.id); err != nil {
		m.log.warn(e.id, "destroying sandbox", err)
	}
	m.release(e)
	if m.cfg.EgressState != nil {
		m.cfg.EgressState.Release(e.id)
	}
	if rec.State == sandbox.StateEnded {
		return rec, nil
	}
	rec.State, rec.EndedAt, rec.EndReason, rec.EndMessage = sandbox.StateEnded, &now, reason, msg
	rec.RetentionEndsAt = nil
	if err := m.cfg.Store.PutSandbox(ctx, rec); err != nil {
		return nil, fmt.Errorf("recording end of %s: %w", e.id, err)
	}
	m.log.info(e.id, "sandbox ended", "reason", string(reason), "cost_nanos", rec.Usage.CostNanos)
	return rec, nil
}

// Close stops the reaper and the watchers, and closes the backend if it
// can be. Sandboxes keep running: the next server reattaches them.
func (m *Manager) Close() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	m.wg.Wait()
	if c, ok := m.cfg.Backend.(io.Closer); ok {
		if err := c.Close(); err != nil {
			m.cfg.Logger.Warn("closing the backend", "err", err)
		}
	}
}

// ListAll lists the sandboxes of every account (for the CLI's embedded
// mode and tests).
func (m *Manager) list(ctx context.Context, account string, states ...sandbox.State) ([]*sandbox.Record, error) {
	return m.cfg.Store.ListSandboxes(ctx, store.SandboxFilter{Account: account, States: states})
}

// DefaultConcurrency is how many sandboxes an account runs at once unless
// it says otherwise.
func (m *Manager) DefaultConcurrency() int { return m.cfg.DefaultConcurrency }
