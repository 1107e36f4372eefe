package server

import (
	"io"
	"log/slog"
	"testing"

	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// TestBackendsShareOnePlumbing: every backend a server makes is given the
// one network plumbing of its egress wiring, so that a multi backend's
// backends share one table and one pool of addresses.
func TestBackendsShareOnePlumbing(t *testing.T) {
	old := registrations
	t.Cleanup(func() { registrations = old })
	var got []sandbox.HostNetwork
	factory := func(name string) sandbox.BackendFactory {
		return func(cfg sandbox.BackendConfig) (sandbox.Backend, error) {
			var net sandbox.HostNetwork
			if cfg.Egress != nil {
				net = cfg.Egress.Net
			}
			got = append(got, net)
			return stubBackend{name: name}, nil
		}
	}
	registrations = func() []sandbox.Registration {
		return []sandbox.Registration{
			{Name: "gvisor", New: factory("gvisor"), Required: true},
			{Name: "microvm", New: factory("microvm")},
		}
	}
	plumb := network.New(network.Config{Name: "t01", ProxyPort: 1, DNSPort: 2})
	cfg := Config{Backend: "gvisor", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	b, err := newBackend(t.Context(), cfg, sandbox.BackendConfig{Egress: &sandbox.EgressWiring{Net: plumb}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.(*sandbox.Multi); !ok {
		t.Fatalf("got a %T, want a sandbox.Multi of both backends", b)
	}
	if len(got) != 2 {
		t.Fatalf("%d backends made, want 2", len(got))
	}
	for i, net := range got {
		if net != plumb {
			t.Errorf("backend %d was given plumbing %v, want the server's one", i, net)
		}
	}
}
