package network

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/vishvananda/netlink"
)

// Plumbing is one server's share of the host's network: its nft table and
// the veths of its sandboxes. A server makes one (New) and gives it to
// every backend it runs: they share its table and its pool of addresses,
// and the table goes with the last of them (Install, Uninstall).
type Plumbing struct {
	cfg Config

	installMu sync.Mutex // serializes Install and Uninstall, nft included
	// users are the backends that installed the plumbing and have not
	// uninstalled it; changed under installMu, read by Sweep.
	users atomic.Int32

	mu    sync.Mutex // guards slots and live
	slots *slots
	// live are the host ends this process attached or adopted and has
	// not detached: while several backends share the plumbing, one's
	// sweep never takes what another holds.
	live map[string]bool
}

// New returns the plumbing of cfg, not yet installed: nothing is checked
// or written before Install.
func New(cfg Config) *Plumbing {
	cfg.Pool = cfg.pool()
	return &Plumbing{cfg: cfg, slots: newSlots(cfg.Pool), live: map[string]bool{}}
}

// Install (re)writes the server's nft table in one transaction for the
// plumbing's first user; a later user (another backend of the server)
// shares what is installed. Writing is idempotent: a restarting server
// installs again, and sandboxes that were online stay online.
func (p *Plumbing) Install() error {
	if err := p.cfg.Validate(); err != nil {
		return err
	}
	p.installMu.Lock()
	defer p.installMu.Unlock()
	if p.users.Load() > 0 {
		p.users.Add(1)
		return nil
	}
	if err := nft(p.cfg.ruleset()); err != nil {
		return fmt.Errorf("installing table %s: %w", p.cfg.table(), err)
	}
	// What an earlier last user uninstalled is swept: start afresh.
	p.mu.Lock()
	p.slots, p.live = newSlots(p.cfg.Pool), map[string]bool{}
	p.mu.Unlock()
	p.users.Store(1)
	return nil
}

// Join installs the plumbing a server gave one of its backends as net
// (sandbox.EgressWiring's Net, an interface there, since the domain
// imports no network code) for that backend, and returns it.
func Join(net any) (*Plumbing, error) {
	p, ok := net.(*Plumbing)
	if !ok || p == nil {
		return nil, fmt.Errorf("egress wiring without the host's network plumbing (got %T)", net)
	}
	if err := p.Install(); err != nil {
		return nil, err
	}
	return p, nil
}

// hold and release track the links this process holds.
func (p *Plumbing) hold(name string) {
	p.mu.Lock()
	p.live[name] = true
	p.mu.Unlock()
}

func (p *Plumbing) release(name string) {
	p.mu.Lock()
	delete(p.live, name)
	p.mu.Unlock()
}

// Uninstall ends one user's share. The last removes every veth of this
// server and then its table: it is for a server that goes away for good
// (a restart installs again), and a veth left without the table would
// route a sandbox wherever the host routes.
func (p *Plumbing) Uninstall() error {
	p.installMu.Lock()
	defer p.installMu.Unlock()
	if p.users.Load() > 0 && p.users.Add(-1) > 0 {
		return nil // another backend of the server still uses it
	}
	return p.remove()
}

// remove deletes the server's veths and its table, installed or not.
func (p *Plumbing) remove() error {
	p.mu.Lock()
	p.live = map[string]bool{}
	p.mu.Unlock()
	if err := p.Sweep(func(string) bool { return false }); err != nil {
		return err
	}
	if err := nft(p.cfg.dropTable()); err != nil {
		return fmt.Errorf("deleting table %s: %w", p.cfg.table(), err)
	}
	return nil
}

// SetOnline lets the sandbox of l send (to the proxy and the resolver) or
// drops every packet it sends. A sandbox is offline after Attach.
func (p *Plumbing) SetOnline(l Link, online bool) error {
	link, err := p.hostEnd(l.HostIf)
	if err != nil {
		return err
	}
	group := 0
	if online {
		group = onlineGroup
	}
	if err := netlink.LinkSetGroup(link, group); err != nil {
		return fmt.Errorf("setting group of %s: %w", l.HostIf, err)
	}
	return nil
}

// Sweep deletes this server's veths whose host end keep refuses, and
// frees their addresses.
func (p *Plumbing) Sweep(keep func(hostIf string) bool) error {
	links, err := linkList()
	if err != nil {
		return fmt.Errorf("listing links: %w", err)
	}
	var errs []error
	for _, link := range links {
		name := link.Attrs().Name
		p.mu.Lock()
		held := p.live[name] && p.users.Load() > 1
		p.mu.Unlock()
		if !strings.HasPrefix(name, p.cfg.ifPrefix()) || link.Type() != "veth" || held || keep(name) {
			continue
		}
		addrs, _ := addrList(link, netlink.FAMILY_V4)
		if err := netlink.LinkDel(link); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s: %w", name, err))
			continue
		}
		var freed []netip.Prefix
		p.mu.Lock()
		for _, a := range addrs {
			if pfx, ok := prefixOf(a); ok && p.cfg.Pool.Overlaps(pfx) {
				p.slots.free(pfx)
				freed = append(freed, pfx)
			}
		}
		p.mu.Unlock()
		for _, pfx := range freed {
			_, sandboxAddr := ends(pfx)
			if err := forgetFlows(sandboxAddr); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// hostEnd finds this server's host end by name.
func (p *Plumbing) hostEnd(name string) (netlink.Link, error) {
	if !strings.HasPrefix(name, p.cfg.ifPrefix()) || len(name) > maxIfName {
		return nil, fmt.Errorf("%q is not an interface of this server", name)
	}
	link, err := netlink.LinkByName(name)
	if isNotFound(err) {
		return nil, fmt.Errorf("%s: %w", name, ErrNoLink)
	}
	if err != nil {
		return nil, fmt.Errorf("looking up %s: %w", name, err)
	}
	return link, nil
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, errNoDevice)
}

// nft runs an nft script as one transaction.
func nft(script string) error {
	path, err := exec.LookPath("nft")
	if err != nil {
		// root's PATH has /usr/sbin; a service's may not.
		path = "/usr/sbin/nft"
	}
	cmd := exec.Command(path, "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nft: %w: %s", err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

// Remove deletes what a server named name left on the host, veths and
// table, without installing anything: for a server whose data dir is
// gone, so that no server of it will ever come back.
func Remove(name string) error {
	if err := validName(name); err != nil {
		return err
	}
	return New(Config{Name: name}).remove()
}
