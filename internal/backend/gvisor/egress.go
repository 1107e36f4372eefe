package gvisor

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Inside the sandbox: where the platform's own authority is trusted.

// attachNetwork wires the sandbox's namespace to the host's egress
// services, online or not as its policy says, and writes its resolver
// configuration. The link is kept in the state dir: a restarted server
// adopts it.
func (b *Backend) attachNetwork(id string, p paths, spec sandbox.Spec) error {
	if b.net == nil {
		return nil
	}
	link, err := b.net.Attach(id, p.netns, p.state, spec.Network.Internet)
	if err != nil {
		return err
	}
	resolv := fmt.Sprintf("nameserver %s\noptions timeout:2 attempts:2\n", link.HostAddr)
	if err := os.WriteFile(filepath.Join(p.run, "resolv.conf"), []byte(resolv), 0o644); err != nil {
		b.net.Detach(id, p.state)
		return err
	}
	return nil
}

// egressMounts are the resolver configuration and the trusted roots.
func (b *Backend) egressMounts(p paths) []specs.Mount {
	if b.plumb == nil {
		return nil
	}
	m := []specs.Mount{{Destination: "/etc/resolv.conf", Type: "bind", Source: filepath.Join(p.run, "resolv.conf"), Options: []string{"rbind", "ro"}}}
	if w := b.cfg.Egress; w.CABundle != "" && w.CACert != "" {
		m = append(m,
			specs.Mount{Destination: sandbox.CABundlePath, Type: "bind", Source: w.CABundle, Options: []string{"rbind", "ro"}},
			specs.Mount{Destination: sandbox.CACertPath, Type: "bind", Source: w.CACert, Options: []string{"rbind", "ro"}},
		)
	}
	return m
}

// SandboxAddr implements sandbox.Networked.
func (b *Backend) SandboxAddr(id string) (netip.Addr, bool) { return b.net.Addr(id) }

// SetOnline implements sandbox.Networked.
func (b *Backend) SetOnline(id string, online bool) error { return b.net.SetOnline(id, online) }
