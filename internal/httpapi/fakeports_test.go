package httpapi

import (
	"context"
	"net"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// The fake's service.Ports: a sandbox's port is a listener of the test
// (portAddrs), dialed directly; the agent's hop to the sandbox's loopback
// is internal/agent's and test/e2e's.

var _ service.Ports = (*fakeSandboxes)(nil)

// setPort makes port of every sandbox reach addr.
func (f *fakeSandboxes) setPort(port int, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.portAddrs == nil {
		f.portAddrs = map[int]string{}
	}
	f.portAddrs[port] = addr
}

func (f *fakeSandboxes) DialPort(ctx context.Context, account, id string, port int) (net.Conn, error) {
	f.mu.Lock()
	r, err := f.lookup("DialPort", account, id)
	addr := f.portAddrs[port]
	var state sandbox.State
	if r != nil {
		state = r.State
	}
	f.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case state == sandbox.StateEnded:
		return nil, sandbox.Errorf(sandbox.KindNotFound, "sandbox %s has ended", id)
	case state != sandbox.StateRunning:
		return nil, sandbox.Errorf(sandbox.KindConflict, "sandbox %s is %s", id, state)
	case addr == "":
		return nil, sandbox.Errorf(sandbox.KindBadGateway, "nothing answers on port %d in the sandbox", port)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func (f *fakeSandboxes) SetPreview(ctx context.Context, account, id string, change func(*sandbox.Preview) error) (*sandbox.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.lookup("SetPreview", account, id)
	if err != nil {
		return nil, err
	}
	var p sandbox.Preview
	if r.Preview != nil {
		p = *r.Preview
		p.PublicPorts = append([]int(nil), p.PublicPorts...)
	}
	if err := change(&p); err != nil {
		return nil, err
	}
	r.Preview = &p
	c := *r
	return &c, nil
}

func (f *fakeSandboxes) Lookup(ctx context.Context, id string) (*sandbox.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recs[id]
	if !ok {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "sandbox %s not found", id)
	}
	c := *r
	return &c, nil
}

var _ service.Metrics = (*fakeSandboxes)(nil)

// Metrics answers two made-up samples of the caller's sandbox.
func (f *fakeSandboxes) Metrics(ctx context.Context, account, id string, start, end time.Time) ([]sandbox.Metric, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.lookup("Metrics", account, id); err != nil {
		return nil, err
	}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var out []sandbox.Metric
	for _, m := range []sandbox.Metric{{Timestamp: t0, CPUCount: 2}, {Timestamp: t0.Add(5 * time.Second), CPUCount: 2, CPUUsedPct: 50}} {
		if (start.IsZero() || !m.Timestamp.Before(start)) && (end.IsZero() || !m.Timestamp.After(end)) {
			out = append(out, m)
		}
	}
	return out, nil
}
