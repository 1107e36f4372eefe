package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"sync"
	"time"
)

// Isolation names. A Spec's Isolation is one of them once validated.
const (
	IsolationGVisor  = "gvisor"
	IsolationMicroVM = "microvm"
)

// Isolations lists every isolation the API knows, whether or not a server
// runs it.
var Isolations = []string{IsolationGVisor, IsolationMicroVM}

// Multi is one backend made of several, one per isolation, so that one
// server runs sandboxes of each: calls with a Spec go to the backend its
// Isolation names ("" is the default's), and calls with an id only go to
// the backend that last started, attached or resumed that id.
//
// It offers every optional capability: each backend is wrapped in an
// Adapter, which answers for a backend that lacks one.
type Multi struct {
	def      string
	backends map[string]*Adapter

	mu    sync.Mutex          // guards owner
	owner map[string]*Adapter // sandbox id -> the backend that has it
}

// NewMulti makes a Multi of backends, keyed by their names; def names the
// default.
func NewMulti(def string, backends ...Backend) (*Multi, error) {
	m := &Multi{def: def, backends: map[string]*Adapter{}, owner: map[string]*Adapter{}}
	for _, b := range backends {
		if _, dup := m.backends[b.Name()]; dup {
			return nil, fmt.Errorf("backend %q given twice", b.Name())
		}
		m.backends[b.Name()] = Adapt(b)
	}
	if _, ok := m.backends[def]; !ok {
		return nil, fmt.Errorf("default backend %q not given", def)
	}
	return m, nil
}

// Name is the default backend's name.
func (m *Multi) Name() string { return m.def }

// Offered lists the isolations this Multi runs, sorted.
func (m *Multi) Offered() []string {
	names := make([]string, 0, len(m.backends))
	for n := range m.backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// pick is the backend spec's isolation names, remembered as id's owner.
// A spec without one (a record older than isolations) goes to id's owner
// when there is one, else to the default.
func (m *Multi) pick(id string, spec Spec) (*Adapter, error) {
	name := spec.Isolation
	if name == "" {
		if b := m.ownerOf(id); b != nil {
			return b, nil
		}
		name = m.def
	}
	b, ok := m.backends[name]
	if !ok {
		return nil, Errorf(KindNotSupported, "isolation %q is not available on this server", name)
	}
	m.mu.Lock()
	m.owner[id] = b
	m.mu.Unlock()
	return b, nil
}

// ownerOf is the backend that has id, or nil.
func (m *Multi) ownerOf(id string) *Adapter {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owner[id]
}

// ownerOrNotFound is the backend that has id, or a not_found error.
func (m *Multi) ownerOrNotFound(id string) (*Adapter, error) {
	if b := m.ownerOf(id); b != nil {
		return b, nil
	}
	return nil, Errorf(KindNotFound, "sandbox %s is not on this server", id)
}

func (m *Multi) Start(ctx context.Context, id string, spec Spec) (Instance, error) {
	b, err := m.pick(id, spec)
	if err != nil {
		return nil, err
	}
	return b.Start(ctx, id, spec)
}

func (m *Multi) Attach(ctx context.Context, id string, spec Spec) (Instance, error) {
	b, err := m.pick(id, spec)
	if err != nil {
		return nil, err
	}
	return b.Attach(ctx, id, spec)
}

func (m *Multi) Resume(ctx context.Context, id string, spec Spec) (Instance, error) {
	b, err := m.pick(id, spec)
	if err != nil {
		return nil, err
	}
	return b.Resume(ctx, id, spec)
}

func (m *Multi) Pause(ctx context.Context, id string) error {
	b, err := m.ownerOrNotFound(id)
	if err != nil {
		return err
	}
	return b.Pause(ctx, id)
}

// Destroy goes to id's backend; an id none started (a sandbox of an
// earlier process not attached) goes to every backend: Destroy is
// idempotent, and a backend without the id has nothing to remove.
func (m *Multi) Destroy(ctx context.Context, id string) error {
	if b := m.ownerOf(id); b != nil {
		if err := b.Destroy(ctx, id); err != nil {
			return err
		}
		m.mu.Lock()
		if m.owner[id] == b {
			delete(m.owner, id)
		}
		m.mu.Unlock()
		return nil
	}
	var errs []error
	for _, name := range m.Offered() {
		if err := m.backends[name].Destroy(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Sweep sweeps every backend with keep: each finds only its own sandboxes.
func (m *Multi) Sweep(ctx context.Context, keep func(id string) bool) error {
	var errs []error
	for _, name := range m.Offered() {
		if err := m.backends[name].Sweep(ctx, keep); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// The optional capabilities go to id's backend through its Adapter, which
// answers for a backend that lacks one as the manager treats a backend
// without it (Meter, Warmer, digests), or with a not_supported error.

func (m *Multi) CPUTime(id string) (time.Duration, error) {
	b, err := m.ownerOrNotFound(id)
	if err != nil {
		return 0, err
	}
	return b.CPUTime(id)
}

func (m *Multi) StartWarm(ctx context.Context, id string, spec Spec) (Instance, error) {
	b, err := m.pick(id, spec)
	if err != nil {
		return nil, err
	}
	return b.StartWarm(ctx, id, spec)
}

func (m *Multi) Claim(ctx context.Context, id string) error {
	b, err := m.ownerOrNotFound(id)
	if err != nil {
		return err
	}
	return b.Claim(ctx, id)
}

func (m *Multi) SandboxAddr(id string) (netip.Addr, bool) {
	if b := m.ownerOf(id); b != nil {
		return b.SandboxAddr(id)
	}
	return netip.Addr{}, false
}

func (m *Multi) SetOnline(id string, online bool) error {
	b, err := m.ownerOrNotFound(id)
	if err != nil {
		return err
	}
	return b.SetOnline(id, online)
}

func (m *Multi) Freeze(ctx context.Context, id string) error {
	b, err := m.ownerOrNotFound(id)
	if err != nil {
		return err
	}
	return b.Freeze(ctx, id)
}

func (m *Multi) Thaw(ctx context.Context, id string) error {
	b, err := m.ownerOrNotFound(id)
	if err != nil {
		return err
	}
	return b.Thaw(ctx, id)
}

func (m *Multi) ExportRoot(ctx context.Context, id string, w io.Writer) error {
	b, err := m.ownerOrNotFound(id)
	if err != nil {
		return err
	}
	return b.ExportRoot(ctx, id, w)
}

func (m *Multi) Snapshot(ctx context.Context, id, dir string) error {
	b, err := m.ownerOrNotFound(id)
	if err != nil {
		return err
	}
	return b.Snapshot(ctx, id, dir)
}

func (m *Multi) StartSnapshot(ctx context.Context, id string, spec Spec, dir string) (Instance, error) {
	b, err := m.pick(id, spec)
	if err != nil {
		return nil, err
	}
	return b.StartSnapshot(ctx, id, spec, dir)
}

func (m *Multi) CheckpointDigest(id string) string {
	if b := m.ownerOf(id); b != nil {
		return b.CheckpointDigest(id)
	}
	return ""
}

func (m *Multi) ResumeDigest(ctx context.Context, id string, spec Spec, digest string) (Instance, error) {
	b, err := m.pick(id, spec)
	if err != nil {
		return nil, err
	}
	return b.ResumeDigest(ctx, id, spec, digest)
}

// Close closes every backend that has a Close.
func (m *Multi) Close() error {
	var errs []error
	for _, name := range m.Offered() {
		if err := m.backends[name].Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
