package sandbox

import (
	"context"
	"net"
	"net/netip"
	"reflect"
	"sync"
	"testing"
	"time"
)

// recBackend records the calls it is given. "full" ones offer every
// optional capability; plain ones only the Backend seam.
type recBackend struct {
	name string
	mu   sync.Mutex
	log  []string
}

func (b *recBackend) note(call, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log = append(b.log, call+" "+id)
}

func (b *recBackend) calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.log...)
}

type nopInstance struct{}

func (nopInstance) DialAgent(context.Context) (net.Conn, error) { return nil, nil }
func (nopInstance) Done() <-chan struct{}                       { return nil }
func (nopInstance) Cause() (EndReason, string)                  { return "", "" }

func (b *recBackend) Name() string { return b.name }
func (b *recBackend) Start(_ context.Context, id string, _ Spec) (Instance, error) {
	b.note("start", id)
	return nopInstance{}, nil
}
func (b *recBackend) Attach(_ context.Context, id string, _ Spec) (Instance, error) {
	b.note("attach", id)
	return nopInstance{}, nil
}
func (b *recBackend) Pause(_ context.Context, id string) error { b.note("pause", id); return nil }
func (b *recBackend) Resume(_ context.Context, id string, _ Spec) (Instance, error) {
	b.note("resume", id)
	return nopInstance{}, nil
}
func (b *recBackend) Destroy(_ context.Context, id string) error { b.note("destroy", id); return nil }
func (b *recBackend) Sweep(_ context.Context, keep func(string) bool) error {
	b.note("sweep", map[bool]string{true: "keep", false: "drop"}[keep("x")])
	return nil
}

type fullBackend struct{ recBackend }

func (b *fullBackend) CPUTime(id string) (time.Duration, error) {
	b.note("cpu", id)
	return time.Second, nil
}
func (b *fullBackend) StartWarm(_ context.Context, id string, _ Spec) (Instance, error) {
	b.note("startwarm", id)
	return nopInstance{}, nil
}
func (b *fullBackend) Claim(_ context.Context, id string) error { b.note("claim", id); return nil }
func (b *fullBackend) SandboxAddr(id string) (netip.Addr, bool) {
	b.note("addr", id)
	return netip.MustParseAddr("198.18.0.2"), true
}
func (b *fullBackend) SetOnline(id string, _ bool) error         { b.note("online", id); return nil }
func (b *fullBackend) Freeze(_ context.Context, id string) error { b.note("freeze", id); return nil }
func (b *fullBackend) Thaw(_ context.Context, id string) error   { b.note("thaw", id); return nil }
func (b *fullBackend) CheckpointDigest(id string) string         { b.note("digest", id); return "sha256:1" }
func (b *fullBackend) ResumeDigest(_ context.Context, id string, _ Spec, _ string) (Instance, error) {
	b.note("resumedigest", id)
	return nopInstance{}, nil
}

func newTestMulti(t *testing.T) (*Multi, *fullBackend, *recBackend) {
	t.Helper()
	g := &fullBackend{recBackend{name: IsolationGVisor}}
	v := &recBackend{name: IsolationMicroVM}
	m, err := NewMulti(IsolationGVisor, g, v)
	if err != nil {
		t.Fatal(err)
	}
	return m, g, v
}

func TestMultiDispatch(t *testing.T) {
	ctx := context.Background()
	m, g, v := newTestMulti(t)
	if got := m.Name(); got != IsolationGVisor {
		t.Fatalf("Name: got %q, want %q", got, IsolationGVisor)
	}
	if got, want := m.Offered(), []string{IsolationGVisor, IsolationMicroVM}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Offered: got %v, want %v", got, want)
	}
	m.Start(ctx, "a", Spec{})                            // "" is the default's
	m.Start(ctx, "b", Spec{Isolation: IsolationMicroVM}) // the other
	m.Attach(ctx, "c", Spec{Isolation: IsolationMicroVM})
	m.StartWarm(ctx, "d", Spec{Isolation: IsolationMicroVM}) // no Warmer: Start
	m.StartWarm(ctx, "e", Spec{Isolation: IsolationGVisor})
	for _, id := range []string{"a", "b", "c"} {
		if err := m.Pause(ctx, id); err != nil {
			t.Fatalf("Pause %s: %v", id, err)
		}
	}
	m.Resume(ctx, "b", Spec{Isolation: IsolationMicroVM})
	m.Claim(ctx, "d")
	m.Claim(ctx, "e")
	m.CPUTime("a")
	m.SandboxAddr("a")
	m.Freeze(ctx, "a")
	m.Thaw(ctx, "a")
	m.CheckpointDigest("a")
	m.Destroy(ctx, "a")
	m.Destroy(ctx, "b")
	m.Sweep(ctx, func(string) bool { return true })

	wantG := []string{"start a", "startwarm e", "pause a", "claim e", "cpu a", "addr a", "freeze a", "thaw a", "digest a", "destroy a", "sweep keep"}
	wantV := []string{"start b", "attach c", "start d", "pause b", "pause c", "resume b", "destroy b", "sweep keep"}
	if got := g.calls(); !reflect.DeepEqual(got, wantG) {
		t.Errorf("gvisor calls: got %v, want %v", got, wantG)
	}
	if got := v.calls(); !reflect.DeepEqual(got, wantV) {
		t.Errorf("microvm calls: got %v, want %v", got, wantV)
	}
}

