package httpapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// fakeSandboxes stands in for the manager, which has its own tests against
// real gVisor. It keeps records in a map, and its Agent round trippers
// carry every request to one httptest server playing the in-sandbox agent,
// whatever the URL's host says (as the Sandboxes contract asks).
type fakeSandboxes struct {
	mu sync.Mutex // guards every field below
	// recs are the sandboxes by id.
	recs map[string]*sandbox.Record
	// agentAddr is where Agent's round trippers dial.
	agentAddr string
	// err, when set, is what every call returns.
	err error
	// calls lists "Method account id" for each call.
	calls []string
	// afterAgent, when set, runs once Agent has handed out a round tripper.
	afterAgent func(r *sandbox.Record)
	// egress is each sandbox's egress log.
	egress map[string][]egress.Event
	next   int
	// portAddrs are where DialPort dials, by port (fakeports_test.go).
	portAddrs map[int]string
}

var _ service.Sandboxes = (*fakeSandboxes)(nil)

func newFakeSandboxes(agentAddr string) *fakeSandboxes {
	return &fakeSandboxes{recs: map[string]*sandbox.Record{}, egress: map[string][]egress.Event{}, agentAddr: agentAddr}
}

// add puts a sandbox of account in state.
func (f *fakeSandboxes) add(id, account string, state sandbox.State) *sandbox.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := &sandbox.Record{
		ID: id, Account: account, Backend: "fake", State: state,
		Spec: sandbox.Spec{
			Image: "debian", VCPUs: 2, MemoryMiB: 4096, Timeout: 5 * time.Minute,
			OnLeaseEnd: sandbox.OnLeaseEndStop,
			Env:        map[string]string{"TOKEN": "env-secret-value"},
			Metadata:   map[string]string{"task": "t1"},
		},
		CreatedAt: now, StartedAt: &now, LeaseEndsAt: now.Add(5 * time.Minute),
	}
	f.recs[id] = r
	return r
}

func (f *fakeSandboxes) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeSandboxes) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// lookup records the call and finds the caller's sandbox. f.mu is held.
func (f *fakeSandboxes) lookup(call, account, id string) (*sandbox.Record, error) {
	f.calls = append(f.calls, call+" "+account+" "+id)
	if f.err != nil {
		return nil, f.err
	}
	r, ok := f.recs[id]
	if !ok || r.Account != account {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "sandbox %s not found", id)
	}
	return r, nil
}

func (f *fakeSandboxes) Create(ctx context.Context, account, keyID string, req service.CreateRequest) (*sandbox.Record, error) {
	f.mu.Lock()
	f.calls = append(f.calls, "Create "+account)
	err := f.err
	f.next++
	id := fmt.Sprintf("sbx-new-%d", f.next)
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	r := f.add(id, account, sandbox.StateRunning)
	f.mu.Lock()
	defer f.mu.Unlock()
	r.Spec.Env = req.Env
	if req.VCPUs != 0 {
		r.Spec.VCPUs = req.VCPUs
	}
	return r, nil
}

func (f *fakeSandboxes) Get(ctx context.Context, account, id string) (*sandbox.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookup("Get", account, id)
}

func (f *fakeSandboxes) List(ctx context.Context, account string) ([]*sandbox.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "List "+account)
	if f.err != nil {
		return nil, f.err
	}
	var out []*sandbox.Record
	for _, r := range f.recs {
		if r.Account == account {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeSandboxes) Extend(ctx context.Context, account, id string, timeout time.Duration) (*sandbox.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.lookup("Extend", account, id)
	if err != nil {
		return nil, err
	}
	r.LeaseEndsAt = r.CreatedAt.Add(timeout)
	return r, nil
}

func (f *fakeSandboxes) SetLease(ctx context.Context, account, id string, timeout time.Duration) (*sandbox.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.lookup("SetLease", account, id)
	if err != nil {
		return nil, err
	}
	r.LeaseEndsAt = time.Now().UTC().Add(timeout)
	return r, nil
}

func (f *fakeSandboxes) Stop(ctx context.Context, account, id string) (*sandbox.Record, error) {
	return f.transition("Stop", account, id, sandbox.StateEnded)
}

func (f *fakeSandboxes) Pause(ctx context.Context, account, id string) (*sandbox.Record, error) {
	return f.transition("Pause", account, id, sandbox.StatePaused)
}

func (f *fakeSandboxes) Resume(ctx context.Context, account, id string) (*sandbox.Record, error) {
	return f.transition("Resume", account, id, sandbox.StateRunning)
}

func (f *fakeSandboxes) transition(call, account, id string, to sandbox.State) (*sandbox.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.lookup(call, account, id)
	if err != nil {
		return nil, err
	}
	c := *r
	c.State = to
	return &c, nil
}

func (f *fakeSandboxes) Agent(ctx context.Context, account, id string) (http.RoundTripper, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.lookup("Agent", account, id)
	if err != nil {
		return nil, err
	}
	if r.State != sandbox.StateRunning {
		if r.EndReason == sandbox.EndLeaseEnded {
			return nil, sandbox.Errorf(sandbox.KindLeaseEnded, "sandbox %s ended: its lease ran out", id)
		}
		return nil, sandbox.Errorf(sandbox.KindConflict, "sandbox %s is %s", id, r.State)
	}
	addr := f.agentAddr
	if f.afterAgent != nil {
		f.afterAgent(r)
	}
	var d net.Dialer
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		},
		DisableKeepAlives: true,
	}, nil
}

func (f *fakeSandboxes) SetNetwork(ctx context.Context, account, id string, n sandbox.Network) (*sandbox.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.lookup("SetNetwork", account, id)
	if err != nil {
		return nil, err
	}
	if !n.Internet && len(n.Allow) > 0 {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "network.allow needs internet: true")
	}
	r.Spec.Network = n
	return r, nil
}

func (f *fakeSandboxes) Egress(ctx context.Context, account, id string) ([]egress.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.lookup("Egress", account, id); err != nil {
		return nil, err
	}
	return append([]egress.Event(nil), f.egress[id]...), nil
}
