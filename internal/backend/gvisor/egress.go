package gvisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// Inside the sandbox: where the platform's own authority is trusted.

// attachNetwork wires the sandbox's namespace to the host's egress
// services, online or not as its policy says, and writes its resolver
// configuration. The link is kept in the state dir: a restarted server
// adopts it.
func (b *Backend) attachNetwork(id string, p paths, spec sandbox.Spec) error {
	if b.plumb == nil {
		return nil
	}
	link, err := b.plumb.Attach(id, p.netns)
	if err != nil {
		return fmt.Errorf("wiring the network: %w", err)
	}
	if err := b.plumb.SetOnline(link, spec.Network.Internet); err != nil {
		b.plumb.Detach(link)
		return err
	}
	data, _ := json.Marshal(link)
	if err := os.WriteFile(filepath.Join(p.state, "link.json"), data, 0o600); err != nil {
		b.plumb.Detach(link)
		return err
	}
	resolv := fmt.Sprintf("nameserver %s\noptions timeout:2 attempts:2\n", link.HostAddr)
	if err := os.WriteFile(filepath.Join(p.run, "resolv.conf"), []byte(resolv), 0o644); err != nil {
		b.plumb.Detach(link)
		return err
	}
	b.mu.Lock()
	b.links[id] = link
	b.mu.Unlock()
	return nil
}

// readLink loads the link a sandbox was given.
func (b *Backend) readLink(p paths) (network.Link, error) {
	var l network.Link
	data, err := os.ReadFile(filepath.Join(p.state, "link.json"))
	if err != nil {
		return l, err
	}
	return l, json.Unmarshal(data, &l)
}

// adoptNetwork takes over the link of a sandbox an earlier server started.
func (b *Backend) adoptNetwork(id string, p paths) error {
	if b.plumb == nil {
		return nil
	}
	link, err := b.readLink(p)
	if err != nil {
		return fmt.Errorf("reading the sandbox's link: %w", err)
	}
	if err := b.plumb.Adopt(link); err != nil {
		return err
	}
	b.mu.Lock()
	b.links[id] = link
	b.mu.Unlock()
	return nil
}

// detachNetwork removes the sandbox's link, if it has one.
func (b *Backend) detachNetwork(id string, p paths) error {
	if b.plumb == nil {
		return nil
	}
	b.mu.Lock()
	link, ok := b.links[id]
	delete(b.links, id)
	b.mu.Unlock()
	if !ok {
		l, err := b.readLink(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		link = l
	}
	err := b.plumb.Detach(link)
	os.Remove(filepath.Join(p.state, "link.json"))
	return err
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
func (b *Backend) SandboxAddr(id string) (netip.Addr, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.links[id]
	return l.SandboxAddr, ok
}

// SetOnline implements sandbox.Networked.
func (b *Backend) SetOnline(id string, online bool) error {
	b.mu.Lock()
	l, ok := b.links[id]
	b.mu.Unlock()
	if !ok {
		return fmt.Errorf("sandbox %s has no network link", id)
	}
	return b.plumb.SetOnline(l, online)
}