// A destroy of an id nobody started here (a leftover of an earlier
// process) reaches every backend; of a known id, only its own.
func TestMultiDestroyUnknown(t *testing.T) {
	ctx := context.Background()
	m, g, v := newTestMulti(t)
	if err := m.Destroy(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	m.Start(ctx, "new", Spec{Isolation: IsolationMicroVM})
	m.Destroy(ctx, "new")
	if got, want := g.calls(), []string{"destroy old"}; !reflect.DeepEqual(got, want) {
		t.Errorf("gvisor calls: got %v, want %v", got, want)
	}
	if got, want := v.calls(), []string{"destroy old", "start new", "destroy new"}; !reflect.DeepEqual(got, want) {
		t.Errorf("microvm calls: got %v, want %v", got, want)
	}
}

func TestMultiRefusals(t *testing.T) {
	ctx := context.Background()
	m, _, v := newTestMulti(t)
	m.Start(ctx, "vm", Spec{Isolation: IsolationMicroVM})
	resumeDigest := func() error {
		_, err := m.ResumeDigest(ctx, "vm", Spec{Isolation: IsolationMicroVM}, "sha256:1")
		return err
	}
	start := func() error { _, err := m.Start(ctx, "x", Spec{Isolation: "firecracker"}); return err }
	tests := []struct {
		name string
		call func() error
		want Kind
	}{
		{"unknown isolation", start, KindNotSupported},
		{"pause of an unknown id", func() error { return m.Pause(ctx, "nobody") }, KindNotFound},
		{"freeze without a Freezer", func() error { return m.Freeze(ctx, "vm") }, KindNotSupported},
		{"online without network", func() error { return m.SetOnline("vm", true) }, KindNotSupported},
		{"digest without a digester", resumeDigest, KindNotSupported},
	}
	for _, tt := range tests {
		err := tt.call()
		if got := KindOf(err); err == nil || got != tt.want {
			t.Errorf("%s: got %v (kind %s), want kind %s", tt.name, err, got, tt.want)
		}
	}
	if cpu, err := m.CPUTime("vm"); cpu != 0 || err != nil {
		t.Errorf("CPUTime of a backend without a Meter: got %v, %v; want 0 and no error (memory billed only)", cpu, err)
	}
	if _, err := m.CPUTime("nobody"); KindOf(err) != KindNotFound {
		t.Errorf("CPUTime of an unknown id: got %v, want kind %s", err, KindNotFound)
	}
	if _, ok := m.SandboxAddr("vm"); ok {
		t.Errorf("SandboxAddr of a backend without network: got ok, want none")
	}
	if got := v.calls(); !reflect.DeepEqual(got, []string{"start vm"}) {
		t.Errorf("microvm calls: got %v, want only the start", got)
	}
	if _, err := NewMulti(IsolationMicroVM, &recBackend{name: IsolationGVisor}); err == nil {
		t.Errorf("NewMulti without its default: got no error")
	}
}

// A spec without an isolation (a record from before they existed) goes to
// the backend that has the id, and only without one to the default.
func TestMultiSpecWithoutIsolation(t *testing.T) {
	ctx := context.Background()
	m, g, v := newTestMulti(t)
	m.Start(ctx, "vm", Spec{Isolation: IsolationMicroVM})
	m.Pause(ctx, "vm")
	m.Resume(ctx, "vm", Spec{})
	m.Attach(ctx, "old", Spec{})
	if got, want := v.calls(), []string{"start vm", "pause vm", "resume vm"}; !reflect.DeepEqual(got, want) {
		t.Errorf("microvm calls: got %v, want %v", got, want)
	}
	if got, want := g.calls(), []string{"attach old"}; !reflect.DeepEqual(got, want) {
		t.Errorf("gvisor calls: got %v, want %v", got, want)
	}
}
